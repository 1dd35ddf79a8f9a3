"""Calls a Python rewrite leaves that the called function cannot take: the file calls a function of its own with
arguments its signature does not accept (too many, one missing, a keyword it does not know). The answer parses,
so the syntax check cannot see it; it raises TypeError when the call runs. Typical: the rewrite gives a function
a new required parameter and the file's other calls to it still pass the old arguments (editspec rewrites one
definition, not its callers), or the new code calls one of the file's helpers the wrong way.

Only what can be told from the file: functions defined once at the module's top level without decorators, called
by their bare name where nothing else binds that name; methods defined once in a class body (undecorated, or a
`staticmethod` or `classmethod`), called as `self.NAME(...)` from a method of the same class. A call that passes
`*args` or `**kwargs` is not judged, nor a file that does not parse. Only calls the rewrite brought in count: one
that did not fit before is the file's business.

Also the calls that no longer fit a function the rewrite made `async def`, or made an ordinary function again
(`async_change`, `coroutine_misuses`; editspec.promises does the same for JavaScript and TypeScript)."""

from __future__ import annotations

import ast
import builtins
import symtable
from collections import Counter
from dataclasses import dataclass

from . import pysource

Function = ast.FunctionDef | ast.AsyncFunctionDef


@dataclass(frozen=True)
class Mismatch:
    line: int  # of the call, in the file it was found in
    caller: str  # the definition the call is in ("" at the module's top level)
    callee: str  # as called: NAME, or self.NAME
    why: str  # what does not fit, e.g. "no `unit`"

    def key(self) -> tuple[str, str, str]:
        """What stays the same when lines move: a call the rewrite did not touch keeps it."""
        return (self.caller, self.callee, self.why)

    def text(self) -> str:
        return f"line {self.line}: {self.callee}(...) {self.why}"


def _misfit(fn: Function, call: ast.Call, bound: int) -> str | None:
    """What in the call the signature cannot take (`bound`: leading parameters the call does not pass, as `self`),
    or None."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return None  # *args, **kwargs: cannot be told
    a = fn.args
    params = [*a.posonlyargs, *a.args]
    if len(params) < bound:
        return None  # a method without its `self`: not this check's business
    positional = params[bound:]
    given = len(call.args)
    if given > len(positional) and a.vararg is None:
        return f"gets {given} positional argument{'s' * (given != 1)}, takes at most {len(positional)}"
    posonly = {p.arg for p in a.posonlyargs}
    by_name = {p.arg for p in positional if p.arg not in posonly} | {k.arg for k in a.kwonlyargs}
    filled = {p.arg for p in positional[:given]}
    for k in call.keywords:
        if k.arg not in by_name:
            if a.kwarg is None:
                return f"gets keyword `{k.arg}`, which it does not take"
            continue
        if k.arg in filled:
            return f"gets `{k.arg}` twice"
        filled.add(k.arg)
    with_defaults = len(a.defaults)  # the last ones of posonlyargs + args
    required = params[: len(params) - with_defaults][bound:]
    missing = [p.arg for p in required if p.arg not in filled]
    missing += [k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None and k.arg not in filled]
    if missing:
        return "gets no " + ", ".join(f"`{m}`" for m in missing)
    return None


def _module_level(tree: ast.Module):
    """The statements that run in the module's own scope: its top level and what its `if`, `try`, `for`, `while`,
    `with` and `match` hold there (not the bodies of its functions and classes)."""
    stack = list(tree.body)
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for field in ("body", "orelse", "finalbody"):
            stack.extend(getattr(node, field, None) or [])
        for part in getattr(node, "handlers", None) or []:
            stack.extend(part.body)
        for case in getattr(node, "cases", None) or []:
            stack.extend(case.body)


def _module_functions(tree: ast.Module, top: symtable.SymbolTable) -> dict[str, Function]:
    """Functions defined once in the module's scope, at its top level and undecorated, whose name nothing else
    binds: no other definition, assignment or import of it there, no `global` of it, no function's local of that
    name (a parameter, say)."""
    level = list(_module_level(tree))
    defined = Counter(n.name for n in level if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))
    funcs = {
        n.name: n
        for n in tree.body
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) and not n.decorator_list and defined[n.name] == 1
    }
    for node in level:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            continue
        for n in ast.walk(node):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store | ast.Del):
                funcs.pop(n.id, None)
            elif isinstance(n, ast.Import | ast.ImportFrom):
                for alias in n.names:
                    funcs.pop((alias.asname or alias.name).split(".")[0], None)
    stack = list(top.get_children())
    while stack:
        t = stack.pop()
        if t.get_type() != "class":  # a class body's names are not seen by its methods
            for sym in t.get_symbols():
                if sym.is_local() or sym.is_declared_global():
                    funcs.pop(sym.get_name(), None)
        stack.extend(t.get_children())
    return funcs


def _placeholder(fn: Function) -> bool:
    """A method whose body only raises NotImplementedError, or is `pass` or `...` (a docstring aside): subclasses
    define the real one, with a signature of their own."""
    body = (
        fn.body[1:]
        if fn.body and isinstance(fn.body[0], ast.Expr) and isinstance(fn.body[0].value, ast.Constant)
        else fn.body
    )
    if not body:
        return True
    if len(body) != 1:
        return False
    stmt = body[0]
    if isinstance(stmt, ast.Pass) or (isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)):
        return True
    if isinstance(stmt, ast.Raise) and stmt.exc is not None:
        exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
        return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"
    return False


def _overridden(tree: ast.Module) -> dict[str, set[str]]:
    """Per class name: the methods that a class of the file deriving from it (by that name) defines again."""
    classes = [n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)]
    own = {c.name: {n.name for n in c.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)} for c in classes}
    found: dict[str, set[str]] = {}
    for c in classes:
        for base in c.bases:
            name = base.id if isinstance(base, ast.Name) else base.attr if isinstance(base, ast.Attribute) else None
            if name is not None:
                found.setdefault(name, set()).update(own[c.name])
    return found


def _methods(cls: ast.ClassDef, overridden: set[str]) -> dict[str, tuple[Function, int]]:
    """A class's methods defined once in its body, with how many leading parameters a call through `self` binds
    (1, or 0 for a staticmethod); decorated otherwise, assigned or defined twice, a dunder, a placeholder, or
    one of `overridden` (defined again by a subclass in the file, or set on an object): left out."""
    defined = Counter(n.name for n in cls.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef))
    assigned = {
        t.id
        for n in cls.body
        if isinstance(n, ast.Assign | ast.AnnAssign | ast.AugAssign)
        for t in ast.walk(n)
        if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)
    }
    found = {}
    for n in cls.body:
        if not isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef) or defined[n.name] != 1 or n.name in assigned:
            continue
        if n.name.startswith("__") and n.name.endswith("__") or _placeholder(n) or n.name in overridden:
            continue  # Python calls dunders its own way; a placeholder or an overridden method is a subclass's
        names = [d.id if isinstance(d, ast.Name) else None for d in n.decorator_list]
        if not names:
            found[n.name] = (n, 1)
        elif names == ["staticmethod"]:
            found[n.name] = (n, 0)
        elif names == ["classmethod"]:
            found[n.name] = (n, 1)
    return found


def _class_bindings(cls: ast.ClassDef) -> frozenset[str]:
    """The names a class body binds (its definitions and assignments)."""
    names = set()
    for n in cls.body:
        if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(n.name)
        else:
            names |= {t.id for t in ast.walk(n) if isinstance(t, ast.Name) and isinstance(t.ctx, ast.Store)}
    return frozenset(names)


def _self_name(fn: Function) -> str | None:
    """The first parameter of a method called on an instance (`self`), or None for a static method or none."""
    decorators = {d.id for d in fn.decorator_list if isinstance(d, ast.Name)}
    params = [*fn.args.posonlyargs, *fn.args.args]
    if "staticmethod" in decorators or "classmethod" in decorators or not params:
        return None
    return params[0].arg


def mismatches(text: str) -> list[Mismatch] | None:
    """Every call in the file that one of its own functions cannot take (None: the file does not parse)."""
    parsed = pysource.tables(text)
    if parsed is None:
        return None
    tree, top = parsed
    funcs = _module_functions(tree, top)
    overrides = _overridden(tree)
    # A method whose name is also set on an object (`self.NAME = ...`) may be an instance's attribute instead.
    set_on_objects = {
        n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and not isinstance(n.ctx, ast.Load)
    }
    found: list[Mismatch] = []

    def check(call: ast.Call, caller: str, methods: dict, me: str | None, hidden: frozenset = frozenset()) -> None:
        f = call.func
        if isinstance(f, ast.Name) and f.id in funcs and f.id not in hidden:
            why, callee = _misfit(funcs[f.id], call, 0), f.id
        elif (
            me is not None
            and isinstance(f, ast.Attribute)
            and isinstance(f.value, ast.Name)
            and f.value.id == me
            and f.attr in methods
        ):
            fn, bound = methods[f.attr]
            why, callee = _misfit(fn, call, bound), f"{me}.{f.attr}"
        else:
            return
        if why:
            found.append(Mismatch(call.lineno, caller, callee, why))

    def visit(node: ast.AST, caller: str, methods: dict, me: str | None, hidden: frozenset = frozenset()) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.ClassDef):
                for part in [*child.decorator_list, *child.bases, *child.keywords]:
                    visit(part, caller, methods, me, hidden)
                own = _methods(child, overrides.get(child.name, set()) | set_on_objects)
                name = f"{caller}.{child.name}" if caller else child.name
                # What the class body binds hides the module's functions from its own statements (not its methods).
                body_names = _class_bindings(child)
                for stmt in child.body:
                    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef):
                        for part in [*stmt.decorator_list, stmt.args]:
                            visit(part, name, own, None, body_names)
                        body = ast.Module(body=stmt.body, type_ignores=[])
                        visit(body, f"{name}.{stmt.name}", own, _self_name(stmt))
                    else:
                        visit(ast.Module(body=[stmt], type_ignores=[]), name, own, None, body_names)
                continue
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                for part in [*child.decorator_list, child.args]:
                    visit(part, caller, methods, me, hidden)
                body = ast.Module(body=child.body, type_ignores=[])
                # A nested function's calls through the method's `self` are not judged (it may take its own).
                visit(body, f"{caller}.{child.name}" if caller else child.name, methods, None)
                continue
            if isinstance(child, ast.Call):
                check(child, caller, methods, me, hidden)
            visit(child, caller, methods, me, hidden)

    try:
        visit(tree, "", {}, None)
    except RecursionError:
        return None
    return found


def calls_brought_in(old_text: str, new_text: str) -> list[Mismatch]:
    """The calls of `new_text` its own functions cannot take, less those `old_text` had already (by caller, callee
    and what does not fit); in line order. Empty when it cannot be told."""
    after = mismatches(new_text)
    if not after:
        return []
    before = {m.key() for m in mismatches(old_text) or []}
    return sorted((m for m in after if m.key() not in before), key=lambda m: m.line)


def _region_function(region: str, name: str = "") -> Function | None:
    """The function a definition's region (whole lines, decorators included, indented as in the file) holds: the
    one named `name` when there is one (an answer may put a helper before it), else the first."""
    parsed = pysource.region_statements(region)
    if parsed is None:
        return None
    functions = [n for n in parsed[0] if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)]
    return next((n for n in functions if n.name == name), functions[0] if functions else None)


def parameter_changes(old_region: str, new_region: str, in_class: bool, names: tuple[str, str] = ("", "")) -> list[str]:
    """How a rewrite changed a Python function's parameters in ways its callers can feel, in any file: a
    parameter renamed (a call passing it by name breaks), dropped, newly required (every call that does not
    pass it breaks), or positional ones reordered (calls passing them in order get them mixed up, silently).
    Types, defaults of optional ones and `*args`/`**kwargs` are not judged. In a class, the first parameter of a
    method that is not static is the method's own (`self`, `cls`). `names`: the function's name in each region
    (the second differs when the rewrite renames it), where a region holds more than one."""
    old, new = _region_function(old_region, names[0]), _region_function(new_region, names[1])
    if old is None or new is None:
        return []

    def params(fn: Function) -> tuple[list[str], set[str], set[str]]:
        a = fn.args
        positional = [p.arg for p in [*a.posonlyargs, *a.args]]
        required = set(positional[: len(positional) - len(a.defaults)])
        required |= {k.arg for k, d in zip(a.kwonlyargs, a.kw_defaults, strict=True) if d is None}
        static = any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in fn.decorator_list)
        if in_class and not static and positional:
            required.discard(positional[0])
            positional = positional[1:]
        return positional, {*positional, *(k.arg for k in a.kwonlyargs)}, required

    old_pos, old_names, _ = params(old)
    new_pos, new_names, new_required = params(new)
    renamed = {
        o: n for o, n in zip(old_pos, new_pos, strict=False) if o != n and o not in new_names and n not in old_names
    }
    changes = [f"renames `{o}` to `{n}`" for o, n in renamed.items()]
    if new.args.kwarg is None:
        changes += [f"drops `{o}`" for o in sorted(old_names - new_names) if o not in renamed]
    changes += [f"adds required `{n}`" for n in sorted(new_required - old_names) if n not in renamed.values()]
    kept = [p for p in old_pos if p in new_pos]
    if kept != [p for p in new_pos if p in old_pos]:
        changes.append("reorders " + ", ".join(f"`{p}`" for p in kept))
    return changes


def _plain_function(fn: Function) -> bool:
    """A function whose calls are what its `def` says: no decorator but `staticmethod` or `classmethod` (another
    may wrap it in anything), and no `yield` of its own (a generator's calls are iterated, not awaited)."""
    if any(not (isinstance(d, ast.Name) and d.id in ("staticmethod", "classmethod")) for d in fn.decorator_list):
        return False
    stack = list(fn.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Yield | ast.YieldFrom):
            return False
        if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Lambda):
            stack.extend(ast.iter_child_nodes(node))
    return True


def async_change(old_region: str, new_region: str, names: tuple[str, str] = ("", "")) -> str:
    """ "async" when a rewrite made its Python function a coroutine function (`async def`), "sync" when it made one
    an ordinary function, else "" (also when a region does not parse, or either function is a generator or
    decorated). `names` as for `parameter_changes`."""
    old, new = _region_function(old_region, names[0]), _region_function(new_region, names[1])
    if old is None or new is None or not (_plain_function(old) and _plain_function(new)):
        return ""
    was, now = isinstance(old, ast.AsyncFunctionDef), isinstance(new, ast.AsyncFunctionDef)
    return "" if was == now else "async" if now else "sync"


# asyncio's functions that take a coroutine (or many) and run it: a call handed to one of these is not a bare call.
RUNNERS = frozenset(
    (
        "run gather create_task ensure_future wait_for shield run_until_complete run_coroutine_threadsafe wait "
        "as_completed Task"
    ).split()
)
# What a call can sit in on its way to an `await` or a function's arguments: `gather(*[f(x) for x in xs])`,
# `wait_for(fut=f(x), ...)`.
_CARRIERS = (ast.Starred, ast.List, ast.Tuple, ast.Set, ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.keyword)
_BUILTINS = frozenset(dir(builtins))


def defined_at(text: str, name: str, lines: tuple[int, int]) -> tuple[ast.Module, dict, Function] | None:
    """`text` (a Python file) parsed, each node's parent, and the function `name` defined on `lines` (1-based,
    inclusive); None when the file does not parse or no such function is defined there."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    parent = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    fn = next(
        (
            n
            for n in ast.walk(tree)
            if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)
            and n.name == name
            and lines[0] <= n.lineno <= lines[1]
        ),
        None,
    )
    return None if fn is None else (tree, parent, fn)


def calls_of(text: str, name: str, lines: tuple[int, int], method: bool) -> tuple[dict, list[ast.Call]] | None:
    """The calls in `text` (a Python file) of the function `name` defined on `lines`, with each node's parent: a
    function's by its bare name, a method's (`method`) as `self.NAME` or `cls.NAME` from its own class. None when
    the file does not parse or the function is not found on those lines."""
    found = defined_at(text, name, lines)
    if found is None:
        return None
    tree, parent, fn = found
    if method and not isinstance(parent.get(fn), ast.ClassDef):
        return None
    scope = parent[fn] if method else tree

    def called(call: ast.Call) -> bool:
        f = call.func
        if method:
            return (
                isinstance(f, ast.Attribute)
                and f.attr == name
                and isinstance(f.value, ast.Name)
                and (f.value.id in ("self", "cls"))
            )
        return isinstance(f, ast.Name) and f.id == name

    def shadowed(call: ast.Call) -> bool:  # a function around the call binds the name of its own
        up = parent.get(call)
        while up is not None and up is not scope:
            if isinstance(up, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) and name in _own_names(up):
                return True
            up = parent.get(up)
        return False

    calls = [n for n in ast.walk(scope) if isinstance(n, ast.Call) and called(n)]
    return parent, calls if method else [c for c in calls if not shadowed(c)]


def _own_names(fn: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda) -> set[str]:
    """The names a function binds of its own: parameters, and in its body (outside the functions and classes in
    it) what it assigns, defines or imports, less what it declares `global` or `nonlocal`."""
    a = fn.args
    bound = {p.arg for p in [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg] if p is not None}
    declared: set[str] = set()
    stack = list(fn.body) if isinstance(fn.body, list) else [fn.body]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
            continue
        if isinstance(node, ast.Lambda):
            continue
        if isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Load):
            bound.add(node.id)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(alias.asname or alias.name).split(".")[0] for alias in node.names}
        elif isinstance(node, ast.Global | ast.Nonlocal):
            declared |= set(node.names)
        stack.extend(ast.iter_child_nodes(node))
    return bound - declared


def coroutine_misuses(text: str, name: str, lines: tuple[int, int], method: bool, now_async: bool) -> list[int]:
    """The lines of `text` (a Python file) whose calls of the function `name` defined on `lines` no longer fit it
    after it changed between `def` and `async def`:
    - now async, a call whose value is used as it is (a statement of its own, assigned, an operand, an argument
      of a builtin such as `print`): it gets a coroutine, not the result, and the function never runs. A call
      awaited, or handed to another function (asyncio's runners, a task group, a wrapper), is not judged;
    - now an ordinary function, a call awaited or handed to one of asyncio's runners (TypeError, ValueError).
    Calls as `calls_of` finds them. Empty when the file does not parse or the function is not found on those
    lines."""
    found = calls_of(text, name, lines, method)
    if found is None:
        return []
    parent, calls = found

    def fits(call: ast.Call) -> bool:
        node, up = call, parent.get(call)
        while isinstance(up, _CARRIERS):  # (a comprehension's element: its loops are the `comprehension`'s)
            node, up = up, parent.get(up)
        if isinstance(up, ast.Await):
            return now_async
        if isinstance(up, ast.Call) and node is not up.func:
            f = up.func
            callee = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if callee in RUNNERS:
                return now_async
            if now_async:  # handed on: a wrapper may take a coroutine; a builtin takes the value
                return not (isinstance(f, ast.Name) and callee in _BUILTINS)
        return not now_async

    return sorted({c.lineno for c in calls if not fits(c)})
