"""Python: the calls a rewrite leaves that no longer fit its function after it made it a generator (asked to "Make
it a generator", the coder replaced `result.append(n)` and `return result` with `yield n`), or made a generator
an ordinary function again.

Made a generator, a call gets a generator, not the list it got: it has no `len()`, cannot be indexed, is always
true (`if not found:` never holds), prints as `<generator object ...>`, can be iterated only once, and the
function's body does not run until it is. Iterating it (a `for`, a comprehension, `list()`, `sum()`, `"".join()`,
`yield from`) fits. The value is followed through a name it is assigned to, in the same scope: `found =
evens(xs)` then `len(found)`, or a second loop over `found` (which sees nothing). Made ordinary again, `next()`
on its result, or `.send()`, fails.

A function made a generator by a decorator's hand (`@contextmanager`) or an `async def` one is left out, as are
calls handed to a function of the file or another module's (it may iterate them). Read with `ast`; a file that
does not parse is not judged."""

from __future__ import annotations

import ast

from .calls import Function, _region_function, calls_of

# Builtins and methods that iterate what they are given once: a generator fits them as well as a list.
ITERATES = frozenset(
    (
        "list tuple set frozenset dict sorted sum min max any all enumerate zip map filter iter join extend "
        "update Counter deque OrderedDict chain islice defaultdict fromkeys writelines"
    ).split()
)
# Builtins that need a sequence, or make text of the object itself: a generator is the mistake there.
NEEDS_A_LIST = frozenset("len reversed bool str repr print format hash dumps dump".split())
# What a generator has: the rest of an attribute on a call's value belongs to a list (`.append`, `.sort`).
GENERATOR_METHODS = frozenset("send throw close gi_frame gi_running gi_code gi_yieldfrom __next__ __iter__".split())
# Steps a generator on without using it up.
STEPS = frozenset(("next",))


def _own(fn: Function | ast.Module):
    """The nodes of a function's body (or a module's) outside the functions, classes and lambdas in it."""
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        yield node
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))


def is_generator(fn: Function) -> bool | None:
    """Whether a function yields (None when its calls are not what its `def` says: decorated other than as a
    static or class method, or `async def`)."""
    if isinstance(fn, ast.AsyncFunctionDef):
        return None
    if any(not (isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")) for d in fn.decorator_list):
        return None
    return any(isinstance(n, ast.Yield | ast.YieldFrom) for n in _own(fn))


def generator_change(old_region: str, new_region: str, names: tuple[str, str] = ("", "")) -> str:
    """ "generator" when a rewrite made its Python function a generator, "ordinary" when it made a generator an
    ordinary function, else "" (also when a region does not parse, or a function is decorated or async). `names`:
    the function's name in each region (the second differs when the rewrite renamed it)."""
    old, new = _region_function(old_region, names[0]), _region_function(new_region, names[1])
    if old is None or new is None:
        return ""
    was, now = is_generator(old), is_generator(new)
    if was is None or now is None or was == now:
        return ""
    return "generator" if now else "ordinary"


def generator_misuses(text: str, name: str, lines: tuple[int, int], method: bool, now_generator: bool) -> list[int]:
    """The lines of `text` (a Python file) whose uses of a call of the function `name` defined on `lines` no longer
    fit it after `generator_change` (calls as editspec.calls.calls_of finds them): made a generator, a call's
    value used as a list, or the name it is assigned to used so, or iterated a second time; made ordinary, `next()`
    or `.send()` on it. Empty when the file does not parse or the function is not found on those lines."""
    found = calls_of(text, name, lines, method)
    if found is None:
        return []
    parent, calls = found
    bad: set[int] = set()
    for call in calls:
        verdict, at = _use(call, parent, now_generator)
        if verdict == "assigned" and now_generator:
            bad |= _name_misuses(at, parent)
        elif verdict == "bad":
            bad.add(at.lineno)
    return sorted(bad)


def _use(node: ast.AST, parent: dict, now_generator: bool) -> tuple[str, ast.AST]:
    """How the value `node` stands for is used: ("iterated", node), ("bad", node), ("assigned", the name's node)
    or ("other", node): handed on, not judged."""
    up = parent.get(node)
    if isinstance(up, ast.Starred | ast.keyword):
        node, up = up, parent.get(up)
    if not now_generator:
        if isinstance(up, ast.Call) and node is not up.func and isinstance(up.func, ast.Name) and up.func.id == "next":
            return "bad", node
        if isinstance(up, ast.Attribute) and up.attr in ("send", "throw"):
            return "bad", node
        return "other", node
    if isinstance(up, ast.For | ast.AsyncFor | ast.comprehension) and up.iter is node:
        return "iterated", node
    if isinstance(up, ast.YieldFrom) or isinstance(node, ast.Starred):
        return "iterated", node
    if isinstance(up, ast.Call) and node is not up.func:
        f = up.func
        callee = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
        if callee in ITERATES:
            return "iterated", node
        if callee in STEPS:
            return "other", node
        if callee in NEEDS_A_LIST:
            return "bad", node
        return "other", node
    if isinstance(up, ast.Assign) and up.value is node and len(up.targets) == 1 and isinstance(up.targets[0], ast.Name):
        return "assigned", up.targets[0]
    if isinstance(up, ast.AnnAssign) and up.value is node and isinstance(up.target, ast.Name):
        return "assigned", up.target
    if isinstance(up, ast.Attribute):
        return ("other" if up.attr in GENERATOR_METHODS else "bad"), node
    if isinstance(up, ast.Expr):
        return "bad", node  # a statement of its own: the body no longer runs
    if (
        isinstance(up, ast.Compare)
        and node in up.comparators
        and isinstance(up.ops[up.comparators.index(node)], ast.In | ast.NotIn)
    ):
        return "iterated", node  # `x in evens(xs)` iterates it (up to x)
    if isinstance(up, ast.Subscript | ast.Compare | ast.BoolOp | ast.UnaryOp | ast.FormattedValue):
        return "bad", node
    if isinstance(up, ast.BinOp) and isinstance(up.op, ast.Add | ast.Mult):
        return "bad", node  # `evens(xs) + [0]`; another operator may be a class's own (`@`, `|`)
    if isinstance(up, ast.If | ast.While | ast.IfExp | ast.Assert) and up.test is node:
        return "bad", node
    return "other", node


def _name_misuses(target: ast.Name, parent: dict) -> set[int]:
    """The lines where the name a generator was assigned to is used as a list, or iterated again, below the
    assignment in its scope (a function's body, or the module); none when the scope binds the name again."""
    scope = parent.get(target)
    while scope is not None and not isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef):
        scope = parent.get(scope)
    if scope is None:
        return set()
    names = [n for n in _own(scope) if isinstance(n, ast.Name) and n.id == target.id]
    if sum(not isinstance(n.ctx, ast.Load) for n in names) > 1:
        return set()
    uses = sorted(
        (
            n
            for n in names
            if isinstance(n.ctx, ast.Load) and (n.lineno, n.col_offset) > (target.lineno, target.col_offset)
        ),
        key=lambda n: (n.lineno, n.col_offset),
    )
    bad: set[int] = set()
    iterated: list[ast.AST] = []
    for use in uses:
        verdict, at = _use(use, parent, True)
        if verdict == "bad" or (verdict == "iterated" and any(not _exclusive(i, at, parent) for i in iterated)):
            bad.add(at.lineno)
        if verdict == "iterated":
            iterated.append(at)
    return bad


def _exclusive(a: ast.AST, b: ast.AST, parent: dict) -> bool:
    """Whether `a` and `b` sit in different branches of one `if`, `try` or `match` (or conditional expression), so
    that not both run."""
    above_a = []
    node = a
    while node is not None:
        above_a.append(node)
        node = parent.get(node)
    seen = {id(n): i for i, n in enumerate(above_a)}
    child, node = b, parent.get(b)
    while node is not None and id(node) not in seen:
        child, node = node, parent.get(node)
    if node is None or not isinstance(node, ast.If | ast.Try | ast.Match | ast.IfExp):
        return False
    a_child = above_a[seen[id(node)] - 1] if seen[id(node)] > 0 else None
    if isinstance(node, ast.Match):
        return a_child is not child  # two cases
    return _field(node, a_child) != _field(node, child)


def _field(node: ast.AST, child: ast.AST | None) -> str:
    for name, value in ast.iter_fields(node):
        if value is child or (isinstance(value, list) and any(v is child for v in value)):
            return name
    return ""
