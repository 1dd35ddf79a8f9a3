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


def region_statements(region: str) -> tuple[list[ast.stmt], int] | None:
    """The statements at a definition region's own level (whole lines, indented as in the file), and how many lines
    were put above it to parse it; None when it does not parse."""
    lead = "if 1:\n" if region[:1].isspace() else ""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            tree = ast.parse(lead + region)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return None
    body = tree.body[0].body if lead and tree.body and isinstance(tree.body[0], ast.If) else tree.body
    return body, lead.count("\n")


def lambda_name(statement: ast.stmt) -> str:
    """The name a statement binds to a lambda (`total = lambda xs: sum(xs)`, annotated or not), else ""."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        target = statement.targets[0]
    elif isinstance(statement, ast.AnnAssign):
        target = statement.target
    else:
        return ""
    return target.id if isinstance(target, ast.Name) and isinstance(statement.value, ast.Lambda) else ""


def binds_lambda(region: str, name: str) -> bool:
    """Whether a region (or an answer) binds `name` to a lambda at its own level: asked to "convert it to an arrow
    function", the coder writes `total_area = lambda shapes: ...` for a function, which defines it all the same."""
    parsed = region_statements(region)
    return parsed is not None and any(lambda_name(s) == name for s in parsed[0])


def loose_statements(old_region: str, new_region: str) -> list[tuple[int, str]]:
    """The statements a rewrite's answer puts beside the definition at its level that are neither a definition nor
    an import (`logging.basicConfig(...)` above a function asked to log): they run when the module is loaded (or the
    class defined), not when the function is called. Those the old region held already are not counted. Each as
    (its first line in the new region, 1-based; that line's text, stripped). Empty when a region does not parse."""
    new = region_statements(new_region)
    old = region_statements(old_region)
    if new is None or old is None:
        return []
    kept = {ast.dump(s) for s in old[0]}
    found = []
    lines = new_region.split("\n")
    for s in new[0]:
        if isinstance(s, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef | ast.Import | ast.ImportFrom):
            continue
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and isinstance(s.value.value, str):
            continue  # a string alone: a comment's way
        if lambda_name(s):
            continue  # a function defined as a lambda: a definition in all but form
        if ast.dump(s) in kept:
            continue
        row = s.lineno - new[1]
        found.append((row, lines[row - 1].strip()))
    return found
