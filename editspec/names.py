"""Names a Python rewrite uses that nothing defines: not the file (its definitions, assignments and imports,
the answer's own helpers and the imports it added among them), not Python's builtins. Such a name raises
NameError when the code runs; the answer still parses, so the syntax check cannot see it. Only names the
rewrite brought in count: one the code used before is the file's business (set by `globals()`, say).

Python's own scoping decides (`symtable`): a name a function reads that is neither its own nor an enclosing
function's is looked up in the module, so a method reading a class attribute by its bare name counts too (it
is NameError as well). A signature (decorators, defaults, annotations) is read where the definition stands:
in the module, or in the class body for a method. Undecidable, so nothing is reported: a file that does
`from m import *`, calls `globals()`, `vars()` or `exec`, or does not parse."""

from __future__ import annotations

import ast
import builtins
import symtable

from . import pysource

MODULE_DUNDERS = {"__file__", "__name__", "__doc__", "__builtins__", "__spec__", "__loader__", "__package__",
                  "__path__", "__annotations__", "__dict__", "__debug__", "__class__"}  # fmt: skip
# Calls that can define module names no statement shows (`globals().update(Enum.__members__)`, as ssl and re do):
# a file that makes one gets no note.
INJECTS = {"globals", "vars", "exec"}
BUILTINS = set(dir(builtins)) | MODULE_DUNDERS


def _tables(text: str) -> tuple[ast.Module, symtable.SymbolTable] | None:
    """The module's syntax tree and symbol table, or None where names cannot be decided (no parse, a star
    import, a call that can define names unseen)."""
    parsed = pysource.tables(text)
    if parsed is None:  # (nested too deep for the parser, say): no note
        return None
    tree, top = parsed
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names):
            return None
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in INJECTS:
            return None
    return tree, top


def _module_names(top: symtable.SymbolTable) -> set[str]:
    """What the module defines: its own names (assigned, imported, def or class), and names a function declares
    `global` and assigns or imports."""
    names = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    stack = list(top.get_children())
    while stack:
        t = stack.pop()
        names |= {
            s.get_name() for s in t.get_symbols() if s.is_declared_global() and (s.is_assigned() or s.is_imported())
        }
        stack.extend(t.get_children())
    return names


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
            found[(t.get_name(), t.get_lineno())] = bound
        stack.extend(t.get_children())
    return found


def _signature_reads(tree: ast.Module, top: symtable.SymbolTable, first_line: int, last_line: int) -> set[str]:
    """Names read by the signatures of definitions that start within the lines and stand in the module or in a
    class: decorators, defaults, annotations (unless postponed by `from __future__ import annotations`), a
    class's bases. Python evaluates them where the definition stands, so they are the module's (or the class
    body's) reads, which a function's own scope does not show."""
    postponed = any(
        isinstance(n, ast.ImportFrom) and n.module == "__future__" and any(a.name == "annotations" for a in n.names)
        for n in tree.body
    )
    found: set[str] = set()
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
                        if not postponed:
                            every = [*a.posonlyargs, *a.args, *a.kwonlyargs, a.vararg, a.kwarg]
                            parts += [x.annotation for x in every if x is not None and x.annotation is not None]
                            parts += [node.returns] if node.returns is not None else []
                    found.update(*(_loaded(p) - class_names for p in parts))
                elif isinstance(node, ast.ClassDef):
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
    tables = _tables(text)
    if tables is None:
        return None
    tree, top = tables
    try:
        reads = _read_globals(top, first_line, last_line) | _signature_reads(tree, top, first_line, last_line)
    except RecursionError:  # an expression nested deeper than Python recurses: no note rather than no rewrite
        return None
    return reads - _module_names(top) - BUILTINS


def names_brought_in(old_text: str, old_lines: tuple[int, int], new_text: str, new_lines: tuple[int, int]) -> list[str]:
    """The names the rewrite of the lines `old_lines` of `old_text` (into `new_lines` of `new_text`) reads that
    nothing defines, less those the old code read already undefined; sorted. Empty when it cannot be told."""
    after = undefined(new_text, *new_lines)
    if not after:
        return []
    before = undefined(old_text, *old_lines) or set()
    return sorted(after - before)
