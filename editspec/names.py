"""Names a Python rewrite uses that nothing defines: not the file (its definitions, assignments and imports,
the answer's own helpers and the imports it added among them), not Python's builtins. Such a name raises
NameError when the code runs; the answer still parses, so the syntax check cannot see it. Only names the
rewrite brought in count: one the code used before is the file's business (set by `globals()`, say).

Python's own scoping decides (`symtable`): a name a function reads that is neither its own nor an enclosing
function's is looked up in the module, so a method reading a class attribute by its bare name counts too (it
is NameError as well). A signature (decorators, defaults, annotations) is read where the definition stands:
in the module, or in the class body for a method. Undecidable, so nothing is reported: a file that does
`from m import *`, calls `globals()`, `vars()` or `exec`, or does not parse.

And names a rewrite's signatures read that the module defines only later (`read_too_early`): a method annotated
with its own class, a default naming a constant further down. NameError when the file is imported."""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import re
import symtable
import sys

from . import pysource

MODULE_DUNDERS = {"__file__", "__name__", "__doc__", "__builtins__", "__spec__", "__loader__", "__package__",
                  "__path__", "__annotations__", "__dict__", "__debug__", "__class__"}  # fmt: skip
# Calls that can define module names no statement shows (`globals().update(Enum.__members__)`, as ssl and re do):
# a file that makes one gets no note (`vars()` without an argument, that is: `vars(obj)` is obj's own).
INJECTS = {"globals", "vars", "exec"}
BUILTINS = set(dir(builtins)) | MODULE_DUNDERS
# Before Python 3.14 (PEP 649) a function's annotations are evaluated when its `def` runs; from 3.14 on, when
# something asks for them.
EAGER_ANNOTATIONS = sys.version_info < (3, 14)


def _tables(text: str, strict: bool = True) -> tuple[ast.Module, symtable.SymbolTable] | None:
    """The module's syntax tree and symbol table, or None where names cannot be decided (no parse, or, when
    `strict`, a star import or a call that can define names unseen)."""
    parsed = pysource.tables(text)
    if parsed is None:  # (nested too deep for the parser, say): no note
        return None
    tree, top = parsed
    if not strict:
        return tree, top
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
            return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in INJECTS:
            if not (n.func.id == "vars" and n.args):  # `vars(obj)` is obj's attributes, not the module's names
                return None
    return tree, top


def _module_names(top: symtable.SymbolTable) -> set[str]:
    """What the module defines: its own names (assigned, imported, def or class), and names a function declares
    `global` and assigns or imports."""
    names = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    return names | _globals_set_in_functions(top)


def _read_globals(top: symtable.SymbolTable, first_line: int, last_line: int) -> set[str]:
    """Names looked up in the module by the scopes (functions, classes, comprehensions) that start within the
    lines (1-based, inclusive), and by everything inside them."""
    found: set[str] = set()
    stack = [(t, False) for t in top.get_children()]
    while stack:
        t, inside = stack.pop()
        inside = inside or first_line <= t.get_lineno() <= last_line
        if inside:
            # (Not is_local: Python 3.11's symtable takes any scope named "top" for the module's, and calls
            # its parameters global.)
            found |= {s.get_name() for s in t.get_symbols() if s.is_referenced() and s.is_global() and not s.is_local()}
        stack.extend((c, inside) for c in t.get_children())
    return found


NESTED_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _loaded(node: ast.AST) -> set[str]:
    """The bare names an expression reads (not inside a lambda or comprehension of its own: their names are
    theirs)."""
    if isinstance(node, NESTED_SCOPES):
        return set()
    if isinstance(node, ast.Name):
        return {node.id} if isinstance(node.ctx, ast.Load) else set()
    return set().union(*(_loaded(child) for child in ast.iter_child_nodes(node)))


def _class_bodies(top: symtable.SymbolTable) -> dict[tuple[str, int], set[str]]:
    """Per class (name, line of its `class`): the names its body binds, however (under an `if`, a `try`, a `for`,
    a `with`, an import, a walrus), as Python's own scoping sees them."""
    found: dict[tuple[str, int], set[str]] = {}
    stack = list(top.get_children())
    while stack:
        t = stack.pop()
        if t.get_type() == "class":
            bound = {s.get_name() for s in t.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
            # A private name (`__marker`) is kept mangled (`_OrderedDict__marker`); the syntax tree reads it plain.
            mangled = f"_{t.get_name().lstrip('_')}__"
            bound |= {"__" + name[len(mangled) :] for name in bound if name.startswith(mangled)}
            found[(t.get_name(), t.get_lineno())] = bound
        stack.extend(t.get_children())
    return found


def _signature_reads(tree: ast.Module, top: symtable.SymbolTable, first_line: int, last_line: int) -> set[str]:
    return {name for name, _ in _signature_reads_at(tree, top, first_line, last_line)}


def _signature_reads_at(
    tree: ast.Module, top: symtable.SymbolTable, first_line: int, last_line: int, annotations: bool = True
) -> list[tuple[str, int]]:
    """Names read by the signatures of definitions that start within the lines and stand in the module or in a
    class, with the line of the definition that reads them: decorators, defaults, annotations (unless postponed
    by `from __future__ import annotations`), a class's bases. Python evaluates them where the definition stands,
    when the module runs, so they are the module's (or the class body's) reads, which a function's own scope does
    not show."""
    postponed = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    found: list[tuple[str, int]] = []
    bodies = _class_bodies(top)

    def visit(body: list[ast.stmt], class_names: set[str]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                if first_line <= node.lineno <= last_line:
                    parts: list[ast.AST] = list(node.decorator_list)
                    if isinstance(node, ast.ClassDef):
                        parts += [*node.bases, *(k.value for k in node.keywords)]
                    else:
                        a = node.args
                        parts += [*a.defaults, *(d for d in a.kw_defaults if d is not None)]
                        if annotations and not postponed:
                            every = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                            parts += [x.annotation for x in every if x is not None and x.annotation is not None]
                            parts += [node.returns] if node.returns is not None else []
                    found.extend((name, node.lineno) for p in parts for name in sorted(_loaded(p) - class_names))
                if isinstance(node, ast.ClassDef):
                    # Its own body's names only: a class body does not see an enclosing class's.
                    visit(node.body, bodies.get((node.name, node.lineno), set()))
            else:
                for field in ("body", "orelse", "finalbody"):  # if, try, with, for, while at this level
                    visit(getattr(node, field, None) or [], class_names)
                for handler in getattr(node, "handlers", None) or []:
                    visit(handler.body, class_names)

    visit(tree.body, set())
    return found


def undefined(text: str, first_line: int, last_line: int) -> set[str] | None:
    """Names the code between the lines reads from the module that neither the module nor builtins define (None:
    cannot be told)."""
    return _undefined_in(_tables(text), first_line, last_line)


def _undefined_in(tables: tuple[ast.Module, symtable.SymbolTable] | None, first_line: int, last_line: int):
    if tables is None:
        return None
    tree, top = tables
    try:
        reads = _read_globals(top, first_line, last_line) | _signature_reads(tree, top, first_line, last_line)
    except RecursionError:  # an expression nested deeper than Python recurses: no note rather than no rewrite
        return None
    return reads - _module_names(top) - BUILTINS


def _bound_at(tree: ast.Module) -> dict[str, int]:
    """Per name the module binds as it runs, the first line after which it is bound: an assignment's or import's
    own (last) line, a `def`'s or `class`'s last line (a class's name is bound once its whole body has run), a
    `for` or `with` target's first line; in blocks at the module's level too (if, try, for, while, with)."""
    bound: dict[str, int] = {}

    def bind(name: str, line: int) -> None:
        bound[name] = min(line, bound.get(name, line))

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                bind(node.name, node.end_lineno or node.lineno)
                continue  # what its body binds is its own
            if isinstance(node, ast.Import | ast.ImportFrom):
                for alias in node.names:
                    bind((alias.asname or alias.name).split(".")[0], node.lineno)
            elif isinstance(node, ast.For | ast.AsyncFor):
                for name in _stored(node.target):
                    bind(name, node.lineno)
            elif isinstance(node, ast.With | ast.AsyncWith):
                for item in node.items:
                    for name in _stored(item.optional_vars) if item.optional_vars is not None else ():
                        bind(name, node.lineno)
            elif not hasattr(node, "body"):  # a simple statement (an assignment, a walrus in an expression)
                for name in _stored(node):
                    bind(name, node.end_lineno or node.lineno)
            for field in ("body", "orelse", "finalbody"):
                visit(getattr(node, field, None) or [])
            for handler in getattr(node, "handlers", None) or []:
                if handler.name:
                    bind(handler.name, handler.lineno)
                visit(handler.body)

    visit(tree.body)
    return bound


def _stored(node: ast.AST) -> set[str]:
    """The bare names a statement assigns (walrus included), not inside a lambda or comprehension of its own."""
    if isinstance(node, NESTED_SCOPES):
        return set()
    own = {node.id} if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store) else set()
    return own.union(*(_stored(child) for child in ast.iter_child_nodes(node)))


def read_too_early(text: str, first_line: int, last_line: int) -> set[str] | None:
    """Names the signatures of definitions between the lines read when the module runs (annotations, defaults,
    decorators, bases) that the module binds only after that: a class named in its own methods' annotations, a
    class defined further down. NameError when the file is imported (None: cannot be told). Annotations count
    where Python evaluates them when the `def` runs (see EAGER_ANNOTATIONS) and `from __future__ import
    annotations` does not postpone them."""
    return _too_early_in(_tables(text), first_line, last_line)


def _too_early_in(tables: tuple[ast.Module, symtable.SymbolTable] | None, first_line: int, last_line: int):
    if tables is None:
        return None
    tree, top = tables
    try:
        reads = _signature_reads_at(tree, top, first_line, last_line, annotations=EAGER_ANNOTATIONS)
        bound = _bound_at(tree)
    except RecursionError:
        return None
    # Not what runs only under a type checker (`if TYPE_CHECKING:`); and a name a function binds with `global` is
    # bound whenever it runs: no telling.
    unseen = _type_checking_lines(tree)
    late = {name for name, line in reads if name in bound and bound[name] >= line and line not in unseen}
    return late - _globals_set_in_functions(top)


def _type_checking_lines(tree: ast.Module) -> set[int]:
    """The lines of `if TYPE_CHECKING:` (or `typing.TYPE_CHECKING`) blocks: code a type checker reads and Python
    never runs."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        test = node.test if isinstance(node, ast.If) else None
        if (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
            isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
        ):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def _globals_set_in_functions(top: symtable.SymbolTable) -> set[str]:
    """Names a function declares `global` and assigns or imports: bound in the module when it runs."""
    names: set[str] = set()
    stack = list(top.get_children())
    while stack:
        t = stack.pop()
        names |= {
            s.get_name() for s in t.get_symbols() if s.is_declared_global() and (s.is_assigned() or s.is_imported())
        }
        stack.extend(t.get_children())
    return names


def brought_in(
    old_text: str, old_lines: tuple[int, int], new_text: str, new_lines: tuple[int, int]
) -> tuple[list[str], list[str]]:
    """What the rewrite of the lines `old_lines` of `old_text` (into `new_lines` of `new_text`) brings in, sorted:
    names it reads that nothing defines (`undefined`), and names its signatures read too early (`read_too_early`),
    less what the old code did already. Empty when it cannot be told. Each text is parsed once (the old one only
    when the new one has something to report)."""
    new = _tables(new_text)
    after = (_undefined_in(new, *new_lines) or set(), _too_early_in(new, *new_lines) or set())
    if not any(after):
        return [], []
    old = _tables(old_text)
    before = (_undefined_in(old, *old_lines) or set(), _too_early_in(old, *old_lines) or set())
    return sorted(after[0] - before[0]), sorted(after[1] - before[1])


# Standard-library modules whose import runs nothing but definitions: their public names can be listed by
# importing them. (Another module's star import is left as the answer wrote it: importing it could run anything.)
LISTABLE = frozenset(
    (
        "typing typing_extensions collections collections.abc functools itertools operator math cmath statistics "
        "decimal fractions random string re os os.path pathlib datetime time json dataclasses enum abc numbers "
        "contextlib copy heapq bisect textwrap"
    ).split()
)
STAR = re.compile(r"from\s+([\w.]+)\s+import\s+\*\s*$")


def public_names(module: str) -> set[str] | None:
    """The names `from MODULE import *` binds, for a module of LISTABLE (its `__all__`, else its names without a
    leading underscore); None for any other module."""
    if module not in LISTABLE:
        return None
    try:
        mod = importlib.import_module(module)
    except ImportError:
        return None
    listed = getattr(mod, "__all__", None)
    return set(listed) if listed is not None else {n for n in dir(mod) if not n.startswith("_")}


def explicit_stars(imports: list[str], text: str, lines: tuple[int, int]) -> list[str]:
    """The import statements an answer opens with, each `from M import *` replaced by the names of M that the
    rewritten code (lines `lines` of `text`, the new file without the answer's imports) reads and nothing else
    binds: `from typing import List, Optional`; left out where it reads none of them (asked to add type hints,
    the coder writes `from typing import *`, `from math import *` and `from functools import *` above code that
    needs none). A star import stays as it is where M is not a module of LISTABLE. Where the file has a star
    import of its own, or calls `exec`, the names the code reads that no statement binds are imported by name
    all the same: the file's may bind some of them too, which imports them twice, not wrongly."""
    stars = {i: STAR.match(i.strip()) for i in imports}
    if not any(stars.values()):
        return imports
    wanted = _undefined_in(_tables(text, strict=False), *lines)
    if wanted is None:
        return imports
    for statement in imports:
        if not stars[statement]:
            try:
                parsed = ast.parse(statement)
            except SyntaxError:
                continue
            for node in ast.walk(parsed):
                if isinstance(node, ast.alias):
                    wanted.discard((node.asname or node.name).split(".")[0])
    kept = []
    for statement in imports:
        match = stars[statement]
        if not match:
            kept.append(statement)
            continue
        offered = public_names(match.group(1))
        if offered is None:
            kept.append(statement)
            continue
        used = sorted(wanted & offered)
        wanted -= offered
        if used:
            kept.append(f"from {match.group(1)} import {', '.join(used)}")
    return kept


def without_own_names(imports: list[str], text: str) -> tuple[list[str], list[str]]:
    """The import statements an answer opens with, less each name that a module of LISTABLE does not have and that
    the file (`text`, the new file without the answer's imports) binds itself: asked to add type hints to
    textwrap's `shorten`, the coder wrote `from typing import TextWrapper` above the file's own `class
    TextWrapper`, and the module no longer imported. The code means the file's own; on a Python whose module had
    the name, the import would only be hidden by it. Returns (the statements kept, each name left out as
    "`TextWrapper` from typing"); a statement whose every name is left out is left out too."""
    parsed_text = pysource.tables(text)
    if parsed_text is None:
        return imports, []
    own = _module_names(parsed_text[1])
    kept, left_out = [], []
    for statement in imports:
        try:
            body = ast.parse(statement).body
        except SyntaxError:
            body = []
        node = body[0] if len(body) == 1 else None
        module = _listable(node)
        if module is None:
            kept.append(statement)
            continue
        names = [a for a in node.names if not ((a.asname or a.name) in own and _lacks(module, a.name))]
        left_out += [f"`{a.name}` from {node.module}" for a in node.names if a not in names]
        if len(names) == len(node.names):
            kept.append(statement)
        elif names:
            kept.append(ast.unparse(ast.ImportFrom(module=node.module, names=names, level=0)))
    return kept, left_out


def _listable(node: ast.stmt | None):
    """The module a `from M import ...` statement imports from, where M is a module of LISTABLE; else None."""
    if not isinstance(node, ast.ImportFrom) or node.level or node.module not in LISTABLE:
        return None
    return importlib.import_module(node.module)


def _lacks(module, name: str) -> bool:
    return name != "*" and not hasattr(module, name) and not _submodule(module, name)


def missing_imports(imports: list[str]) -> list[str]:
    """Of `from M import a, b` statements, the names a module of LISTABLE does not have (nor as a submodule): the
    file raises ImportError when imported (asked to add type hints to fnmatch, the coder wrote `from os import
    normcase`, which is os.path's). Each as "`normcase` from os", with where it is among LISTABLE's modules when
    one has it ("(os.path has it)"). Judged by the Python editspec runs on: a project on another may differ."""
    found = []
    for statement in imports:
        try:
            parsed = ast.parse(statement)
        except SyntaxError:
            continue
        for node in parsed.body:
            module = _listable(node)
            if module is None:
                continue
            for alias in node.names:
                name = alias.name
                if not _lacks(module, name):
                    continue
                where = sorted(m for m in LISTABLE if m != node.module and name in (public_names(m) or ()))
                found.append(f"`{name}` from {node.module}" + (f" ({where[0]} has it)" if where else ""))
    return found


def _submodule(module, name: str) -> bool:
    if not hasattr(module, "__path__"):  # not a package: no submodules
        return False
    try:
        return importlib.util.find_spec(f"{module.__name__}.{name}") is not None
    except (ImportError, ValueError):
        return False
