"""JavaScript and TypeScript: calls a rewrite leaves that no longer fit its function after it made it `async`, or
made an `async` one ordinary (editspec.calls does the same for Python). Made async, the function returns a Promise:
a call whose value is used as it is (`${total(items)}`, `total(a) + 1`, a statement of its own that drops a
rejection) gets the Promise, not the result, and neither the parser nor TypeScript's compiler says a word (a
template literal or `console.log` takes a Promise as well as a number). Made ordinary, `.then()` on its result
raises TypeError. Read with tree-sitter; a file that does not parse is not judged."""

from __future__ import annotations

from .locate import LanguageSpec, parse

LANGUAGES = ("javascript", "typescript", "tsx")
# The nodes that hold a function's `async`, and the generators left out (their calls are iterated).
FUNCTIONS = ("function_declaration", "function_expression", "function", "arrow_function", "method_definition")
GENERATORS = ("generator_function_declaration", "generator_function")
# What a call can sit in on its way to an `await`, `.then`, or a function's arguments.
CARRIERS = ("parenthesized_expression", "array", "spread_element", "non_null_expression", "as_expression")
# Functions that take a value and make text or a number of it: a Promise handed to one is the mistake.
VALUE_TAKERS = ("String", "Number", "Boolean", "parseInt", "parseFloat", "log", "info", "warn", "error", "stringify")
THEN = ("then", "catch", "finally")


def _function(node, data: bytes, name: str):
    """The function node of a definition's parse that is named `name` (a helper may come before it: `function
    helper`, `const f = async () =>`, a method), else the first, in source order; None when there is none or it is
    a generator."""
    found = []
    stack = [node]
    while stack:
        n = stack.pop()
        if n.type in GENERATORS or n.type in FUNCTIONS:
            found.append(n)
            continue
        stack.extend(reversed(n.children))
    named = [n for n in found if _own_name(n, data) == name]
    fn = (named or found or [None])[0]
    if fn is None or fn.type in GENERATORS or any(c.type == "*" for c in fn.children):
        return None
    return fn


def _own_name(fn, data: bytes) -> str:
    """A function node's name: its own, or the variable or field it is assigned to (`const f = () =>`)."""
    name = fn.child_by_field_name("name")
    if name is None and fn.parent is not None and fn.parent.type in ("variable_declarator", "public_field_definition"):
        name = fn.parent.child_by_field_name("name")
    return "" if name is None else _name(name, data)


def is_async(code: str, spec: LanguageSpec, name: str = "") -> bool | None:
    """Whether the definition in `code` (one definition's region, or an answer) is an async function (the one named
    `name` where there are several); None when it holds none that can be read, or a generator. A method is read
    inside a class of its own."""
    data = code.encode("utf-8")
    tree = parse(data, spec)
    if tree.root_node.has_error:
        data = ("class _ {\n" + code + "\n}\n").encode("utf-8")
        tree = parse(data, spec)
        if tree.root_node.has_error:
            return None
    fn = _function(tree.root_node, data, name)
    return None if fn is None else any(c.type == "async" for c in fn.children)


def async_change(old_region: str, new_region: str, spec: LanguageSpec, names: tuple[str, str] = ("", "")) -> str:
    """ "async" when the rewrite made the function async, "sync" the other way, "" when neither or it cannot be told.
    `names`: the function's name in each region (the second differs when the rewrite renamed it)."""
    if spec.name not in LANGUAGES:
        return ""
    was, now = is_async(old_region, spec, names[0]), is_async(new_region, spec, names[1])
    if was is None or now is None or was == now:
        return ""
    return "async" if now else "sync"


def _name(node, data: bytes) -> str:
    return data[node.start_byte : node.end_byte].decode("utf-8", "replace")


def promise_misuses(text: str, spec: LanguageSpec, name: str, first_line: int, method: bool, now_async: bool):
    """The lines (1-based) of `text` whose calls of `name` no longer fit it after the change: made async, a call
    whose value is used as it is (not awaited, not `.then`, not returned, not handed to a function other than one
    that makes text or a number of it); made ordinary, a call whose result gets `.then`. A function is called by
    its bare name, a method (`method`, defined on `first_line`) as `this.NAME` from its own class."""
    data = text.encode("utf-8")
    tree = parse(data, spec)
    scope = tree.root_node
    if method:
        scope = _enclosing_class_body(tree.root_node, first_line - 1)
        if scope is None:
            return []
    found: set[int] = set()
    stack = [scope]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type != "call_expression":
            continue
        f = node.child_by_field_name("function")
        if f is None:
            continue
        if method:
            obj, prop = f.child_by_field_name("object"), f.child_by_field_name("property")
            if f.type != "member_expression" or obj is None or obj.type != "this" or _name(prop, data) != name:
                continue
        elif f.type != "identifier" or _name(f, data) != name:
            continue
        if not _fits(node, data, now_async):
            found.add(node.start_point[0] + 1)
    return sorted(found)


def _enclosing_class_body(root, row: int):
    """The innermost class body that holds `row` (0-based): the one a method starting there is defined in."""
    found, node = None, root
    while node is not None:
        if node.type == "class_body":
            found = node
        node = next((c for c in node.children if c.start_point[0] <= row <= c.end_point[0]), None)
    return found


def _fits(call, data: bytes, now_async: bool) -> bool:
    node, up = call, call.parent
    while up is not None and up.type in CARRIERS:
        node, up = up, up.parent
    if up is None:
        return not now_async
    if up.type == "member_expression" and up.child_by_field_name("object") == node:
        prop = up.child_by_field_name("property")
        if prop is not None and _name(prop, data) in THEN:
            return now_async  # `.then` on a Promise, not on a value
        return not now_async  # `total(x).toFixed(2)`: the value's member, a Promise has none of these
    if up.type == "await_expression":
        return True  # awaiting a value is allowed too (`await 5` is 5)
    if up.type == "unary_expression" and up.children[0].type == "void":
        return True  # `void total(x)`: dropped on purpose
    if up.type in ("return_statement", "arrow_function"):
        return True  # its caller gets it: an async caller's `return` passes the Promise on
    if up.type == "arguments":
        callee = up.parent.child_by_field_name("function") if up.parent is not None else None
        last = (
            callee.child_by_field_name("property")
            if callee is not None and callee.type == "member_expression"
            else callee
        )
        taker = last is not None and _name(last, data) in VALUE_TAKERS
        return not (now_async and taker)
    return not now_async
