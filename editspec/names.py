"""Names a Python rewrite uses that nothing defines: not the file (its definitions, assignments and imports,
the answer's own helpers and the imports it added among them), not Python's builtins. Such a name raises
NameError when the code runs; the answer still parses, so the syntax check cannot see it. Only names the
rewrite brought in count: one the code used before is the file's business (set by `globals()`, say).

Python's own scoping decides (`symtable`): a name a function reads that is neither its own nor an enclosing
function's is looked up in the module, so a method reading a class attribute by its bare name counts too (it
is NameError as well). Undecidable, so nothing is reported: a file that does `from m import *`, or that does not
parse."""

from __future__ import annotations

import ast
import builtins
import symtable

MODULE_DUNDERS = {"__file__", "__name__", "__doc__", "__builtins__", "__spec__", "__loader__", "__package__",
                  "__path__", "__annotations__", "__dict__", "__debug__"}  # fmt: skip
BUILTINS = set(dir(builtins)) | MODULE_DUNDERS


def _tables(text: str) -> symtable.SymbolTable | None:
    """The module's symbol table, or None where names cannot be decided (no parse, a star import)."""
    try:
        tree = ast.parse(text)
        top = symtable.symtable(text, "<file>", "exec")
    except (SyntaxError, ValueError):
        return None
    star = any(isinstance(n, ast.ImportFrom) and any(a.name == "*" for a in n.names) for n in ast.walk(tree))
    return None if star else top


def _module_names(top: symtable.SymbolTable) -> set[str]:
    """What the module defines: its own names (assigned, imported, def or class), and names a function declares
    `global` and assigns."""
    names = {s.get_name() for s in top.get_symbols() if s.is_assigned() or s.is_imported() or s.is_namespace()}
    stack = list(top.get_children())
    while stack:
        t = stack.pop()
        names |= {s.get_name() for s in t.get_symbols() if s.is_declared_global() and s.is_assigned()}
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
            found |= {s.get_name() for s in t.get_symbols() if s.is_referenced() and s.is_global()}
        stack.extend((c, inside) for c in t.get_children())
    return found


def undefined(text: str, first_line: int, last_line: int) -> set[str] | None:
    """Names the code between the lines reads from the module that neither the module nor builtins define (None:
    cannot be told)."""
    top = _tables(text)
    if top is None:
        return None
    return _read_globals(top, first_line, last_line) - _module_names(top) - BUILTINS


def names_brought_in(old_text: str, old_lines: tuple[int, int], new_text: str, new_lines: tuple[int, int]) -> list[str]:
    """The names the rewrite of the lines `old_lines` of `old_text` (into `new_lines` of `new_text`) reads that
    nothing defines, less those the old code read already undefined; sorted. Empty when it cannot be told."""
    after = undefined(new_text, *new_lines)
    if not after:
        return []
    before = undefined(old_text, *old_lines) or set()
    return sorted(after - before)
