"""JavaScript and TypeScript: what a rewrite breaks when it turns a function declaration into a variable that holds
a function (asked to "convert it to an arrow function", the coder writes `const total = (items) => {`).

- A `function` declaration is hoisted: the file may use it above the line that defines it. A `const`, `let` or
  `class` is not: a use that runs before its line throws ReferenceError ("Cannot access 'total' before
  initialization"); a `var` is hoisted as `undefined`, so a call throws TypeError and any other use reads
  `undefined`. A use counts when it runs as the scope that holds the definition runs, above the definition: not
  one inside a function or class body, which runs later (when called).
- An arrow function is not a constructor (`new total()` throws TypeError) and takes `this` and `arguments` from
  where it is defined, not from its call.

Neither the parser nor, for a plain `.js` file, anything else says a word. Read with tree-sitter; a file that does
not parse is not judged, nor is a method (a class body's order does not matter).

Also the names a file declares twice in one scope where one is a `let`, `const`, `class` or import
(`redeclarations`): JavaScript will not load such a file (SyntaxError: Identifier 'x' has already been declared),
though it parses (an answer that opens with `const TAX_RATE = 0.25;` above the function, in a file that has
`const TAX_RATE = 0.2;`)."""

from __future__ import annotations

from .locate import LanguageSpec, _js_bindings, parse, pattern_names

LANGUAGES = ("javascript", "typescript", "tsx")
DECLARATIONS = ("function_declaration", "lexical_declaration", "variable_declaration", "class_declaration")
# Bodies that run later than the code around them (when called, or when an instance is made).
LATER = (
    "function_declaration",
    "function_expression",
    "function",
    "arrow_function",
    "generator_function_declaration",
    "generator_function",
    "method_definition",
    "class_body",
)
# Functions with a `this` and `arguments` of their own (an arrow function has neither).
OWN_THIS = tuple(t for t in LATER if t not in ("arrow_function", "class_body")) + ("class_body",)
# Where a name is a type, not a value (TypeScript's `typeof total` in an annotation runs nothing).
TYPES = ("type_annotation", "type_query", "type_alias_declaration", "interface_declaration", "type_arguments")


def _text(node, data: bytes) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def _declared(statement, data: bytes, name: str) -> tuple[str, object] | None:
    """(how `statement` declares `name`, the function node it binds) when it does: "function" for a function
    declaration, else its keyword ("const", "let", "var", "class"; the function node then is the value, or None
    when the value is not a function)."""
    if statement.type == "export_statement":
        inner = statement.child_by_field_name("declaration")
        return None if inner is None else _declared(inner, data, name)
    if statement.type in ("function_declaration", "class_declaration"):
        own = statement.child_by_field_name("name")
        if own is None or _text(own, data) != name:
            return None
        return ("function", statement) if statement.type == "function_declaration" else ("class", None)
    if statement.type in ("lexical_declaration", "variable_declaration"):
        for declarator in statement.children:
            if declarator.type != "variable_declarator":
                continue
            own, value = declarator.child_by_field_name("name"), declarator.child_by_field_name("value")
            if own is not None and _text(own, data) == name:
                function = value if value is not None and value.type in LATER[1:4] else None
                return statement.children[0].type, function
    return None


def _declaration(root, data: bytes, name: str, rows: tuple[int, int] | None = None):
    """The statement that declares `name` and the declaration's (kind, function node), the first whose statement
    starts within `rows` (0-based, inclusive; anywhere when None). The search enters the function bodies that hold
    `rows` (a nested function's), not those within them (a helper's locals). (None, None) when there is none."""
    stack = [root]
    while stack:
        node = stack.pop()
        inside = rows is None or rows[0] <= node.start_point[0] <= rows[1]
        if inside and node.type in (*DECLARATIONS, "export_statement"):
            found = _declared(node, data, name)
            if found is not None:
                return node, found
        if rows is not None and (node.end_point[0] < rows[0] or node.start_point[0] > rows[1]):
            continue
        if inside and node.type in LATER:
            continue
        stack.extend(reversed(node.children))
    return None, None


def declared_as(code: str, spec: LanguageSpec, name: str) -> tuple[str, str] | None:
    """How `code` (a definition's region, or an answer) declares `name`: its kind ("function", "const", "let",
    "var", "class") and its value's ("function" for a function expression or declaration, "arrow", or ""). None
    when the code does not parse or declares no such name."""
    data = code.encode("utf-8")
    tree = parse(data, spec)
    if tree.root_node.has_error:
        return None
    _, found = _declaration(tree.root_node, data, name)
    if found is None:
        return None
    kind, function = found
    value = "" if function is None else "arrow" if function.type == "arrow_function" else "function"
    return kind, value


def declaration_change(
    old_region: str, new_region: str, spec: LanguageSpec, names: tuple[str, str]
) -> tuple[str, str] | None:
    """How the rewrite now declares its function, when that loses what the old declaration had: (kind, value) as
    `declared_as` gives it, when the old one was a function declaration and the new one is not, or the old one's
    value was an ordinary function and the new one's is an arrow function; else None. `names`: the function's
    name in each region (the second differs when the rewrite renamed it)."""
    if spec.name not in LANGUAGES:
        return None
    was, now = declared_as(old_region, spec, names[0]), declared_as(new_region, spec, names[1])
    if was is None or now is None:
        return None
    unhoisted = was[0] == "function" and now[0] != "function"
    arrow = was[1] == "function" and now[1] == "arrow"
    return now if unhoisted or arrow else None


def _uses(node, data: bytes, name: str, end: int, found: list) -> None:
    """The uses of `name` as a value in `node` before byte `end`, outside bodies that run later."""
    stack = [node]
    while stack:
        n = stack.pop()
        if n.start_byte >= end or n.type in LATER or n.type in TYPES:
            continue
        if n.type in ("identifier", "shorthand_property_identifier") and _text(n, data) == name:
            found.append(n)
        stack.extend(n.children)


def broken_uses(text: str, spec: LanguageSpec, name: str, rows: tuple[int, int]) -> tuple[list[int], list[str]]:
    """After a rewrite that declares `name` in lines `rows` of `text` (1-based, inclusive) as `declaration_change`
    found: the lines of the file that use it before its declaration runs (the uses that hoisting made work), and
    what an arrow function makes fail, as "line N: `new total(...)`" (not a constructor) or "line N: `this`"
    (read from where it is defined). ([], []) when the text does not parse."""
    data = text.encode("utf-8")
    tree = parse(data, spec)
    if tree.root_node.has_error:
        return [], []
    statement, found = _declaration(tree.root_node, data, name, (rows[0] - 1, rows[1] - 1))
    if statement is None:
        return [], []
    kind, function = found
    early: list = []
    if kind != "function" and statement.parent is not None:
        for sibling in statement.parent.children:
            _uses(sibling, data, name, statement.start_byte, early)
    arrow: list[str] = []
    if function is not None and function.type == "arrow_function":
        for n in _all(tree.root_node):
            f = n.child_by_field_name("constructor") if n.type == "new_expression" else None
            if f is not None and f.type == "identifier" and _text(f, data) == name:
                arrow.append(f"line {n.start_point[0] + 1}: `new {name}(...)`")
        seen = set()
        for n in _own(function):
            word = "this" if n.type == "this" else _text(n, data) if n.type == "identifier" else ""
            if word in ("this", "arguments") and (n.start_point[0], word) not in seen:
                seen.add((n.start_point[0], word))
                arrow.append(f"line {n.start_point[0] + 1}: `{word}`")
    return sorted({n.start_point[0] + 1 for n in early}), arrow


def _all(root):
    stack = [root]
    while stack:
        node = stack.pop()
        yield node
        stack.extend(reversed(node.children))


def _own(function):
    """The nodes of an arrow function's body outside the functions and classes in it that have a `this` of their
    own (an arrow function in it shares its `this`)."""
    stack = list(reversed(function.children))
    while stack:
        node = stack.pop()
        if node.type in OWN_THIS:
            continue
        yield node
        stack.extend(reversed(node.children))


# The nodes whose statements share one scope for `let`, `const` and `class` (a switch's cases share its body's).
SCOPES = ("program", "statement_block", "switch_body")


def redeclarations(text: str, spec: LanguageSpec) -> dict[str, int]:
    """The names `text` declares twice in one scope where one of the declarations is lexical (`let`, `const`,
    `class`, an import), with the line (1-based) of the second; {} when the text does not parse or in another
    language. A `var` or `function` declared twice is allowed (a script's), as are TypeScript's merged
    declarations (a namespace, an enum, an interface, an overload's signature: none is counted)."""
    if spec.name not in LANGUAGES:
        return {}
    data = text.encode("utf-8")
    tree = parse(data, spec)
    if tree.root_node.has_error:
        return {}
    found: dict[str, int] = {}
    for scope in _all(tree.root_node):
        if scope.type not in SCOPES:
            continue
        statements = scope.named_children
        if scope.type == "switch_body":
            statements = [s for case in statements for s in case.named_children]
        seen: dict[str, list[bool]] = {}
        for statement in statements:
            for name, lexical, row in _declares(statement, data, spec):
                kinds = seen.setdefault(name, [])
                kinds.append(lexical)
                if len(kinds) > 1 and any(kinds):
                    found.setdefault(name, row + 1)
    return found


def _declares(statement, data: bytes, spec: LanguageSpec):
    """(name, lexical, row) for each name a statement declares in its scope."""
    if statement.type == "export_statement":
        inner = statement.child_by_field_name("declaration")
        return [] if inner is None else _declares(inner, data, spec)
    row = statement.start_point[0]
    if statement.type in ("lexical_declaration", "variable_declaration"):
        lexical = statement.type == "lexical_declaration"
        return [
            (name, lexical, row)
            for declarator in statement.named_children
            if declarator.type == "variable_declarator"
            for name in pattern_names(declarator.child_by_field_name("name"))
        ]
    if statement.type in ("class_declaration", "function_declaration"):
        own = statement.child_by_field_name("name")
        return [] if own is None else [(_text(own, data), statement.type == "class_declaration", row)]
    if statement.type == "import_statement":
        return [(name, True, row) for name in _js_bindings(_text(statement, data), spec) or ()]
    return []
