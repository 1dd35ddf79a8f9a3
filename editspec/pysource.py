"""Python's own view of a Python file, as the running Python sees it: its syntax tree and symbol table, and
whether it compiles. Compiled only, never run, and its warnings (an invalid escape sequence: a SyntaxWarning
from Python 3.12 on) are not shown: they are the file's, not the rewrite's."""

from __future__ import annotations

import ast
import symtable
import warnings


def tables(text: str) -> tuple[ast.Module, symtable.SymbolTable] | None:
    """The module's syntax tree and symbol table, or None when Python cannot make them (a syntax error, a NUL
    byte, code nested too deep for its parser)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            return ast.parse(text), symtable.symtable(text, "<file>", "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None


def compile_error(text: str) -> str | None:
    """Why Python would not compile the text, as "line N: message", or None. tree-sitter's grammar is more
    lenient than Python's: it takes a block whose lines mix tabs and spaces inconsistently (a line copied with
    its tabs, a new one with spaces), a Python 2 `print "x"`, a `return` outside a function."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            compile(text.removeprefix("\ufeff"), "<rewrite>", "exec", dont_inherit=True)
        except SyntaxError as e:  # (IndentationError and TabError among them)
            return f"line {e.lineno}: {e.msg}"
        except (ValueError, RecursionError, MemoryError) as e:
            return f"{type(e).__name__}: {e}"
    return None
