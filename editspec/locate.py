"""Find the function, method or class to rewrite, with tree-sitter.

A `Definition` is a named region of a file: the definition itself plus what belongs to it above (decorators,
attributes, a template header, leading doc comments), as whole lines. Methods are named `Class.method`
(`Type.method` for Go receivers and Rust impls). Lookup is by name, by position, or by byte range.
"""

from __future__ import annotations

import bisect
import difflib
import importlib
import re
import threading
import time
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import tree_sitter as ts


class LocateError(Exception):
    """Nothing (or more than one thing) matches; the message says what to do."""


@dataclass(frozen=True)
class LanguageSpec:
    name: str
    module: str
    function: str  # the module's function that returns the grammar
    extensions: tuple[str, ...]
    definitions: frozenset[str]  # node types that are rewrite targets
    containers: frozenset[str] = frozenset()  # node types whose name qualifies what is inside (no target)
    wrappers: frozenset[str] = frozenset()  # parents that belong to a definition (decorators, export, template)
    leading: frozenset[str] = frozenset({"comment"})  # siblings right above that belong to it
    imports: frozenset[str] = frozenset()
    fence: str = ""  # the code-fence language tag


def _f(*names: str) -> frozenset[str]:
    return frozenset(names)


JS_DEFS = _f(
    "function_declaration",
    "generator_function_declaration",
    "method_definition",
    "class_declaration",
    # a function as a value (see _name): `const f = () =>`, a class field `onClick = () =>` (JavaScript's and
    # TypeScript's node), an object's `post: async () =>`, `module.exports.f = function`, `A.prototype.f = ...`
    "variable_declarator",
    "field_definition",
    "public_field_definition",
    "pair",
    "assignment_expression",
)
# Values that may share their lines with other code (an object's other keys, a statement's start): a definition
# only when alone on them. (`assignment_statement`: Lua's `M.f = function`.)
SHARED_LINES = _f(
    "pair", "field_definition", "public_field_definition", "assignment_expression", "assignment_statement"
)
JS_WRAPPERS = _f("export_statement", "lexical_declaration", "variable_declaration", "expression_statement")
TS_WRAPPERS = JS_WRAPPERS | _f("ambient_declaration")  # `declare function f(): void;`
FUNCTION_VALUES = _f("arrow_function", "function_expression", "function", "generator_function", "class")
# TypeScript's bodiless signatures: a declaration, or an overload (then grouped with the others of its name and
# the implementation that follows them: see _group_overloads).
SIGNATURES = _f("function_signature", "method_signature", "abstract_method_signature")
TS_DEFS = JS_DEFS | _f("abstract_class_declaration", "interface_declaration") | SIGNATURES
LANGUAGES = {
    s.name: s
    for s in [
        LanguageSpec(
            "python",
            "tree_sitter_python",
            "language",
            (".py", ".pyi"),
            _f("function_definition", "class_definition"),
            wrappers=_f("decorated_definition"),
            imports=_f("import_statement", "import_from_statement", "future_import_statement"),
        ),
        LanguageSpec(
            "javascript",
            "tree_sitter_javascript",
            "language",
            (".js", ".mjs", ".cjs", ".jsx"),
            JS_DEFS,
            wrappers=JS_WRAPPERS,
            imports=_f("import_statement"),
        ),
        LanguageSpec(
            "typescript",
            "tree_sitter_typescript",
            "language_typescript",
            (".ts", ".mts", ".cts"),
            TS_DEFS,
            wrappers=TS_WRAPPERS,
            imports=_f("import_statement"),
        ),
        LanguageSpec(
            "tsx",
            "tree_sitter_typescript",
            "language_tsx",
            (".tsx",),
            TS_DEFS,
            wrappers=TS_WRAPPERS,
            imports=_f("import_statement"),
            fence="tsx",
        ),
        LanguageSpec(
            "go",
            "tree_sitter_go",
            "language",
            (".go",),
            _f("function_declaration", "method_declaration", "type_spec"),
            wrappers=_f("type_declaration"),
            imports=_f("import_declaration", "package_clause"),
        ),
        LanguageSpec(
            "rust",
            "tree_sitter_rust",
            "language",
            (".rs",),
            _f("function_item", "struct_item", "enum_item", "trait_item", "function_signature_item"),
            containers=_f("impl_item", "mod_item"),
            leading=_f("line_comment", "block_comment", "attribute_item"),
            imports=_f("use_declaration", "extern_crate_declaration"),
        ),
        LanguageSpec(
            "java",
            "tree_sitter_java",
            "language",
            (".java",),
            _f(
                "method_declaration",
                "constructor_declaration",
                "class_declaration",
                "interface_declaration",
                "enum_declaration",
                "record_declaration",
            ),
            leading=_f("line_comment", "block_comment"),
            imports=_f("import_declaration", "package_declaration"),
        ),
        LanguageSpec(
            "c",
            "tree_sitter_c",
            "language",
            (".c", ".h"),
            _f("function_definition", "struct_specifier"),
            imports=_f("preproc_include"),
        ),
        LanguageSpec(
            "cpp",
            "tree_sitter_cpp",
            "language",
            (".cc", ".cpp", ".cxx", ".hpp", ".hh", ".hxx"),
            _f("function_definition", "class_specifier", "struct_specifier"),
            containers=_f("namespace_definition"),
            wrappers=_f("template_declaration"),
            imports=_f("preproc_include", "using_declaration"),
        ),
        LanguageSpec(
            "csharp",
            "tree_sitter_c_sharp",
            "language",
            (".cs",),
            _f(
                "method_declaration",
                "constructor_declaration",
                "class_declaration",
                "struct_declaration",
                "interface_declaration",
                "record_declaration",
                "local_function_statement",
                "property_declaration",
                "indexer_declaration",
                "operator_declaration",
                "destructor_declaration",
            ),
            containers=_f("namespace_declaration", "file_scoped_namespace_declaration"),
            imports=_f("using_directive"),
            fence="csharp",
        ),
        LanguageSpec(
            "ruby",
            "tree_sitter_ruby",
            "language",
            (".rb", ".rake", ".gemspec"),
            _f("method", "singleton_method", "class"),
            containers=_f("module", "singleton_class"),
        ),
        LanguageSpec(
            "php",
            "tree_sitter_php",
            "language_php_only",  # PHP without HTML around it: a file with `<?php`, and code shown without it
            (".php",),
            _f(
                "function_definition",
                "method_declaration",
                "class_declaration",
                "interface_declaration",
                "trait_declaration",
                "enum_declaration",
            ),
            containers=_f("namespace_definition"),  # `namespace A { ... }` (`namespace A;` holds nothing)
            imports=_f("namespace_use_declaration"),
        ),
        LanguageSpec(
            "kotlin",
            "tree_sitter_kotlin",
            "language",
            (".kt", ".kts"),
            _f("function_declaration", "class_declaration", "object_declaration"),
            containers=_f("companion_object"),
            leading=_f("line_comment", "block_comment"),
            imports=_f("import", "package_header"),
        ),
        LanguageSpec(
            "swift",
            "tree_sitter_swift",
            "language",
            (".swift",),
            _f(
                "function_declaration",
                "init_declaration",
                "deinit_declaration",
                "subscript_declaration",
                "property_declaration",
                "class_declaration",
                "protocol_declaration",
                "protocol_function_declaration",
            ),
            leading=_f("comment", "multiline_comment"),
            imports=_f("import_declaration"),
        ),
        LanguageSpec(
            "bash",
            "tree_sitter_bash",
            "language",
            (".sh", ".bash"),
            _f("function_definition"),
        ),
        LanguageSpec(
            "lua",
            "tree_sitter_lua",
            "language",
            (".lua",),
            _f("function_declaration", "assignment_statement"),
            wrappers=_f("variable_declaration"),
        ),
    ]
}
ALIASES = {
    "py": "python",
    "js": "javascript",
    "ts": "typescript",
    "rs": "rust",
    "c++": "cpp",
    "cs": "csharp",
    "c#": "csharp",
    "golang": "go",
    "rb": "ruby",
    "kt": "kotlin",
    "sh": "bash",
    "shell": "bash",
}
# Classes are targets and also qualify the names of their members.
CLASS_LIKE = _f(
    "class_definition",
    "class_declaration",
    "abstract_class_declaration",
    "class_specifier",
    "struct_specifier",
    "interface_declaration",
    "struct_declaration",
    "record_declaration",
    "enum_declaration",
    "trait_item",
    "class",
    "trait_declaration",
    "object_declaration",
    "protocol_declaration",
)


def language_for(path: str | Path | None, flag: str | None = None) -> LanguageSpec:
    if flag:
        key = ALIASES.get(flag.lower(), flag.lower())
        if key not in LANGUAGES:
            raise LocateError(f"unknown language {flag!r}; supported: {', '.join(sorted(LANGUAGES))}")
        return LANGUAGES[key]
    suffix = Path(str(path or "")).suffix.lower()
    for spec in LANGUAGES.values():
        if suffix in spec.extensions:
            return spec
    raise LocateError(
        f"cannot tell the language of {path or 'standard input'} from its name: pass --language "
        f"({', '.join(sorted(LANGUAGES))})"
    )


@cache
def language_of(spec: LanguageSpec) -> ts.Language:
    module = importlib.import_module(spec.module)
    return ts.Language(getattr(module, spec.function)())


_parsers = threading.local()  # a tree-sitter parser must not be used by two threads at once


def parser_for(spec: LanguageSpec) -> ts.Parser:
    kept = _parsers.__dict__.setdefault("by_language", {})
    if spec.name not in kept:
        kept[spec.name] = ts.Parser(language_of(spec))
    return kept[spec.name]


@dataclass
class Definition:
    name: str  # qualified: "Class.method"
    kind: str  # the tree-sitter node type
    start: int  # byte offsets of the region (whole lines, decorators and leading comments included)
    end: int
    node_start: int  # byte offsets of the definition node itself
    node_end: int
    line: int  # 1-based line where the region starts
    end_line: int  # 1-based last line of the region
    containers: list[str] = field(default_factory=list)  # header lines of enclosing classes, outermost first
    # Where its own text begins and ends within the region (leading comments, decorators and wrappers such as
    # `export` included): what is before on its first line, or after on its last, is not its (see outside_code).
    own_start: int = -1
    own_end: int = -1

    @property
    def simple_name(self) -> str:
        return self.name.rsplit(".", 1)[-1]


def _text(node: ts.Node | None) -> str:
    return node.text.decode("utf-8", errors="replace") if node is not None and node.text else ""


def _without_type_arguments(name: str) -> str:
    """`Matrix<T>::get` as `Matrix::get`, `Stack<Vec<T>>` as `Stack`: names are typed without them (an
    operator's own `<`, `<=>` stay)."""
    name, operator, rest = name.partition("operator")
    while True:
        shorter = re.sub(r"<[^<>]*>", "", name)
        if shorter == name:
            return name + operator + rest
        name = shorter


def _declarator_name(node: ts.Node) -> str:
    """C/C++: follow the declarator chain down to the name (Foo::bar stays qualified)."""
    while node is not None:
        if node.type in (
            "identifier",
            "field_identifier",
            "qualified_identifier",
            "destructor_name",
            "operator_name",
            "type_identifier",
        ):
            return _without_type_arguments(_text(node)).replace("::", ".")
        node = node.child_by_field_name("declarator") or (node.named_children[0] if node.named_children else None)
    return ""


def _receiver_type(receiver: ts.Node) -> str:
    """Go: the type a method's receiver names, `Stack` of `(s *Stack[T])`, `(Stack)` or `(m Map[K, V])`."""
    declaration = next((c for c in receiver.named_children if c.type == "parameter_declaration"), None)
    node = declaration.child_by_field_name("type") if declaration is not None else None
    while node is not None and node.type in ("pointer_type", "generic_type", "parenthesized_type"):
        node = node.child_by_field_name("type") or next(
            (c for c in node.named_children if c.type != "type_arguments"), None
        )
    return _text(node) if node is not None and node.type == "type_identifier" else ""


def _name(node: ts.Node) -> str:
    if node.type == "function_definition" and node.child_by_field_name("declarator") is not None:
        return _declarator_name(node.child_by_field_name("declarator"))
    if node.type == "method_declaration" and node.child_by_field_name("receiver") is not None:
        type_name = _receiver_type(node.child_by_field_name("receiver"))
        return f"{type_name}.{_text(node.child_by_field_name('name'))}" if type_name else ""
    if node.type in ("variable_declarator", "field_definition", "public_field_definition", "pair"):
        value = node.child_by_field_name("value")  # only functions (and classes) count, not other values
        if value is None or value.type not in FUNCTION_VALUES:
            return ""
        if node.type == "field_definition":
            return _text(node.child_by_field_name("property"))
        if node.type == "pair":
            key = node.child_by_field_name("key")
            return _text(key).strip("'\"") if key is not None and key.type in ("property_identifier", "string") else ""
    if node.type == "assignment_statement":  # Lua: `M.helper = function(x)`, `local f = function()`
        names, values = node.named_children[0], node.named_children[-1]
        if len(names.named_children) != 1 or len(values.named_children) != 1:
            return ""
        return _text(names.named_children[0]) if values.named_children[0].type == "function_definition" else ""
    if node.type == "function_declaration" and node.child_by_field_name("name") is not None:
        return _text(node.child_by_field_name("name")).replace(":", ".")  # Lua's `function Ledger:add`
    if node.type == "assignment_expression":  # a statement of its own, giving a property a function
        left, value = node.child_by_field_name("left"), node.child_by_field_name("right")
        if node.parent is None or node.parent.type != "expression_statement" or value is None:
            return ""
        if value.type not in FUNCTION_VALUES or left is None or left.type != "member_expression":
            return ""
        return "".join(_text(left).split())
    name = node.child_by_field_name("name")
    if node.type == "property_declaration" and name is not None and name.type == "pattern":
        # Swift: a computed property (`var balance: Int { ... }`), not a stored one or a local variable
        return _text(name) if node.child_by_field_name("computed_value") is not None else ""
    if node.type in ("init_declaration", "deinit_declaration", "subscript_declaration"):
        return node.type.split("_")[0]  # Swift: `init`, `deinit`, `subscript`
    if node.type == "property_declaration":  # C#: one with code (`=> ...`, `get { ... }`), not `{ get; set; }`
        accessors = node.child_by_field_name("accessors")
        bodies = [a for a in (accessors.named_children if accessors else []) if a.child_by_field_name("body")]
        return _text(node.child_by_field_name("name")) if node.child_by_field_name("value") or bodies else ""
    if node.type == "indexer_declaration":
        return "this"
    if node.type == "destructor_declaration":  # apart from the constructor, which has the class's name too
        return "~" + _text(node.child_by_field_name("name"))
    if node.type == "operator_declaration":
        return "operator" + _text(node.child_by_field_name("operator"))
    if node.type in ("impl_item",):  # `impl<T> Display for &mut Stack<T>`: Stack
        plain = _without_type_arguments(_text(node.child_by_field_name("type")))
        return plain.replace("&", " ").split()[-1].rsplit("::", 1)[-1] if plain.strip("& ") else ""
    if node.type in ("struct_specifier", "class_specifier") and node.child_by_field_name("body") is None:
        return ""  # `struct vec *v` names a type; it defines nothing
    return _text(node.child_by_field_name("name"))


def _header(node: ts.Node, source: bytes) -> str:
    """The first line of a class-like node (what the model needs to know it is inside a class)."""
    line_start = source.rfind(b"\n", 0, node.start_byte) + 1
    line_end = source.find(b"\n", node.start_byte)
    return source[line_start : line_end if line_end >= 0 else len(source)].decode("utf-8", errors="replace")


BOM = "\ufeff".encode("utf-8")


def _wrapped(node: ts.Node, spec: LanguageSpec) -> ts.Node:
    """The node with the wrappers that belong to it (decorators, `export`, `const`)."""
    top = node
    while top.parent is not None and top.parent.type in spec.wrappers:
        if top.parent.type in ("lexical_declaration", "variable_declaration") and (
            sum("comment" not in c.type for c in top.parent.named_children) > 1
        ):
            break  # const a = () => 1, b = 2: the declaration is more than this function (a comment in it is not)
        top = top.parent
    return top


def _region(node: ts.Node, spec: LanguageSpec, source: bytes) -> tuple[int, int, int, int]:
    """The definition's lines (from the start of the first to the end of the last) and its own text in them."""
    top = _wrapped(node, spec)
    start = top.start_byte
    sibling = top.prev_sibling
    while sibling is not None and sibling.type in spec.leading:
        gap = source[sibling.end_byte : start]
        if gap.count(b"\n") > 1:  # a blank line: that comment is not this definition's
            break
        if source[source.rfind(b"\n", 0, sibling.start_byte) + 1 : sibling.start_byte].strip():
            break  # `LIMIT = 10  # the most`: a comment at the end of a line of code is that line's
        start = sibling.start_byte
        sibling = sibling.prev_sibling
    line_start = source.rfind(b"\n", 0, start) + 1
    if line_start == 0 and source.startswith(BOM) and start >= len(BOM):
        line_start = len(BOM)  # a byte order mark is the file's, not the first line's: a rewrite keeps it
    # Only the definition's own lines: stop at the end of its last line (keep what follows on that line).
    newline = source.find(b"\n", top.end_byte)
    end = len(source) if newline < 0 else newline + 1
    return line_start, end, start, top.end_byte


PARSE_CHUNK = 1 << 12  # node.text on a tree parsed from chunks reads a chunk per node: keep them small


def parse(source: bytes, spec: LanguageSpec, budget: float | None = None, old: ts.Tree | None = None) -> ts.Tree:
    """Parse. With a `budget` (seconds), other Python threads run meanwhile (a language server's event loop
    must not wait on a pathological file: tree-sitter's time can grow quadratically), and a parse longer than
    the budget is a LocateError."""
    deadline = None if budget is None else time.monotonic() + budget

    def read(offset: int, _point) -> bytes:
        return source[offset : offset + PARSE_CHUNK]

    def halt(*_state) -> bool:  # tree-sitter calls this often; a Python call lets other threads take the GIL
        return deadline is not None and time.monotonic() > deadline

    parser = parser_for(spec)
    if budget is None:  # the tree then holds the bytes: node.text is a slice, not a call back into Python
        return parser.parse(source) if old is None else parser.parse(source, old)
    try:
        if old is None:
            return parser.parse(read, progress_callback=halt)
        return parser.parse(read, old, progress_callback=halt)
    except ValueError:
        raise LocateError(f"the file took longer than {budget:g} s to parse; is it generated code?") from None


@cache
def definition_query(spec: LanguageSpec) -> ts.Query:
    language = language_of(spec)
    known = [t for t in sorted(spec.definitions) if language.id_for_node_kind(t, True)]  # (grammars differ)
    return ts.Query(language, " ".join(f"({t}) @d" for t in known))


def _scope(node: ts.Node, spec: LanguageSpec, source: bytes) -> tuple[list[str], list[str]]:
    """Names and header lines of the classes and namespaces around a node, outermost first."""
    names: list[str] = []
    headers: list[str] = []
    parent = node.parent
    while parent is not None:
        if parent.type in CLASS_LIKE or parent.type in spec.containers:
            name = _name(parent)
            if name:
                names.insert(0, name)
                if parent.type in CLASS_LIKE:
                    headers.insert(0, _header(parent, source))
        parent = parent.parent
    return names, headers


def definitions(source: bytes, spec: LanguageSpec, tree: ts.Tree | None = None) -> list[Definition]:
    """Every definition in the file, in order of position (outer before inner)."""
    tree = tree or parse(source, spec)
    # A query runs in C: on a 5,000-line file it is several times faster than walking the tree in Python.
    nodes = ts.QueryCursor(definition_query(spec)).captures(tree.root_node).get("d", [])
    newlines = [m.start() for m in re.finditer(b"\n", source)]

    def line_of(offset: int) -> int:
        return bisect.bisect_left(newlines, offset) + 1

    found = []
    for node in sorted(nodes, key=lambda n: (n.start_byte, -n.end_byte)):
        name = _name(node)
        if not name:
            continue
        scope, headers = _scope(node, spec, source)
        start, end, own_start, own_end = _region(node, spec, source)
        if node.type in SHARED_LINES and not _alone(source, end, _wrapped(node, spec)):
            continue  # `{ a: () => 1, b: () => 2 }`: its lines hold more than it, which a rewrite would replace
        found.append(
            Definition(
                ".".join([*scope, name]),
                node.type,
                start,
                end,
                node.start_byte,
                node.end_byte,
                line_of(start),
                line_of(max(start, end - 1)),
                headers,
                own_start,
                own_end,
            )
        )
    return _group_overloads(found, source)


# Overloads: TypeScript's bodiless signatures of one name, Python's `@overload` stubs, then (except in an interface
# or a declaration file) the implementation. Apart, `--function parse` would match each of them and ask for a
# line, and a rewrite of the implementation alone could not change the signatures its change needs; together
# they are one definition. So are a Python property's getter and its setter and deleter.
PY_OVERLOAD = re.compile(rb"^[ \t]*@[ \t]*(?:\w+[ \t]*\.[ \t]*)*overload[ \t]*(?:#.*)?$", re.MULTILINE)


def _is_overload(d: Definition, source: bytes) -> bool:
    """Whether a definition (not yet grouped) is an overload's signature, which the next one of its name joins."""
    if d.kind in SIGNATURES:
        return True
    return (
        d.kind == "function_definition"
        and d.start < d.node_start
        and bool(PY_OVERLOAD.search(source, d.start, d.node_start))
    )


def _is_accessor(d: Definition, source: bytes) -> bool:
    """Python: a property's setter, deleter or getter (`@size.setter` above `def size`), which joins the property."""
    if d.kind != "function_definition":
        return False
    name = re.escape(d.simple_name.encode())
    accessor = rb"^[ \t]*@[ \t]*" + name + rb"[ \t]*\.[ \t]*(?:setter|deleter|getter)[ \t]*(?:#.*)?$"
    return bool(re.compile(accessor, re.MULTILINE).search(source, d.start, d.node_start))


def _group_overloads(found: list[Definition], source: bytes) -> list[Definition]:
    grouped: list[Definition] = []
    open_group = False  # whether the last of `grouped` ends with an overload's signature
    for d in found:
        prev = grouped[-1] if grouped else None
        if (
            prev is not None
            and prev.name == d.name
            and prev.containers == d.containers
            and prev.end <= d.start
            and (open_group or _is_accessor(d, source))
            and _only_comments(source[prev.end : d.start])
        ):
            grouped[-1] = replace(d, start=prev.start, line=prev.line, own_start=prev.own_start)
        else:
            grouped.append(d)
        open_group = _is_overload(d, source)
    return grouped


def _alone(source: bytes, end: int, top: ts.Node) -> bool:
    """Whether a definition's lines hold only it (`top`: it with its wrappers; `end`: its region's end): before it
    on its first line indentation, after it a comma or semicolon and a comment at most. (Its leading comments
    are on lines of their own: see _region.)"""
    head = source[source.rfind(b"\n", 0, top.start_byte) + 1 : top.start_byte]
    tail = source[top.end_byte : end].decode("utf-8", "replace")
    return not head.strip() and bool(re.fullmatch(r"[,;]?[ \t]*(//.*|/\*.*|--.*|#.*)?\s*", tail))


def _only_comments(gap: bytes) -> bool:
    """Whether the lines between two definitions hold nothing but blank lines and comments."""
    lines = [line.strip() for line in gap.splitlines()]
    return all(not line or line.startswith((b"//", b"/*", b"*", b"#")) for line in lines)


def outermost(defs: list[Definition]) -> list[Definition]:
    """The definitions of `defs` whose region lies inside no other one's."""
    return [d for d in defs if not any(o is not d and o.start <= d.start and d.end <= o.end for o in defs)]


def part_of(d: Definition, target: Definition) -> bool:
    """Whether `d` is part of the target: it, or a definition inside it (on its lines or not)."""
    return target.node_start <= d.node_start and d.node_end <= target.node_end


def sharing_lines(defs: list[Definition], target: Definition, source: bytes) -> list[Definition]:
    """The definitions that share the target's lines without being part of it: its parent or a neighbour on the
    same line (`function total(xs) { const price = (x) => x.cost; ... }`, minified `function a(){} function
    b(){}`, a class closed on its last method's line). A rewrite replaces whole lines, so the target's code shows
    them and its answer must keep them. Not the target, what it holds, or its overloads (of its name: one
    definition with it), nor a class around it that begins on an earlier line and ends on a later one or where
    the target ends (a Python class at its last method's end; comments after it aside)."""

    def closes_after(d: Definition) -> bool:
        tail = source[target.node_end : d.node_end].decode("utf-8", "replace")
        return d.node_end > target.node_end and bool(COMMENTS.sub("", tail).strip())

    return [
        d
        for d in defs
        if (target.start <= d.node_start < target.end or (target.start < d.node_end <= target.end and closes_after(d)))
        and not part_of(d, target)
        and d.name != target.name
    ]


def outside_code(tree: ts.Tree, target: Definition, source: bytes) -> tuple[list[bytes], list[bytes]]:
    """The code on the target's lines that is not its own, as the parser's tokens: before it on its first line
    (`let n = 0; function a(x) {`) and after it on its last (`} a(1);`; a lone comma or semicolon closing it
    aside). A rewrite replaces whole lines, so the code shown holds it and an answer must keep it. Comments are
    not counted."""
    if target.own_start < 0:
        return [], []
    before = code_leaves(tree, target.start, target.own_start, source)
    after = code_leaves(tree, target.own_end, target.end, source)
    if after in ([b","], [b";"]):
        after = []
    return before, after


def code_leaves(tree: ts.Tree, start: int, end: int, source: bytes, skip: frozenset[str] = frozenset()) -> list[bytes]:
    """The text of the tree's tokens that begin in [start, end), comments, empty (implicit) tokens and the nodes
    of the types in `skip` left out."""
    leaves: list[bytes] = []
    stack = [tree.root_node]
    while stack:
        node = stack.pop()
        if node.end_byte <= start or node.start_byte >= end or "comment" in node.type or node.type in skip:
            continue
        if node.child_count == 0:
            if start <= node.start_byte < end and node.end_byte > node.start_byte:
                leaves.append(source[node.start_byte : node.end_byte])
            continue
        stack.extend(reversed(node.children))
    return leaves


COMMENTS = re.compile(r"/\*.*?\*/|(//|#|--)[^\n]*", re.DOTALL)


# How languages write a member of a type: `Matrix::at` (C++, Rust, PHP), `Ledger:add` (Lua), `Ledger#add` (Ruby's
# documentation). Definitions are named with dots whatever the language.
MEMBER_SEPARATORS = re.compile(r"::|[:#]")


def dotted(name: str) -> str:
    """A name as definitions are named: `Matrix::at`, `Ledger:add` and `Ledger#add` as `Matrix.at`, `Ledger.add`."""
    return MEMBER_SEPARATORS.sub(".", name)


def nested_names(defs: list[Definition]) -> list[str]:
    """Each definition's name with the functions it is nested in: `outer.inner` for a function defined inside
    `outer` (whose own name is `inner`: only classes and namespaces qualify names), its name otherwise."""
    paths: list[str] = []
    open_: list[tuple[Definition, str]] = []  # the definitions around the current one, innermost last
    for d in defs:  # outer before inner
        while open_ and not (open_[-1][0].node_start <= d.node_start and d.node_end <= open_[-1][0].node_end):
            open_.pop()
        path = f"{open_[-1][1]}.{d.simple_name}" if open_ else d.name
        paths.append(path)
        open_.append((d, path))
    return paths


def find_by_name(defs: list[Definition], name: str) -> Definition:
    """The one definition `name` (its whole name, or a tail of it: `at` or `Matrix.at` for `linalg.Matrix.at`, in
    dots or the language's own notation; a nested function's also with the functions around it, `outer.inner`)
    names."""
    wanted = dotted(name)
    named = list(zip(defs, nested_names(defs), strict=True))
    exact = [d for d, path in named if wanted in (d.name, path)]
    matches = exact or [
        d
        for d, path in named
        if d.simple_name == wanted or d.name.endswith("." + wanted) or path.endswith("." + wanted)
    ]
    if not matches:
        names = sorted({path for _, path in named})
        # A typo's nearest names, by each name's tails as a name is matched (`Matrix.at`, `at`), named in full.
        tails: dict[str, list[str]] = {}
        for _, path in named:
            for i in range(path.count(".") + 1):
                tails.setdefault(".".join(path.split(".")[i:]), []).append(path)
        close = difflib.get_close_matches(wanted, sorted(tails), n=3, cutoff=0.8)
        near = list(dict.fromkeys(full for c in close for full in tails[c]))
        guess = f"; did you mean {' or '.join(near)}?" if near else ""
        known = ", ".join(names[:12]) + (f" and {len(names) - 12} more" if len(names) > 12 else "") or "none"
        raise LocateError(f"no function, method or class named {name!r}{guess} (found: {known})")
    if len(matches) > 1:
        path_of = {id(d): path for d, path in named}
        where = ", ".join(f"{path_of[id(d)]} at line {d.line}" for d in matches)
        # Overloads share their whole name: only a line tells them apart.
        how = (
            f"overloads: pick one with --line, e.g. --line {matches[-1].line}"
            if len({path_of[id(d)] for d in matches}) == 1
            else "use --line, or the name with its class or function (Class.method, outer.inner)"
        )
        raise LocateError(f"{len(matches)} definitions match {name!r} ({where}): {how}")
    return matches[0]


def find_at(defs: list[Definition], offset: int, end: int | None = None) -> Definition:
    """The innermost definition containing the byte range [offset, end]. Of definitions on the same lines (see
    sharing_lines) the one whose own code holds the range, the innermost such: in `function a(){} function
    b(){}` the cursor's function, not always the line's first."""
    end = offset if end is None else end
    inside = [d for d in defs if d.start <= offset < d.end and end <= d.end]
    if not inside:
        crossed = [d for d in defs if d.start < end and offset < d.end]  # a range over parts of several
        if crossed and end > offset:
            outermost = [d for d in crossed if not any(part_of(d, o) for o in crossed if o is not d)]
            names = ", ".join(d.name for d in outermost[:6]) + (" and more" if len(outermost) > 6 else "")
            raise LocateError(f"no function, method or class holds the whole range: it crosses {names}")
        raise LocateError("no function, method or class there" + _nearest(defs, offset, end))

    def outside(d: Definition) -> bool:
        return not (d.node_start <= offset and end <= d.node_end)

    # (before any of their code, the first: what `--line` alone takes)
    return min(
        inside, key=lambda d: (d.end - d.start, outside(d), d.node_start if outside(d) else d.node_end - d.node_start)
    )


def _nearest(defs: list[Definition], offset: int, end: int) -> str:
    """Where the definitions nearest a place outside every definition are, the enclosing one of several ending
    (or beginning) alike: what to give `--line` instead."""
    above = max((d for d in defs if d.end <= offset), key=lambda d: (d.end, -d.start), default=None)
    below = min((d for d in defs if d.start >= end), key=lambda d: (d.start, -d.end), default=None)
    if above is None and below is None:
        return "; the file has none" if not defs else ""

    def lines(d: Definition) -> str:
        return f"line {d.line}" if d.line == d.end_line else f"lines {d.line}-{d.end_line}"

    near = [f"{d.name} ({lines(d)}) {side}" for d, side in ((above, "above"), (below, "below")) if d is not None]
    return "; the nearest: " + " and ".join(near)


def byte_offset(text: str, offset: int) -> int:
    """The byte offset in `text`'s UTF-8 of a character offset; one before a leading byte order mark is the first
    column after it (the mark is the file's, before its first definition)."""
    start = 1 if text.startswith("\ufeff") else 0
    return len(text[: max(offset, start)].encode("utf-8"))


def offset_of_line(source: bytes, line: int, column: int = 1) -> int:
    """Byte offset of a 1-based line and (1-based, in characters) column."""
    if line < 1:
        raise LocateError(f"line {line} does not exist (lines start at 1)")
    start = len(BOM) if source.startswith(BOM) else 0  # a byte order mark is before the first column
    for _ in range(line - 1):
        start = source.find(b"\n", start) + 1
        if start == 0:
            lines = source.count(b"\n") + 1
            raise LocateError(f"line {line} is past the end of the file ({lines} lines)")
    end = source.find(b"\n", start)
    text = source[start : end if end >= 0 else len(source)].decode("utf-8", errors="replace")
    return start + len(text[: max(column - 1, 0)].encode("utf-8"))


def line_and_column(source: bytes, offset: int) -> tuple[int, int]:
    """The 1-based line and (1-based, in characters) column of a byte offset: what `offset_of_line` takes."""
    start = source.rfind(b"\n", 0, offset) + 1
    if start == 0 and source.startswith(BOM):
        start = len(BOM)
    return source.count(b"\n", 0, offset) + 1, len(source[start:offset].decode("utf-8", errors="replace")) + 1


def error_nodes(tree: ts.Tree) -> list[ts.Node]:
    """The outermost error and missing nodes of a parse."""
    nodes = []

    def walk(node: ts.Node) -> None:
        if node.type == "ERROR" or node.is_missing:
            nodes.append(node)
            return
        if node.has_error:
            for child in node.children:
                walk(child)

    walk(tree.root_node)
    return nodes


def syntax_errors(source: bytes, spec: LanguageSpec, tree: ts.Tree | None = None) -> list[tuple[int, int]]:
    """(line, column) of each error or missing node, 1-based; empty when the file parses."""
    return [(n.start_point[0] + 1, n.start_point[1] + 1) for n in error_nodes(tree or parse(source, spec))]


def error_offsets(tree: ts.Tree) -> set[int]:
    """Where each error or missing node starts, in bytes."""
    return {n.start_byte for n in error_nodes(tree)}


def introduced_errors(old_errors: set[int], new_tree: ts.Tree, old_end: int, new_end: int) -> list[tuple[int, int]]:
    """(line, column) of the errors of a new text that the old one (its errors at `old_errors`, from
    `error_offsets`) did not have, where the new text is the old with the part ending at `old_end` replaced by
    one ending at `new_end`. An error after the replaced part is the old one when the old text has one at the
    same place of the same text: a half-written line elsewhere in the file is not the rewrite's, however many
    lines the rewrite adds or takes away above it. One before or inside the part is new unless the old had one at
    the same offset."""
    shift = new_end - old_end
    return [
        (n.start_point[0] + 1, n.start_point[1] + 1)
        for n in error_nodes(new_tree)
        if (n.start_byte - shift if n.start_byte >= new_end else n.start_byte) not in old_errors
    ]


def written_back(before: str, after: str, spec: LanguageSpec) -> bool:
    """Whether `after` is `before` written back: the same text line for line, but for import statements (a model
    that adds `import math` to code it leaves as it was has changed nothing) and whitespace at line ends and
    blank lines around it. A changed comment or a changed indentation is a change (it may be what was asked)."""
    return _lines_without_imports(before, spec) == _lines_without_imports(after, spec)


def same_code(a: str, b: str, spec: LanguageSpec) -> bool:
    """Whether two texts are the same code but for comments, import statements and layout: the same tokens as
    the parser sees them."""
    return _code_tokens(a.encode("utf-8"), spec) == _code_tokens(b.encode("utf-8"), spec)


def _code_tokens(source: bytes, spec: LanguageSpec) -> list[bytes]:
    return code_leaves(parse(source, spec), 0, len(source), source, skip=spec.imports)


def _lines_without_imports(text: str, spec: LanguageSpec) -> list[str]:
    data = text.encode("utf-8")
    imports = [(n.start_byte, n.end_byte) for n in parse(data, spec).root_node.named_children if is_import(n, spec)]
    for start, end in reversed(imports):
        data = data[:start] + data[end:]
    lines = [line.rstrip() for line in data.decode("utf-8", errors="replace").splitlines()]
    while lines and not lines[-1]:
        lines.pop()
    while lines and not lines[0]:
        lines.pop(0)
    return lines


# Of a language's import node types, the ones that bring a name in (not the file's own package or namespace line).
_HEADER_ONLY = frozenset({"package_clause", "package_declaration", "package_header"})
JS_LIKE = ("javascript", "typescript", "tsx")


def is_import(node: ts.Node, spec: LanguageSpec) -> bool:
    """Whether a top-level statement is an import: one of the language's import statements, and in JavaScript and
    TypeScript also CommonJS's, a `const`, `let` or `var` whose every value is `require("...")` or a member of one
    (`const { join } = require("path")`, `const x = require("m").x`)."""
    if node.type in spec.imports:
        return True
    if spec.name not in JS_LIKE or node.type not in ("lexical_declaration", "variable_declaration"):
        return False
    declarators = [c for c in node.named_children if c.type == "variable_declarator"]
    return bool(declarators) and all(_a_require(d.child_by_field_name("value")) for d in declarators)


def _a_require(value: ts.Node | None) -> bool:
    while value is not None and value.type == "member_expression":
        value = value.child_by_field_name("object")
    if value is None or value.type != "call_expression":
        return False
    f, args = value.child_by_field_name("function"), value.child_by_field_name("arguments")
    return (
        f is not None
        and _text(f) == "require"
        and args is not None
        and len(args.named_children) == 1
        and args.named_children[0].type == "string"
    )


def _js_bindings(statement: str, spec: LanguageSpec) -> set[str] | None:
    """The names one JavaScript or TypeScript import statement (ES or CommonJS) binds: `import a, { b as c } from
    "m"` binds a and c, `const { join, sep: s } = require("path")` join and s. None for anything else."""
    if spec.name not in JS_LIKE:
        return None
    nodes = parse(statement.encode("utf-8"), spec).root_node.named_children
    if len(nodes) != 1 or nodes[0].has_error or not is_import(nodes[0], spec):
        return None
    node, names = nodes[0], set()
    if node.type == "import_statement":
        clause = next((c for c in node.named_children if c.type == "import_clause"), None)
        for n in _descendants(clause):
            if n.type == "import_specifier":
                names.add(_text(n.child_by_field_name("alias") or n.child_by_field_name("name")))
            elif n.type == "identifier" and n.parent is not None and n.parent.type != "import_specifier":
                names.add(_text(n))
        return names
    for declarator in (c for c in node.named_children if c.type == "variable_declarator"):
        names.update(pattern_names(declarator.child_by_field_name("name")))
    return names


def pattern_names(node: ts.Node | None) -> list[str]:
    """The names a JavaScript or TypeScript binding pattern binds: `x`, `{ a, b: c, d = 1, ...e }` (a, c, d, e),
    `[f, [g]]`."""
    if node is None:
        return []
    if node.type in ("identifier", "shorthand_property_identifier_pattern"):
        return [_text(node)]
    if node.type == "pair_pattern":
        return pattern_names(node.child_by_field_name("value"))
    if node.type in ("assignment_pattern", "object_assignment_pattern"):
        return pattern_names(node.child_by_field_name("left"))
    if node.type in ("object_pattern", "array_pattern", "rest_pattern"):
        return [name for child in node.named_children for name in pattern_names(child)]
    return []


def _descendants(node: ts.Node | None):
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        yield n
        stack.extend(n.named_children)


def leading_imports(answer: str, spec: LanguageSpec) -> tuple[list[str], str]:
    """The import statements an answer opens with, before the code it rewrites (the coder model writes `from typing
    import List` above a method it adds type hints to), and the answer without them. Only complete statements
    that bring a name in, and only when code follows them: otherwise ([], answer)."""
    data = answer.encode("utf-8")
    nodes = parse(data, spec).root_node.named_children
    taken, cut = [], 0
    for node in nodes:
        if not is_import(node, spec) or node.type in _HEADER_ONLY or node.has_error:
            break
        taken.append(_text(node))
        cut = node.end_byte
    rest = data[cut:].decode("utf-8", errors="replace").lstrip("\r\n")
    if not taken or not rest.strip():
        return [], answer
    return taken, rest


def file_imports(tree: ts.Tree, spec: LanguageSpec, outside: tuple[int, int] = (0, 0)) -> list[str]:
    """The texts of a file's top-level import statements, but for those within the byte range `outside`."""
    return [
        _text(n)
        for n in tree.root_node.named_children
        if is_import(n, spec) and not (outside[0] <= n.start_byte < outside[1])
    ]


def new_imports(imports: list[str], present: list[str], spec: LanguageSpec) -> list[str]:
    """The import statements an answer adds, but for what the file's `present` imports (and the answer's earlier
    ones) bring in already. A statement the file has word for word is left out; in Python so are the names another
    statement imports already: `from typing import Dict, List` beside `from typing import List` adds
    `from typing import Dict`, and adds nothing beside `from typing import Dict, List`. In JavaScript and
    TypeScript, so is a statement that binds only names the file's imports bind already (`const fs =
    require('fs')` beside `const fs = require("fs")`: binding `fs` twice does not load)."""
    seen = set(present)
    bound = {b for text in present for b in _python_bindings(text, spec) or ()}
    js_bound = {b for text in present for b in _js_bindings(text, spec) or ()}
    added = []
    for text in dict.fromkeys(imports):
        if text in seen:
            continue
        js = _js_bindings(text, spec)
        if js and js <= js_bound:
            continue  # (JavaScript: binding a name again is a SyntaxError, whatever the quotes)
        js_bound |= js or set()
        bindings = _python_bindings(text, spec)
        if bindings:
            kept = [b for b in bindings if b not in bound]
            if not kept:
                continue
            if len(kept) < len(bindings):
                module = kept[0][0]
                names = ", ".join(name for _, name in kept)
                text = f"from {module} import {names}" if module else f"import {names}"
            bound.update(kept)
        seen.add(text)
        added.append(text)
    return added


def _python_bindings(statement: str, spec: LanguageSpec) -> list[tuple[str, str]] | None:
    """What one Python import statement binds, as (module, name) pairs: `from a import b as c` is
    [("a", "b as c")], `import os, sys` [("", "os"), ("", "sys")]. None for anything else (another language, a star
    import, a `__future__` import, more than one statement, a syntax error)."""
    if spec.name != "python":
        return None
    nodes = parse(statement.encode("utf-8"), spec).root_node.named_children
    if len(nodes) != 1 or nodes[0].has_error or nodes[0].type not in ("import_statement", "import_from_statement"):
        return None
    node = nodes[0]
    module = _text(node.child_by_field_name("module_name")) if node.type == "import_from_statement" else ""
    names = [" ".join(_text(n).split()) for n in node.children_by_field_name("name")]
    if not names or any(c.type == "wildcard_import" for c in node.named_children):
        return None
    return [(module, name) for name in names]


def import_insertion(
    source: bytes, tree: ts.Tree, spec: LanguageSpec, before: int, imports: list[str]
) -> tuple[int, str]:
    """Where the given import statements go in a file, and the text to insert there: on the line after the file's
    last top-level import (or package line) that ends before byte `before`; with none, at the top, after leading
    comments and a Python module docstring, a blank line after them. A Python `from __future__` import goes at the
    top in any case (it must come first). (byte offset at a line start, text)."""
    children = tree.root_node.named_children
    head = 0
    for j, node in enumerate(children):
        # (a Python module docstring, or JavaScript's "use strict", which must stay the first statement)
        docstring = spec.name in ("python", *JS_LIKE) and j == 0 and _is_docstring(node)
        if node.end_byte > before or ("comment" not in node.type and not docstring):
            break
        head = node.end_byte
    last = None
    for node in children:
        if node.end_byte > before:
            break
        if is_import(node, spec):
            last = node
    block = "".join(f"{i}\n" for i in imports)
    if last is not None and not (spec.name == "python" and any(i.startswith("from __future__") for i in imports)):
        return _next_line(source, last.end_byte), block
    at = _next_line(source, head) if head else 0
    prefix = "\n" if at == len(source) and source and not source.endswith(b"\n") else ""
    blank_after = source[at : at + 1] in (b"\n", b"\r") or last is not None  # (then imports follow it)
    return at, prefix + block + ("" if blank_after else "\n")


def _next_line(source: bytes, offset: int) -> int:
    end = source.find(b"\n", offset)
    return len(source) if end < 0 else end + 1


def _is_docstring(node: ts.Node) -> bool:
    return node.type == "expression_statement" and bool(node.named_children) and node.named_children[0].type == "string"


def point_at(source: bytes, offset: int) -> tuple[int, int]:
    """tree-sitter's (row, byte column) of a byte offset."""
    row = source.count(b"\n", 0, offset)
    return row, offset - (source.rfind(b"\n", 0, offset) + 1)


def reparse_after_replace(tree: ts.Tree, old: bytes, start: int, end: int, new: bytes, spec: LanguageSpec) -> ts.Tree:
    """Parse `new` (= old with old[start:end] replaced) reusing the old tree: only the edit is re-read. The old
    tree is left as it was (an edit marks a tree for one new text, and a rewrite's answers are several)."""
    new_end = end + len(new) - len(old)
    tree = tree.copy()
    tree.edit(
        start_byte=start,
        old_end_byte=end,
        new_end_byte=new_end,
        start_point=point_at(old, start),
        old_end_point=point_at(old, end),
        new_end_point=point_at(new, new_end),
    )
    return parse(new, spec, old=tree)


def file_context(source: bytes, spec: LanguageSpec, defs: list[Definition], tree: ts.Tree | None = None) -> list[str]:
    """What a model needs to understand a definition of the file: its imports, then the first line of every
    definition in `defs` (a short Python function whole), in the file's order."""
    tree = tree or parse(source, spec)
    imports = [_text(n) for n in tree.root_node.named_children if is_import(n, spec)]
    signatures = []
    for d in defs:
        end = source.find(b"\n", d.node_start)
        line = source[d.node_start : end if end >= 0 else len(source)].decode("utf-8", "replace").strip()
        if spec.name == "python":
            line = _python_one_liner(tree, d, line) or line
        signatures.append(line)
    return [*imports, *signatures]


SHORT_BODY_STATEMENTS = 3  # a function of at most this many simple statements is shown whole, on one line
SHORT_BODY_CHARS = 100
_PY_SIMPLE = frozenset(
    {
        "expression_statement",
        "return_statement",
        "pass_statement",
        "raise_statement",
        "assert_statement",
        "global_statement",
        "nonlocal_statement",
        "delete_statement",
    }
)


def _python_one_liner(tree: ts.Tree, d: Definition, signature: str) -> str | None:
    """A short Python function as one line of valid Python (`def m(self): return len(self.rows)`): what its
    name alone does not say (which attribute `__init__` sets, what `m` returns) for a few more tokens. None for
    a class, a long or compound body, or a signature over several lines."""
    node = tree.root_node.descendant_for_byte_range(d.node_start, d.node_end)
    if node is None or node.type != "function_definition" or not signature.endswith(":"):
        return None
    body = node.child_by_field_name("body")
    statements = [c for c in (body.named_children if body else []) if c.type != "comment"]
    if statements and statements[0].type == "expression_statement" and statements[0].named_children[0].type == "string":
        statements = statements[1:]  # the docstring
    if (
        not statements
        or len(statements) > SHORT_BODY_STATEMENTS
        or any(c.type not in _PY_SIMPLE or b"\n" in c.text for c in statements)
    ):
        return None
    line = f"{signature} {'; '.join(_text(c) for c in statements)}"
    return line if len(line) <= SHORT_BODY_CHARS + len(signature) else None
