"""Rewrite one definition: read the file, build the prompt, decode, and turn the answer into edits.

Everything here works on text with "\n" line ends; `SourceFile` remembers whether the file used CRLF and
puts it back. The CLI, batch mode and the language server all call `Rewriter.rewrite`.
"""

from __future__ import annotations

import codecs
import contextlib
import copy
import dataclasses
import difflib
import hashlib
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import calls, generators, hoisting, names, promises, prompts, properties, pysource
from .decoding import PREFIX_CACHE_MB, Decoder
from .engine import Round, Stats
from .locate import (
    CLASS_LIKE,
    Definition,
    LanguageSpec,
    code_leaves,
    definitions,
    error_nodes,
    error_offsets,
    file_context,
    file_imports,
    import_insertion,
    introduced_errors,
    leading_imports,
    new_imports,
    outermost,
    outside_code,
    parse,
    part_of,
    reparse_after_replace,
    same_code,
    sharing_lines,
    syntax_errors,
    written_back,
)
from .prefix_cache import PrefixCache, common_prefix
from .trace import build_trace, forked_trace


class RewriteError(Exception):
    """Bad input for a rewrite; the message says what is wrong and what to do."""


@dataclass
class SourceFile:
    path: Path | None  # None: standard input
    raw: bytes
    text: str  # with "\n" line ends
    crlf: bool

    @classmethod
    def from_bytes(cls, raw: bytes, path: Path | None = None) -> SourceFile:
        name = str(path) if path else "standard input"
        if b"\0" in raw[:8192]:
            raise RewriteError(f"{name} looks like a binary file (it contains NUL bytes)")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise RewriteError(f"{name} is not UTF-8 text (byte {e.start}): convert it to UTF-8 first") from None
        crlf = "\r\n" in text
        return cls(path, raw, text.replace("\r\n", "\n") if crlf else text, crlf)

    @classmethod
    def read(cls, path: Path) -> SourceFile:
        if path.is_dir():
            raise RewriteError(f"{path} is a directory; give a file (or use `editspec batch` for a tree)")
        if path.is_char_device() or path.is_block_device():  # /dev/zero would be read until memory runs out
            raise RewriteError(f"{path} is a device, not a file")
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            raise RewriteError(f"no such file: {path}") from None
        except PermissionError:
            raise RewriteError(f"cannot read {path}: permission denied") from None
        return cls.from_bytes(raw, path)

    def encode(self, text: str) -> bytes:
        """The file's bytes for a new "\n" text: every line that is still there keeps its own line end (a
        file may mix them); a new line takes the ending of the lines it replaces, else of the line before it."""
        if not self.crlf:
            return text.encode("utf-8")
        old = lf_lines(self.raw.decode("utf-8"))
        new = lf_lines(text)
        bare = [line.replace("\r\n", "\n") for line in old]
        out: list[str] = []
        matcher = difflib.SequenceMatcher(a=bare, b=new, autojunk=False)
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                out.extend(old[i1:i2])
                continue
            replaced = old[i1:i2] or old[max(i1 - 1, 0) : i1] or old[:1]
            crlf = sum(line.endswith("\r\n") for line in replaced) * 2 >= len(replaced) > 0
            for line in new[j1:j2]:
                out.append(line[:-1] + "\r\n" if crlf and line.endswith("\n") else line)
        return "".join(out).encode("utf-8")

    def diff(self, text: str) -> str:
        """The patch from this file to a new "\n" text, in the file's own line ends (what --apply would write)."""
        return self.diff_to(self.encode(text))

    def diff_to(self, new: bytes) -> str:
        """The patch from this file to new bytes of it (`encode`'s, when they are at hand already)."""
        return unified_diff(self.raw.decode("utf-8"), new.decode("utf-8"), self.path)

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.raw).hexdigest()


WILDCARD_IMPORT = re.compile(r"from\s+[\w.]+\s+import\s+\*")  # Python's `from typing import *`

# A carriage return inside a line: a line break to Python and JavaScript, and to tree-sitter's Python grammar part of
# one line with the next (in `def f():\r  return 1\r\rdef g():...` f holds g, and f's rewrite rewrote g). Not one
# right before a line's end (`\r\r\n`, which some tools write): trailing space.
LONE_CR = re.compile(rb"\r(?=[^\r\n])")


def lf_lines(text: str) -> list[str]:
    """`text`'s lines with their line breaks, broken at "\n" alone. Not `str.splitlines`, which also breaks at form
    feed, `\\v`, `\\x1c`-`\\x1e`, `\\x85`, `\\u2028` and `\\u2029`: inside a line they are its text (a string's
    data), and indenting after one would change it."""
    lines = text.split("\n")
    return [line + "\n" for line in lines[:-1]] + ([lines[-1]] if lines[-1] else [])


class FileChanged(RewriteError):
    """The file changed on disk while the model was working: nothing written."""


class CannotWrite(RewriteError):
    """The file may not be written (read-only), or writing it failed (a full disk): nothing written, the file as
    it was."""


def writable_target(path: Path) -> Path:
    """The file that writing `path` replaces: a symbolic link's target (the link stays a link, pointing at the
    new text), refused when this user may not write it."""
    real = Path(os.path.realpath(path))
    if real.exists() and not real.is_file():  # a FIFO, a device: the rename would put a plain file in its place
        raise CannotWrite(f"{path} is not a regular file; --apply writes only regular files (without it, a diff)")
    if real.exists() and not os.access(real, os.W_OK):
        raise CannotWrite(f"{path} is read-only; nothing written (make it writable first)")
    return real


def write_atomically(path: Path, data: bytes, expected: bytes) -> None:
    """Replace `path` (through a symbolic link, its target) with `data` in one rename, keeping its mode and, where
    this user may, its owner; refuse if it no longer holds `expected` or may not be written. On any failure the
    file is as it was and no temporary file is left."""
    target = writable_target(path)
    try:
        current = target.read_bytes()
    except OSError as e:
        raise CannotWrite(f"cannot re-read {path} before writing: {e.strerror or e}; nothing written") from None
    if current != expected:
        raise FileChanged(f"{path} changed on disk since it was read; nothing written (run again)")
    st = target.stat()
    try:
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".editspec")
    except OSError as e:
        raise CannotWrite(f"cannot write {path}: {e.strerror or e}; nothing written") from None
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if (st.st_uid, st.st_gid) != (os.geteuid(), os.getegid()):
            with contextlib.suppress(OSError):  # only root may give a file away; others keep it as theirs
                os.chown(tmp, st.st_uid, st.st_gid)
        os.chmod(tmp, stat.S_IMODE(st.st_mode))
        os.replace(tmp, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(e, OSError):
            raise CannotWrite(f"cannot write {path}: {e.strerror or e}; nothing written") from None
        raise


def patch_path(path: Path | str | None) -> str:
    """The file's name in a patch's `a/` and `b/` headers, as `git apply` and `patch -p1` read them: relative to
    the current directory when the file is inside it, else its absolute path without the leading slash (apply
    that from /)."""
    if path is None:
        return "stdin"
    p = Path(os.path.abspath(path))
    with contextlib.suppress(ValueError):
        return p.relative_to(Path.cwd()).as_posix()
    return p.as_posix().lstrip("/")


def unified_diff(old: str, new: str, path: Path | str | None) -> str:
    """A patch that `git apply` and `patch -p1` take as they take git's: lines split at "\n" only (a form feed or
    U+2028 is inside a line for them), "\\ No newline at end of file" after a last line without one, and a tab
    after a file name with a space in it (as git writes it, for patch)."""
    name = patch_path(path)
    tab = "\t" if " " in name else ""
    lines = difflib.unified_diff(lf_lines(old), lf_lines(new), f"a/{name}{tab}", f"b/{name}{tab}")
    return "".join(line if line.endswith("\n") else line + "\n\\ No newline at end of file\n" for line in lines)


@dataclass
class TextEdit:
    """Replace text[start:end] (character offsets in the "\n" text) with new_text."""

    start: int
    end: int
    new_text: str


def text_edits(old: str, new: str, base: int = 0) -> list[TextEdit]:
    """Small edits turning old into new: changed line blocks, trimmed of common leading/trailing characters."""
    old_lines, new_lines = old.splitlines(keepends=True), new.splitlines(keepends=True)
    old_starts = [0]
    for line in old_lines:
        old_starts.append(old_starts[-1] + len(line))
    edits = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        a, b = "".join(old_lines[i1:i2]), "".join(new_lines[j1:j2])
        prefix = len(os.path.commonprefix([a, b]))
        suffix = len(os.path.commonprefix([a[prefix:][::-1], b[prefix:][::-1]]))
        start = old_starts[i1] + prefix
        edits.append(TextEdit(base + start, base + old_starts[i2] - suffix, b[prefix : len(b) - suffix]))
    return edits


def apply_edits(text: str, edits: list[TextEdit]) -> str:
    for e in sorted(edits, key=lambda e: e.start, reverse=True):
        text = text[: e.start] + e.new_text + text[e.end :]
    return text


def common_indent(lines: list[str]) -> str:
    indents = [line[: len(line) - len(line.lstrip())] for line in lines if line.strip()]
    return os.path.commonprefix(indents) if indents else ""


def dedent(text: str, indent: str) -> str:
    """`text` without `indent` at its lines' starts; a blank line keeps only its line break (`line.lstrip()` took
    that too, until the twenty-sixth session: a method's blank lines were gone from the code the model saw)."""
    return "".join(
        line[len(indent) :] if line.startswith(indent) else line.lstrip(" \t") if not line.strip() else line
        for line in lf_lines(text)
    )


def _same_class(line: str, header: str) -> bool:
    """The header line again, or the same class's header written another way (other bases, a comment)."""
    if line.strip() == header.strip():
        return True
    a, b = CLASS_NAME.match(line), CLASS_NAME.match(header)
    return bool(a and b and a.group(1) == b.group(1) and line.rstrip().endswith(":"))


CLASS_NAME = re.compile(r"\s*class\s+(\w+)")


def unwrap_enclosing_class(answer: str, headers: list[str]) -> str:
    """A method is shown inside its class header, and the answer usually keeps it there. Rewriting a method
    means the method: take it back out (and its indentation with it). Works on a partial answer too."""
    lines = lf_lines(answer)
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is None or not headers or not _same_class(lines[first], headers[-1]):
        return answer
    body = lines[first + 1 :]
    if not all(line.startswith((" ", "\t")) or not line.strip() for line in body):
        return answer
    return dedent("".join(body), common_indent(body))


def top_level_definitions(data: bytes, spec: LanguageSpec) -> list[Definition]:
    """The definitions of an answer on unindented lines, in no class and inside no other definition. The line
    counts, not the node: `export function f`, `const f = () =>` and Go's `type T struct` begin with a keyword."""

    def unindented(offset: int) -> bool:
        line_start = data.rfind(b"\n", 0, offset) + 1
        return data[line_start : line_start + 1] not in (b" ", b"\t")

    return outermost([d for d in definitions(data, spec) if not d.containers and unindented(d.node_start)])


def _own_index(names: list[str], target: Definition, existing: set[str]) -> int | None:
    """Which of the answer's definitions stands for the target: the one of its name, else (a rename) the first
    that is not one of the file's other definitions; None if the answer only copies those."""
    if target.simple_name in names:
        return names.index(target.simple_name)
    return next((i for i, n in enumerate(names) if n not in existing), None)


def renamed_to(answer: str, spec: LanguageSpec, target: Definition, existing: set[str]) -> str:
    """The answer's new name for the target, where it renamed it ("" where not, or where that cannot be told)."""
    names = [d.simple_name for d in top_level_definitions(answer.encode("utf-8"), spec)]
    own = _own_index(names, target, existing) if names else None
    return "" if own is None or names[own] == target.simple_name else names[own]


def name_uses(name: str, data: bytes, tree, skip: tuple[int, int]) -> list[tuple[int, int]]:
    """Where `name` stands as an identifier in the parsed `data` outside the bytes `skip`: (byte offset, line)
    pairs, lines 1-based; comments and strings are not identifiers."""
    want = name.encode("utf-8")
    return [
        (leaf.start_byte, leaf.start_point[0] + 1)
        for leaf in _leaves(tree.root_node)
        if data[leaf.start_byte : leaf.end_byte] == want
        and not skip[0] <= leaf.start_byte < skip[1]
        and ("identifier" in leaf.type or leaf.type in ("name", "constant", "word"))
    ]


def _judged(answer: str, spec: LanguageSpec, target: Definition, existing: set[str]) -> tuple[list[str], list[str]]:
    """(refused, helpers) among the answer's top-level definitions: see refused_definitions. Parses once."""
    if target.kind in CLASS_LIKE:
        return [], []
    names = [d.simple_name for d in top_level_definitions(answer.encode("utf-8"), spec)]
    if not names:
        return [], []
    own = _own_index(names, target, existing)
    if own is None:
        return names, []  # the file's other definitions instead of the target
    others = names[:own] + names[own + 1 :]
    refused = [n for n in others if n in existing or n == names[own] or others.count(n) > 1]
    return refused, [n for n in others if n not in refused]


def file_gap(text: str, first_line: int, last_line: int) -> int:
    """How many blank lines the file puts between the definition on lines `first_line`-`last_line` (1-based) and
    the code above it, or, where none, below it: the gap its definitions keep (two in PEP 8's Python, one between
    methods). 0 where it has none either side."""
    lines = text.split("\n")

    def blanks(rows) -> int:
        for n, row in enumerate(rows):
            if lines[row].strip():
                return n
        return 0  # blank up to the file's edge: no gap to go by

    return blanks(range(first_line - 2, -1, -1)) or blanks(range(last_line, len(lines)))


def spaced_as_file(answer: str, spec: LanguageSpec, gap: int) -> str:
    """The answer with `gap` blank lines between its top-level definitions where only blank lines (or none)
    separate them: a helper the model writes beside the function gets the file's spacing (the coder put one blank
    line between a new helper and the function in a file that keeps two, which linters flag). Nothing changes when
    `gap` is 0 or the answer holds one definition."""
    if gap < 1:
        return answer
    top = top_level_definitions(answer.encode("utf-8"), spec)
    if len(top) < 2:
        return answer
    lines = lf_lines(answer)
    for before, after in reversed(list(zip(top, top[1:], strict=False))):
        between = lines[before.end_line : after.line - 1]
        if all(not line.strip() for line in between) and len(between) != gap:
            lines[before.end_line : after.line - 1] = ["\n"] * gap
    return "".join(lines)


def defines_nothing(code: str, answer: str, spec: LanguageSpec, name: str = "") -> bool:
    """Whether the answer holds no definition where the code it rewrites (read the same way, on its own) holds
    one: written, it would take the definition out of the file. In every language, a definition that cannot be
    read on its own (a method without its class, in some) is never judged so. In Python, binding the
    definition's `name` to a lambda defines it."""
    if spec.name == "python" and name and pysource.binds_lambda(answer, name):
        return False
    return not top_level_definitions(answer.encode("utf-8"), spec) and bool(
        top_level_definitions(code.encode("utf-8"), spec)
    )


def refused_definitions(answer: str, spec: LanguageSpec, target: Definition, existing: set[str]) -> list[str]:
    """Definitions in the answer that make it more than a rewrite of the target (after `cut_copies`). A new
    helper beside the target is fine when its name clashes with nothing in the file (`existing`: the names
    defined there, the target's aside); one of the file's other definitions, or a second one of the target's
    name or of a helper's, is not. A class target may hold anything."""
    return _judged(answer, spec, target, existing)[0]


def new_helpers(answer: str, spec: LanguageSpec, target: Definition, existing: set[str]) -> list[str]:
    """The new definitions written beside the target (accepted: see refused_definitions)."""
    return _judged(answer, spec, target, existing)[1]


def cut_copies(answer: str, spec: LanguageSpec, target: Definition, existing: set[str]):
    """A model that has rewritten the target often goes on to copy the file's next definitions. Those are not
    written (the rewrite replaces the target only): the answer is cut where, after the target's definition,
    one of the file's other definitions begins. Returns (the answer, the names left out). (Copies before the
    target are refused instead: measured on CanItEdit, every such answer was a wrong edit.)"""
    if target.kind in CLASS_LIKE:
        return answer, []
    data = answer.encode("utf-8")
    top = top_level_definitions(data, spec)
    names = [d.simple_name for d in top]
    own = _own_index(names, target, existing)
    if own is None:
        return answer, []
    after = next((i for i in range(own + 1, len(top)) if names[i] in existing), None)
    if after is None:
        return answer, []
    return data[: top[after].start].decode("utf-8", errors="replace").rstrip() + "\n", names[after:]


def settled_extra_definition(partial: str, spec: LanguageSpec, target: Definition, existing: set[str]) -> str | None:
    """A reason to stop generating that no continuation of a partial answer can take back, once a definition
    is complete and another has begun at the top level: one of the file's other definitions before the
    target's (a certain refusal), or after it (a copy, cut off: see `cut_copies`), or a second definition of
    the target's name."""
    if target.kind in CLASS_LIKE:
        return None
    data = partial[: partial.rfind("\n") + 1].encode("utf-8")
    top = top_level_definitions(data, spec)
    if len(top) < 2 or syntax_errors(data[: top[-1].start], spec):
        return None
    names = [d.simple_name for d in top]
    own = _own_index(names, target, existing)
    if own is None:
        return names[0]
    return next((n for n in names[:own] if n in existing), None) or next(
        (n for n in names[own + 1 :] if n in existing or n == names[own]), None
    )


def invented_class(partial: str, spec: LanguageSpec, target: Definition) -> tuple[bool, tuple[int, str] | None]:
    """Python, a method: where an answer opens with (imports and then) the method's own class header and goes on
    with something else than the method, where the class's body begins (characters) and its indentation. A model
    asked for type hints on a method of a file that imports from `typing` writes the import, the header, and then a
    class of its own (stub methods, then the one asked for), which is refused; it writes the method there, from
    the method's own header on (`Rewriter._from_own_header`). A header followed by the method itself is the usual
    answer, taken out of its class by `unwrap_enclosing_class`. Returns (whether the answer's complete lines settle
    it, the place or None): (False, None) while they do not."""
    if spec.name != "python" or not target.containers or target.kind in CLASS_LIKE:
        return True, None
    start, lines, first = _after_imports(partial, spec)
    if first is None:
        return False, None
    if not _same_class(lines[first], target.containers[-1]):
        return not IMPORT_LINE.match(lines[first]), None  # (an import: more may follow, then the header)
    body = next((i for i in range(first + 1, len(lines)) if lines[i].strip()), None)
    if body is None:
        return False, None
    indent = lines[body][: len(lines[body]) - len(lines[body].lstrip())]
    for line in lines[body:]:
        text = line.strip()
        if not text or text.startswith(("@", "#")):
            continue  # a decorator or a comment: the next line tells
        if own_header(target.simple_name).match(text) or not indent:
            return True, None
        return True, (start + sum(map(len, lines[:body])), indent)
    return False, None


def other_definition_first(
    partial: str, spec: LanguageSpec, target: Definition, existing: set[str]
) -> tuple[bool, tuple[int, str] | None]:
    """Python, a function of the module: where an answer opens with (imports and then) another of the file's
    definitions, where that begins (characters), and no indentation. Asked to add type hints to textwrap's module
    function `wrap`, the coder wrote the file's `class TextWrapper:` first, which is refused (the file's other
    definitions are not the rewrite's to write); it writes the function from its own header on instead
    (`Rewriter._from_own_header`). Returns (settled, place) as `invented_class` does."""
    if spec.name != "python" or target.containers or target.kind in CLASS_LIKE:
        return True, None
    start, lines, first = _after_imports(partial, spec)
    if first is None or IMPORT_LINE.match(lines[first]):
        return False, None  # (an import: more may follow)
    line = next((line for line in lines[first:] if line.strip() and not line.startswith("@")), None)
    if line is None:
        return False, None  # decorators so far: the definition's header tells
    header = DEFINITION_NAME.match(line)
    if header is None or header.group(1) not in existing or header.group(1) == target.simple_name:
        return True, None
    return True, (start + sum(map(len, lines[:first])), "")


def _after_imports(partial: str, spec: LanguageSpec) -> tuple[int, list[str], int | None]:
    """A partial answer's complete lines after the imports it opens with: where they begin (characters), the
    lines, and the first that is not blank (None while none is)."""
    done = partial[: partial.rfind("\n") + 1]
    rest = leading_imports(done, spec)[1]  # (`rest` ends `done`)
    lines = lf_lines(rest)
    return len(done) - len(rest), lines, next((i for i, line in enumerate(lines) if line.strip()), None)


def opened_elsewhere(
    partial: str, spec: LanguageSpec, target: Definition, existing: set[str]
) -> tuple[bool, tuple[int, str] | None]:
    """Where a Python answer that should be started again from the target's own header went astray: a method's,
    inside a class of its own (`invented_class`); a module function's, at another of the file's definitions
    (`other_definition_first`)."""
    if target.containers:
        return invented_class(partial, spec, target)
    return other_definition_first(partial, spec, target, existing)


IMPORT_LINE = re.compile(r"\s*(?:import|from)\s")
DEFINITION_NAME = re.compile(r"(?:async[ \t]+)?(?:def|class)[ \t]+(\w+)")


def own_header(name: str) -> re.Pattern[str]:
    """A Python function's header line, from its start up to its parameters' parenthesis; group 1 ends with the
    name."""
    return re.compile(rf"([ \t]*(?:async[ \t]+)?def[ \t]+{re.escape(name)})[ \t]*\(", re.M)


def indent_lines(text: str, indent: str) -> str:
    return "".join(indent + line if line.strip() else line for line in lf_lines(text))


# Node types of string literals, in every supported grammar: a line that begins inside one (a docstring's, a template
# literal's, a heredoc's, a Java text block's) has the string's own leading whitespace, not indentation.
STRING_NODE = re.compile(r"string|heredoc|nowdoc|text_block")
# And of comments: a block comment's lines are aligned to its opening (` * ` under `/**`), not indented.
STRING_OR_COMMENT = re.compile(STRING_NODE.pattern + "|comment")


def lines_inside_strings(code: str, spec: LanguageSpec, kinds: re.Pattern[str] = STRING_NODE) -> set[int]:
    """The lines (0-based) of `code` that begin inside a string literal (or a node of other `kinds`)."""
    inside: set[int] = set()
    stack = [parse(code.encode("utf-8"), spec).root_node]
    while stack:
        node = stack.pop()
        if node.start_point[0] == node.end_point[0]:
            continue  # within one line: no line begins inside it
        if kinds.search(node.type):  # from its second line on, or its first too where it starts one (a heredoc's)
            row, column = node.start_point
            inside.update(range(row + (column > 0), node.end_point[0] + 1))
        else:
            stack.extend(node.children)
    return inside


# Tokens that open a string able to span lines, as the grammars name them where the string is not closed yet (a
# Python docstring's `string_start`, a template literal's backtick, a Java or Kotlin text block's quotes, a Lua long
# string's brackets, a C++ raw string's `R"`, a heredoc's start, a C# raw string's quotes).
STRING_OPENER = re.compile(
    r'(raw_)?string_start|heredoc_start|heredoc_body|"""|\'\'\'|`|"|\'|@"|\$"|\$@"|@\$"|\[\[|R"|<<<'
)
# The same as text, where a grammar leaves the opener in an error of its own (bash's `'`, C#'s `@"`, Rust's `r#"`).
OPENER_TEXT = re.compile(rb'([rRbBuUfF]{1,2}#*)?("""|\'\'\'|"|\'|`)|@"|\$@?"|@\$"|R"')
NO_BLOCK_COMMENTS = {"bash", "lua", "python", "ruby"}  # where `/*` opens no comment (`case $p in */*)`)
# Nodes whose closer a grammar supplies as missing (Swift's `"""`) or as empty (Ruby's heredoc end).
UNCLOSED = re.compile(r"string|heredoc|comment|text_block")


def open_string_row(code: str, spec: LanguageSpec) -> int | None:
    """The line (0-based) where a string or block comment that `code` leaves open begins, if any, before its last
    line: the lines after it may be the string's own text, which the parse of a partial answer cannot tell (it
    reads them as code in an error). The grammars show it in several ways, each of them taken:
    - an opener in an error, not placed in a string of its own (`string_start`, a backtick, `<<<`);
    - an error whose text starts with an opener that none of its parts holds (bash's `'`, C#'s `@"`, Rust's `r#"`);
    - a string or heredoc whose closer is missing (Swift's `\"\"\"`), or a regex that starts with `/*` (JSDoc's
      `/**` read as one);
    - a `/*` read as something other than a comment (a `/` and a `*`, Swift's operator), or left out of the parse
      (Kotlin);
    - Ruby's `=begin` at the start of a line, with no `=end` after it."""
    data = code.encode("utf-8")
    tree = parse(data, spec)
    block_comments = spec.name not in NO_BLOCK_COMMENTS
    rows = [row for error in error_nodes(tree) for row in _openers_in_error(error, data, block_comments)]
    stack = [tree.root_node]  # what reaches the end of the code: a heredoc whose end is not written yet
    while stack:
        node = stack.pop()
        reaching = [c for c in node.children if c.end_byte == len(data)]
        stack.extend(reaching)
        rows += [
            node.start_point[0]
            for c in reaching
            if (c.start_byte == c.end_byte and UNCLOSED.search(node.type))
            or (c.type == "heredoc_end" and c.start_point[0] < c.end_point[0])  # bash's: the rest, as its end
        ]
    tail = _last_leaf_end(tree.root_node)
    if block_comments and data[tail:].lstrip().startswith(b"/*"):
        rows.append(data[: tail + data[tail:].index(b"/*")].count(b"\n"))
    if spec.name == "ruby":
        rows += [code.count("\n", 0, m.start()) for m in re.finditer(r"^=begin\b", code, re.M)
                 if not re.search(r"^=end\b", code[m.end() :], re.M)]  # fmt: skip
    last = code.count("\n") - (1 if code.endswith("\n") else 0)
    return min((r for r in rows if r < last), default=None)


SYMMETRIC = {'"', "'", "`", '"""', "'''"}  # delimiters that close a string as they open it


def _openers_in_error(error, data: bytes, block_comments: bool) -> list[int]:
    """The rows of open strings or block comments that one error or missing node of a parse shows (see
    open_string_row)."""
    rows = []
    if error.is_missing:
        owner = error.parent
        if owner is not None and UNCLOSED.search(owner.type):
            rows.append(owner.start_point[0])
        if owner is None or owner.type != "regex":
            return rows
        error = owner  # `/**` read as a regex: its `/` is the comment's
    quotes: dict[tuple[int, str], list] = {}  # per error and symmetric delimiter: those it holds
    stack = [error]
    while stack:
        node = stack.pop()
        stack.extend(node.children)
        if node.type == "ERROR" and not node.is_missing:
            text = data[node.start_byte : node.end_byte]
            covered = node.children and node.children[0].start_byte == node.start_byte
            if not covered and (OPENER_TEXT.match(text) or (block_comments and text.startswith(b"/*"))):
                rows.append(node.start_point[0])
        elif node.child_count == 0:
            parent = node.parent
            if parent is not None and parent.type == "ERROR" and STRING_OPENER.fullmatch(node.type):
                if node.type in SYMMETRIC:
                    quotes.setdefault((parent.id, node.type), []).append(node)
                else:
                    rows.append(node.start_point[0])
            elif block_comments and data[node.start_byte : node.start_byte + 2] == b"/*":
                if not STRING_OR_COMMENT.search(node.type + " " + (parent.type if parent is not None else "")):
                    rows.append(node.start_point[0])
    # Of a delimiter's leaves in one error, an odd one out opens a string (bash's `...` closed on its line does not).
    rows += [max(leaves, key=lambda n: n.start_byte).start_point[0] for leaves in quotes.values() if len(leaves) % 2]
    return rows


def _last_leaf_end(node) -> int:
    """Where the parse's last token of any width ends: text after it, a grammar read as nothing."""
    while node.child_count:
        sized = [c for c in node.children if c.end_byte > c.start_byte]
        if not sized:
            break
        node = sized[-1]
    return node.end_byte if node.child_count == 0 else node.start_byte


def _leaves(node):
    stack = [node]
    while stack:
        node = stack.pop()
        if node.child_count == 0:
            yield node
        else:
            stack.extend(node.children)


def restore_header_indent(shown: str, code: str, spec: LanguageSpec) -> str:
    """The answer indented as the code the model was shown, where the model wrote it from column 0 instead.

    The code shown is the region less its lines' common indentation, and the answer gets that back, so a
    definition's header usually shows at column 0. Not when the region's lines share less than the header's
    indentation: a region that mixes spaces and tabs (a member's header in two spaces, its body in tabs), or one
    with a string's lines further left. The header then shows indented, and an answer the model wrote from column
    0 landed there in the file, a method at the class's column. Such an answer gets the shown header's indentation
    on every line that does not begin inside a string (there the whitespace is the string's own; a Python
    docstring's is prose, and follows the code), when that indentation and the answer's are all spaces or all
    tabs."""
    header = next((line for line in shown.split("\n") if line.strip()), "")
    first = next((line for line in code.split("\n") if line.strip()), "")
    want = _leading(header)
    if not want or not first or first[0] in " \t":
        return code
    inside = lines_inside_strings(code, spec) - docstring_rows(code, spec)
    lines = lf_lines(code)
    shifted = [i for i, line in enumerate(lines) if line.strip() and i not in inside]
    if len(set(want + "".join(_leading(lines[i]) for i in shifted))) > 1:
        return code  # tabs and spaces: a prefix of either moves the other's tab stops, and a block could change
    return "".join(want + line if i in shifted else line for i, line in enumerate(lines))


INDENT_UNITS = (2, 4, 8)  # spaces per level an answer may indent by, for follow_tabs


def follow_tabs(shown: str, code: str, spec: LanguageSpec) -> str:
    """The answer's indentation in tabs where the code shown is indented with tabs and the answer with spaces.

    A model trained on Python writes four spaces a level whatever it is shown (`\tdef f():` came back with its
    body in `\t    `), so the file's tab lines and the answer's space lines ended up side by side. Each line's
    spaces become a tab per level of the answer's unit (the fewest spaces any line of code is indented by: 2, 4
    or 8); spaces past a whole level stay, as alignment. Every line scales alike, so the blocks nest as they did.
    Lines that begin inside a string keep their whitespace (a string's is its data), but for a Python docstring's
    and a block comment's in spaces alone and not copied as they are from the code shown (a file may align its
    comments in spaces): those follow the code (until the forty-fourth session a docstring the
    coder wrote came out as `\t\t\"\"\"` over `\t    Args:`, its text left of its quotes where a tab is 8
    columns wide, and a block comment's ` * ` lines stayed in spaces under their tabbed `/**`). Every line keeps
    its whitespace unless the code shown is indented in tabs alone (a file that indents by a tab and then spaces,
    `\t    `, keeps its way) and the answer in spaces alone: where it copied some lines with their tabs and wrote
    others in spaces, which spaces match which tabs is a guess that, wrong, would nest a Python line in another
    block."""
    skip = lines_inside_strings(shown, spec, STRING_OR_COMMENT)
    shown_indents = [_leading(line) for i, line in enumerate(shown.split("\n")) if line.strip() and i not in skip]
    if not any(shown_indents) or any(ws.strip("\t") for ws in shown_indents):  # none, or some not in tabs alone
        return code
    inside = lines_inside_strings(code, spec, STRING_OR_COMMENT)
    prose = (inside - lines_inside_strings(code, spec)) | docstring_rows(code, spec)  # comments', docstrings'
    lines = lf_lines(code)
    indents = {i: _leading(line) for i, line in enumerate(lines) if line.strip() and i not in inside}
    if any("\t" in ws for ws in indents.values()):
        return code  # some lines in tabs, some in spaces: how many spaces make the model's level is a guess
    unit = min((len(ws) for ws in indents.values() if ws), default=0)
    if unit not in INDENT_UNITS:
        return code
    copied = set(shown.split("\n"))  # a comment's line the file has in spaces, copied as it is, stays so
    indents |= {
        i: ws
        for i in prose
        if i < len(lines) and lines[i].strip() and "\t" not in (ws := _leading(lines[i]))
        if lines[i].rstrip("\n") not in copied
    }
    for i, ws in indents.items():
        lines[i] = "\t" * (len(ws) // unit) + " " * (len(ws) % unit) + lines[i][len(ws) :]
    return "".join(lines)


def docstring_rows(code: str, spec: LanguageSpec) -> set[int]:
    """Python: the lines (0-based) that begin inside a docstring (a string alone as the first statement of the
    module, a class or a function), which is prose that tools read with its common indentation taken off. Empty in
    other languages."""
    if spec.name != "python":
        return set()
    rows: set[int] = set()
    stack = [parse(code.encode("utf-8"), spec).root_node]
    while stack:
        node = stack.pop()
        if node.type == "expression_statement":
            parent = node.parent
            first = next((c for c in parent.named_children if c.type != "comment"), None) if parent else None
            owner = parent.type == "module" or (
                parent.type == "block" and parent.parent is not None and parent.parent.type in DOCSTRING_OWNERS
            )
            if (
                owner
                and first is not None
                and first.start_byte == node.start_byte
                and node.named_child_count == 1
                and node.named_children[0].type == "string"
            ):
                string = node.named_children[0]
                rows.update(range(string.start_point[0] + 1, string.end_point[0] + 1))
            continue
        stack.extend(node.children)
    return rows


DOCSTRING_OWNERS = ("function_definition", "class_definition")


def _leading(line: str) -> str:
    return line[: len(line) - len(line.lstrip(" \t"))]


def indented_as_shown(shown: str, code: str, spec: LanguageSpec) -> str:
    """The answer's indentation made the code shown's where the model wrote its own (restore_header_indent, then
    follow_tabs): what the rewrite puts in the file, and what the language server streams."""
    return follow_tabs(shown, restore_header_indent(shown, code, spec), spec)


@dataclass
class Piece:
    """A stretch of generated text and where it came from: "copied" (prompt lookup, accepted),
    "drafted" (draft model, accepted) or "target" (the target model's own token)."""

    text: str
    origin: str


@dataclass
class RewriteResult:
    source: SourceFile
    language: str
    target: Definition
    instruction: str
    old_region: str
    new_region: str
    new_text: str
    edits: list[TextEdit]
    errors: list[tuple[int, int]]  # syntax errors the rewrite introduced (line, column)
    stats: Stats
    pieces: list[Piece] = field(default_factory=list)
    context_lines: int = 0
    extra_definitions: list[str] = field(default_factory=list)  # refused definitions beside the one asked for
    helpers: list[str] = field(default_factory=list)  # new definitions written beside it (accepted)
    left_out: list[str] = field(default_factory=list)  # the file's other definitions the model went on to copy
    dropped: list[str] = field(default_factory=list)  # definitions that shared the target's lines, left out
    dropped_code: str = ""  # code that shared its first or last line, which the answer did not keep as it was
    compile_error: str = ""  # Python: why the new file does not compile where the old one did ("line 6: ...")
    redeclared: dict[str, int] = field(default_factory=dict)  # JS, TS: names the new file declares twice: their line
    imports: list[str] = field(default_factory=list)  # import statements the answer added to the file's imports
    imports_at: tuple[int, str] = (0, "")  # where they went: a byte offset of the old text, and the text inserted
    missing_imports: list[str] = field(default_factory=list)  # Python: names they import that the module lacks
    imports_left_out: list[str] = field(default_factory=list)  # Python: and the file binds itself: not imported
    unchanged: bool = False  # the answer is the code written back as it was (imports aside)
    defines_nothing: bool = False  # the code held a definition and the answer holds none (it would delete it)
    undefined_names: list[str] = field(default_factory=list)  # Python: names it reads that nothing defines
    early_names: list[str] = field(default_factory=list)  # Python: names its signatures read before they are bound
    bad_calls: list[str] = field(default_factory=list)  # Python: calls of the file's own functions they cannot take
    parameter_changes: list[str] = field(default_factory=list)  # Python: how its callers' calls stop fitting
    async_change: str = ""  # Python, JS, TS: "async" when the rewrite made the function async, "sync" the other way
    async_calls: list[int] = field(default_factory=list)  # then the lines of the new file whose calls no longer fit
    loose_code: list[str] = field(default_factory=list)  # Python: statements the answer put beside the function
    generator_change: str = ""  # Python: "generator" when the rewrite made the function one, "ordinary" the other way
    generator_uses: list[int] = field(default_factory=list)  # then the lines of the new file whose uses no longer fit
    property_change: str = ""  # Python: "property" when the rewrite made the method one, "method" the other way
    property_uses: list[int] = field(default_factory=list)  # then the lines of the new file whose uses no longer fit
    unhoisted: str = ""  # JS, TS: "const", "let", "var" or "class" when the rewrite made a function declaration so
    early_uses: list[int] = field(default_factory=list)  # then the lines of the new file that use it before it runs
    arrow_misuses: list[str] = field(default_factory=list)  # JS, TS: what fails now that it is an arrow function
    renamed_to: str = ""  # the definition's new name, where the answer renamed it
    renamed_uses: list[int] = field(default_factory=list)  # then the lines of the new file that use the old name
    second_look: dict = field(default_factory=dict)  # set when the answer comes from a second look (a fork)
    trace: dict = field(default_factory=dict)  # per token and per round: see editspec.trace

    def problem(self) -> str | None:
        """Why this rewrite should not be written without --force, or None."""
        if self.stats.stop_reason == "max_tokens":
            return (
                f"the answer was cut off after {self.stats.generated_tokens} tokens, before the model finished "
                "(the model may be repeating itself; --max-tokens allows a longer answer)"
            )
        if self.defines_nothing:
            return (
                f"the answer holds no definition: written, it would take {self.target.name} out of the file "
                "(it may have been cut short)"
            )
        if self.dropped:
            names = ", ".join(self.dropped[:4])
            return (
                f"the answer leaves out {names}, which shares a line with {self.target.name}: a rewrite replaces "
                f"whole lines, so written, it would delete {names}"
            )
        if self.dropped_code:
            return (
                f"the answer does not keep `{self.dropped_code}`, which shares a line with {self.target.name}: a "
                "rewrite replaces whole lines, so written, it would delete or change code outside "
                f"{self.target.name}"
            )
        if self.extra_definitions:
            also = ", ".join(self.extra_definitions[:4])
            stopped = " (generation stopped there)" if self.stats.stop_reason == EXTRA_STOP else ""
            return (
                f"the model wrote more than {self.target.name}: also {also} (defined in the file already, or "
                f"twice){stopped}"
            )
        if self.errors:
            line, col = self.errors[0]
            return f"the rewritten file does not parse (line {line}, column {col})"
        if self.compile_error:
            return f"the rewritten file does not compile in Python where the old one did ({self.compile_error})"
        if self.redeclared:
            name, line = next(iter(self.redeclared.items()))
            return (
                f"the rewritten file declares `{name}` twice in one scope (again at line {line}): JavaScript will not "
                f"load it (SyntaxError: Identifier '{name}' has already been declared)"
            )
        return None

    def undefined_note(self) -> str | None:
        """What to tell the user of names the rewrite reads that the file does not define: NameError when it runs
        (written all the same: the check cannot see what a name stands for at run time)."""
        if not self.undefined_names:
            return None
        listed = ", ".join(f"`{n}`" for n in self.undefined_names[:6])
        return (
            f"the new {self.target.name} uses {listed}, which the file does not define or import (nor does Python): "
            "check it before running it"
        )

    def early_note(self) -> str | None:
        """What to tell the user of names the new signatures read (annotations, defaults, decorators) that the file
        binds only later: NameError when the file is imported (written all the same, as names nothing defines)."""
        if not self.early_names:
            return None
        listed = ", ".join(f"`{n}`" for n in self.early_names[:6])
        return (
            f"the new {self.target.name}'s signature reads {listed} when the `def` runs, before the file defines it "
            "(a class's name is defined once its whole body has run): NameError on import. Quote the annotation "
            '("Name") or add `from __future__ import annotations`'
        )

    def calls_note(self) -> str | None:
        """What to tell the user of calls in the new file that the called function's signature cannot take:
        TypeError when they run (written all the same: a caller elsewhere may be next to rewrite)."""
        if not self.bad_calls:
            return None
        listed = _some(self.bad_calls, 4)
        return (
            f"after this rewrite of {self.target.name}, the file calls its own functions with arguments they do not "
            f"take ({listed}): check the calls before running it"
        )

    def parameters_note(self) -> str | None:
        """What to tell the user of a rewrite that changed its function's parameters: its callers, in this file or
        others, may no longer fit (the model often renames parameters when asked to rename variables)."""
        if not self.parameter_changes:
            return None
        kinds = {change.split()[0] for change in self.parameter_changes}
        calls = [
            why
            for kind, why in (
                ("renames", "pass a renamed one by its old name"),
                ("drops", "pass a dropped one"),
                ("adds", "do not pass a new required one"),
                ("reorders", "pass them in the old order"),
            )
            if kind in kinds
        ]
        return (
            f"the new {self.target.name} {', '.join(self.parameter_changes)}: calls to it that {' or '.join(calls)} "
            "no longer fit; check its callers, here and in other files"
        )

    def async_note(self) -> str | None:
        """What to tell the user of a rewrite that made its function `async def`, or made it an ordinary one: the
        calls to it that do not change with it stop working, silently for the first (asked to make `total` async,
        the coder did, and the file's `print(total(items))` then printed a coroutine)."""
        if not self.async_change:
            return None
        here = f"this file does at {_line_list(self.async_calls)}" if self.async_calls else "this file does nowhere"
        python = self.language == "python"
        keyword = "async def" if python else "async"
        if self.async_change == "async":
            gets = (
                "a coroutine, not its result, and the function does not run" if python else "a Promise, not its result"
            )
            return (
                f"the new {self.target.name} is `{keyword}`, and was not: a call that does not await it gets {gets} "
                f"({here}); await its calls, here and in other files, or ask again without making it async"
            )
        fails = "a call that awaits it, or hands it to asyncio, fails" if python else "`.then()` on its result fails"
        return (
            f"the new {self.target.name} is no longer `{keyword}`: {fails} when it runs ({here}); change its calls, "
            "here and in other files"
        )

    def generator_note(self) -> str | None:
        """What to tell the user of a rewrite that made its function a generator, or a generator an ordinary
        function: the calls whose value does not change with it stop working, silently for some (asked to "Make it
        a generator", the coder did, and the file's `found = evens(xs)` then `if not found:` never held and
        `len(found)` raised TypeError)."""
        if not self.generator_change:
            return None
        if self.generator_change == "generator":
            here = (
                f"this file uses one so at {_line_list(self.generator_uses)}"
                if self.generator_uses
                else "this file uses none so"
            )
            return (
                f"the new {self.target.name} is a generator, and was not: its calls get a generator, not a list, "
                f"which has no len(), cannot be indexed, is always true, is used up by one loop and runs nothing "
                f"until iterated ({here}); wrap such calls in list(), here and in other files, or ask again without "
                "making it a generator"
            )
        here = (
            f"this file does at {_line_list(self.generator_uses)}" if self.generator_uses else "this file does nowhere"
        )
        return (
            f"the new {self.target.name} is no longer a generator: next() or .send() on its result fails ({here}); "
            "change its calls, here and in other files"
        )

    def property_note(self) -> str | None:
        """What to tell the user of a rewrite that made its method a property, or a property a method: the uses that
        do not change with it stop working (asked to "Make it a property", the coder put `@property` above
        `def area(self)`, and the file's `self.area()` then raised TypeError: 'float' object is not callable)."""
        if not self.property_change:
            return None
        name = self.target.simple_name
        here = f"this file does at {_line_list(self.property_uses)}" if self.property_uses else "this file does nowhere"
        if self.property_change == "property":
            return (
                f"the new {self.target.name} is a property, and was a method: `.{name}()` now calls the value it "
                f"returns, and fails unless that is callable ({here}); drop the parentheses, here and in other files"
            )
        return (
            f"the new {self.target.name} is a method, and was a property: `.{name}` without a call now gets the "
            f"method, not its value, and nothing says so ({here}); call it, here and in other files"
        )

    def loose_note(self) -> str | None:
        """What to tell the user of statements the answer put beside the function at its level, neither a definition
        nor an import: they run when the module is loaded (or the class defined), not when the function is called
        (asked to add logging, the coder wrote `logging.basicConfig(level=logging.WARNING)` above the function,
        which sets up the logging of every program that imports the module)."""
        if not self.loose_code:
            return None
        when = "the class is defined" if self.target.containers else "the module is loaded"
        listed = _some(self.loose_code, 3)
        return (
            f"the rewrite adds code beside {self.target.name} that runs when {when}, not when "
            f"{self.target.simple_name} is called ({listed}): check that it belongs there"
        )

    def hoisting_note(self) -> str | None:
        """What to tell the user of a rewrite that made a function declaration a `const` (an arrow function, most
        often): a declaration is hoisted, so the file could use it above its definition; a `const` is not, and
        such a use now throws when the file runs (asked to convert `formatTotal` to an arrow function, the coder
        did, and the file's `console.log(formatTotal(rows))` above it then threw ReferenceError)."""
        if not self.early_uses:
            return None
        name = self.target.simple_name
        fails = (
            f"gets `undefined` (a call throws TypeError: {name} is not a function)"
            if self.unhoisted == "var"
            else f"throws ReferenceError (Cannot access '{name}' before initialization)"
        )
        return (
            f"the new {self.target.name} is a `{self.unhoisted}`, and was a function declaration, which is hoisted: "
            f"this file uses it before its definition runs (at {_line_list(self.early_uses)}), and such a use now "
            f"{fails}; keep it a `function` declaration, or define it above its first use"
        )

    def arrow_note(self) -> str | None:
        """What to tell the user of a rewrite that made an ordinary function an arrow function, where the file
        calls it with `new` or its body reads `this` or `arguments`: an arrow function is not a constructor, and
        takes both from where it is defined, not from its call."""
        if not self.arrow_misuses:
            return None
        return (
            f"the new {self.target.name} is an arrow function, and was not: an arrow function is not a constructor "
            f"(`new` throws TypeError) and takes `this` and `arguments` from where it is defined, not from its call "
            f"({_some(self.arrow_misuses, 4)}); keep it a `function`, or change those lines"
        )

    def missing_import_note(self) -> str | None:
        """What to tell the user of an import the rewrite added that names what its (standard) module does not
        have (asked to add type hints to fnmatch, the coder wrote `from os import normcase`): ImportError when
        the file is imported (written all the same: the project may run another Python, which has it)."""
        if not self.missing_imports:
            return None
        version = f"{sys.version_info.major}.{sys.version_info.minor}"
        return (
            f"the rewrite imports {_some(self.missing_imports, 4)}, which Python {version}'s module does not have: "
            "ImportError when the file is imported; import each from where it is defined"
        )

    def wildcard_note(self) -> str | None:
        """What to tell the user of an import the rewrite added that binds every public name of a module (Python's
        `from typing import *`, which the coder wrote once in a batch adding type hints): it can hide a name the file
        imports or defines above it, and keeps the names check from seeing what the new code reads."""
        star = [i for i in self.imports if WILDCARD_IMPORT.match(i)]
        if not star:
            return None
        return (
            f"the rewrite adds `{star[0]}` to the file's imports: it binds every public name of that module, and can "
            "hide a name the file imports or defines above it; import the names the code uses instead"
        )

    def rename_note(self) -> str | None:
        """What to tell the user of a rewrite that renamed the definition: every use of the old name breaks (the
        model renames functions it was asked to change, and editspec rewrites the definition, not its callers)."""
        if not self.renamed_to:
            return None
        old = self.target.simple_name
        here = (
            f"in this file at {_line_list(self.renamed_uses)} and in any other file that uses it"
            if self.renamed_uses
            else "in any other file that uses it (this file has none)"
        )
        return (
            f"the rewrite renames {old} to {self.renamed_to}: every use of {old} now names nothing, {here}; rename "
            "them too, or ask again without renaming it"
        )

    def warnings(self) -> list[str]:
        """The notes on code that parses but will fail when it runs (names nothing defines, calls that do not
        fit, a new name, parameters its callers may rely on), as the CLI, batch mode and the language server show
        them."""
        notes = (
            self.undefined_note(),
            self.early_note(),
            self.calls_note(),
            self.rename_note(),
            self.parameters_note(),
            self.async_note(),
            self.generator_note(),
            self.property_note(),
            self.loose_note(),
            self.hoisting_note(),
            self.arrow_note(),
            self.missing_import_note(),
            self.wildcard_note(),
        )
        return [note for note in notes if note]

    def unchanged_note(self) -> str | None:
        """What to tell the user of an answer that is the code as it was, even after any second look."""
        if self.unchanged and not self.second_look and self.problem() is None:
            return f"the model wrote {self.target.name} back unchanged; say more precisely what to change"
        return None

    def second_look_note(self, keep_first: str) -> str | None:
        """What to tell the user of an answer that comes from a second look: the model's first answer was the code
        as it was, which is right when the code already does what was asked (the second look then changes it
        anyway: on 35 CanItEdit reference solutions given their own instruction, 10 changes broke the code).
        `keep_first`: how this front end keeps the first answer."""
        if not self.second_look:
            return None
        return (
            f"the model first wrote {self.target.name} back unchanged; this is its likeliest answer that changes it "
            f"(a second look, from line {self.second_look['forked_at_line']} of its first answer on). If the code "
            f"already did what you asked, keep it as it was: {keep_first}"
        )

    @property
    def changed(self) -> bool:
        return self.new_text != self.source.text

    def diff(self) -> str:
        return self.source.diff(self.new_text)

    def to_json(self) -> dict:
        t = self.target
        return {
            "file": str(self.source.path) if self.source.path else None,
            "language": self.language,
            "target": {"name": t.name, "kind": t.kind, "start_line": t.line, "end_line": t.end_line},
            "instruction": self.instruction,
            "changed": self.changed,
            "diff": self.diff(),
            "new_region": self.new_region,
            "edits": [{"start": e.start, "end": e.end, "new_text": e.new_text} for e in self.edits],
            "syntax_errors": [{"line": line, "column": col} for line, col in self.errors],
            "extra_definitions": self.extra_definitions,
            "helpers": self.helpers,
            "left_out": self.left_out,
            "dropped": self.dropped,
            "dropped_code": self.dropped_code,
            "compile_error": self.compile_error,
            "redeclared": self.redeclared,
            "undefined_names": self.undefined_names,
            "early_names": self.early_names,
            "bad_calls": self.bad_calls,
            "parameter_changes": self.parameter_changes,
            "async_change": self.async_change,
            "async_calls": self.async_calls,
            "generator_change": self.generator_change,
            "generator_uses": self.generator_uses,
            "property_change": self.property_change,
            "property_uses": self.property_uses,
            "loose_code": self.loose_code,
            "unhoisted": self.unhoisted,
            "early_uses": self.early_uses,
            "arrow_misuses": self.arrow_misuses,
            "renamed_to": self.renamed_to or None,
            "renamed_uses": self.renamed_uses,
            "imports": self.imports,
            "missing_imports": self.missing_imports,
            "imports_left_out": self.imports_left_out,
            "warnings": self.warnings(),
            "unchanged": self.unchanged,
            "second_look": self.second_look or None,
            "problem": self.problem(),
            "context_lines": self.context_lines,
            "stats": self.stats.summary(),
            "rounds": [
                {
                    "drafted": len(r.drafted),
                    "accepted": r.accepted,
                    "origin": r.origin,
                    "copied_from": r.copied_from,
                    "seconds": round(r.seconds, 5),
                    "opening": r.opening,
                }
                for r in self.stats.rounds
            ],
            "pieces": [{"text": p.text, "origin": p.origin} for p in self.pieces],
            "trace": self.trace,
        }


@dataclass
class Progress:
    """How a running rewrite is doing: the code so far (as generated, dedented) and running counts."""

    text: str
    tokens: int
    drafted: int
    accepted: int
    passes: int


# Called after every round; returning True cancels the rewrite.
ProgressCallback = Callable[[Progress], bool | None]


EXTRA_STOP = "extra_definition"  # stop reason: the model went on to another definition; the result is refused


class Rewriter:
    def __init__(
        self, decoder: Decoder, context_tokens: int = 256, finish_refused: bool = False, second_look: bool = True
    ):
        """`finish_refused`: let the model finish an answer that will be refused (`--force` shows it whole);
        otherwise generation stops as soon as the refusal is certain. `second_look`: an answer that is the code
        unchanged gets a second look (`_look_again`)."""
        self.decoder = decoder
        self.backend = decoder.backend
        self.context_tokens = context_tokens
        self.finish_refused = finish_refused
        self.second_look = second_look

    def _context(
        self, source: bytes, spec: LanguageSpec, target: Definition, defs: list[Definition], tree
    ) -> list[str]:
        """The file context that fits the token budget, most important lines first: the rest of the file, so
        the target and the definitions inside it are left out (the code to edit shows them whole). The lines
        keep the file's order, so the next definition of a file re-reads the context from the first of the
        two targets on."""
        defs = [d for d in defs if not (target.start <= d.node_start and d.node_end <= target.end)]
        kept, used = [], 0
        for line in file_context(source, spec, defs, tree):
            cost = len(self.backend.tokenize(line)) + 1
            if used + cost > self.context_tokens:
                break
            kept.append(line)
            used += cost
        return kept

    def prompt_tokens(
        self,
        source: SourceFile,
        spec: LanguageSpec,
        target: Definition,
        instruction: str,
        tree=None,
        defs: list[Definition] | None = None,
    ) -> tuple[list[int], str, str, int]:
        """(prompt tokens, the region's text, its common indentation, context lines used). `tree` and `defs`: the
        file's parse and definitions, when the caller has them."""
        if not instruction.strip():
            raise RewriteError("the instruction is empty: say what to change")
        data = source.text.encode("utf-8")
        tree = tree or parse(data, spec)
        region = data[target.start : target.end].decode("utf-8")
        indent = common_indent(region.split("\n"))
        defs = definitions(data, spec, tree) if defs is None else defs
        context = self._context(data, spec, target, defs, tree)
        scope = target.containers[-1] if target.containers else ""
        prompt = prompts.edit_prompt_tokens(
            self.backend,
            dedent(region, indent),
            instruction,
            spec.fence or spec.name,
            "\n".join(context),
            scope,
            target.simple_name,
            fence=prompts.fence_for(region),
            shares_lines=bool(sharing_lines(defs, target, data)) or any(outside_code(tree, target, data)),
        )
        return prompt, region, indent, len(context)

    def shared_prefix(self, source: SourceFile, spec: LanguageSpec, target: Definition) -> list[int]:
        """The prompt tokens that every instruction for this definition shares: what can be read while the user
        is still typing the instruction."""
        a = self.prompt_tokens(source, spec, target, "a")[0]
        b = self.prompt_tokens(source, spec, target, "b")[0]
        return a[: common_prefix(a, b, len(a))]

    def read_ahead(self, source: SourceFile, spec: LanguageSpec, target: Definition) -> int:
        """Read the shared prefix now, so that the rewrite reads only the instruction; return how many tokens
        were read (0 when they were already kept)."""
        tokens = self.shared_prefix(source, spec, target)
        if len(tokens) < 2:
            return 0
        self.backend.prefill(tokens)
        return len(tokens) - self.backend.last_reused

    def rewrite(
        self,
        source: SourceFile,
        spec: LanguageSpec,
        target: Definition,
        instruction: str,
        on_progress: ProgressCallback | None = None,
    ) -> RewriteResult:
        data = source.text.encode("utf-8")
        lone = LONE_CR.search(data, target.node_start, target.node_end)  # before it on its line: outside code
        if lone:
            line = data.count(b"\n", 0, lone.start()) + 1
            raise RewriteError(
                f"{target.name} breaks lines with a lone carriage return (CR, in line {line}), as classic Mac OS did: "
                "editspec reads LF or CRLF line ends only, and would not see where those lines (or the definitions "
                "on them) begin and end; convert them first (e.g. tr '\\r' '\\n')"
            )
        tree = parse(data, spec)
        defs = definitions(data, spec, tree)
        prompt, region, indent, n_context = self.prompt_tokens(source, spec, target, instruction, tree, defs)
        job = _Job(
            source=source,
            spec=spec,
            target=target,
            instruction=instruction,
            data=data,
            tree=tree,
            old_errors=error_offsets(tree),
            fence=prompts.fence_for(region),
            prompt=prompt,
            region=region,
            indent=indent,
            n_context=n_context,
            opens_with_imports=bool(leading_imports(region, spec)[0]),
            existing={
                d.simple_name
                for d in defs
                if (d.start, d.end) != (target.start, target.end) or (part_of(d, target) and d.name != target.name)
            },
            sharing={d.name: sum(o.name == d.name for o in defs) for d in sharing_lines(defs, target, data)},
            outside=outside_code(tree, target, data),
            on_progress=on_progress,
        )
        code_tokens = len(self.backend.tokenize(region))
        budget = answer_budget(code_tokens, self.decoder.options.max_tokens)
        room = self.backend.n_ctx - len(prompt) - self.decoder.options.max_draft - 2
        if room < min(budget, code_tokens + 64):  # not even room to write the function back
            raise RewriteError(
                f"{target.name} is too long for the model's context: its prompt is {len(prompt)} tokens and the "
                f"answer needs room too, but the context holds {self.backend.n_ctx}; rewrite a smaller part"
            )
        answer = _Answer(self, job)
        generation = self.decoder.decode(
            prompt,
            stop=prompts.FenceStop(self.backend, job.fence),
            on_tokens=answer,
            max_tokens=budget,
            opening_draft=prompts.opening_length(self.backend, region),
            scores=self.second_look,
        )
        if answer.restart_at is not None:
            answer, generation, result = self._from_own_header(job, answer, generation, budget)
        else:
            result = self._result(job, answer, generation.stats)
        if self.second_look and result.unchanged and result.problem() is None:
            result = self._look_again(job, answer, generation, budget) or result
        return result

    def _result(self, job: _Job, answer: _Answer, stats: Stats) -> RewriteResult:
        """The rewrite that an answer makes: the new file, its edits, and what the checks say of it."""
        if answer.refused:
            stats.stop_reason = EXTRA_STOP
        elif stats.stop_reason == "cancelled":
            raise RewriteCancelled("the rewrite was cancelled")
        code = prompts.code_before_fence(self.backend.detokenize(answer.tokens), job.fence)
        if not code.strip():
            raise RewriteError("the model returned no code; try another instruction or a larger model")
        spec, target, existing = job.spec, job.target, job.existing
        # Imports the answer opens with go where the file's imports are, not above the function (inside a class,
        # a method's body would not even see them); those the file has already are left out. Not when the code
        # shown opens with imports itself (then they are the region's own, answered in place).
        imports, code = leading_imports(code, spec) if not job.opens_with_imports else ([], code)
        code = unwrap_enclosing_class(code, target.containers)
        code, left_out = cut_copies(code, spec, target, existing)
        extra, helpers = _judged(code, spec, target, existing)
        if helpers:
            code = spaced_as_file(code, spec, file_gap(job.source.text, target.line, target.end_line))
        shown = dedent(job.region, job.indent)
        code = indented_as_shown(shown, code, spec)
        new_region = indent_lines(code.rstrip("\n") + "\n", job.indent)
        if not job.region.endswith("\n"):
            new_region = new_region.rstrip("\n")
        start_char = len(job.data[: target.start].decode("utf-8"))
        end_char = start_char + len(job.region)
        new_text = job.source.text[:start_char] + new_region + job.source.text[end_char:]
        new_data = new_text.encode("utf-8")
        new_tree = reparse_after_replace(job.tree, job.data, target.start, target.end, new_data, spec)
        new_end = target.start + len(new_region.encode("utf-8"))
        errors = introduced_errors(job.old_errors, new_tree, target.end, new_end)
        if job.sharing and not errors:
            kept = [d.name for d in definitions(new_data, spec, new_tree)]
            dropped = [name for name, count in job.sharing.items() if kept.count(name) < count]
            helpers = [h for h in helpers if h not in {name.rsplit(".", 1)[-1] for name in job.sharing}]
        else:
            dropped = []
        dropped_code = "" if errors else _outside_lost(job, new_tree, new_data, new_end)
        renamed = "" if errors else renamed_to(code, spec, target, existing)
        uses = name_uses(target.simple_name, new_data, new_tree, (target.start, new_end)) if renamed else []
        edits = text_edits(job.region, new_region, start_char)
        imports_left_out: list[str] = []
        if spec.name == "python" and imports and not errors:
            imports = names.explicit_stars(imports, new_text, self._region_lines(job, new_region, start_char, "")[1])
            imports, imports_left_out = names.without_own_names(imports, new_text)
        imports = new_imports(imports, file_imports(job.tree, spec, outside=(target.start, target.end)), spec)
        if imports:
            at, block = import_insertion(job.data, job.tree, spec, target.start, imports)
            at = len(job.data[: min(at, target.start)].decode("utf-8"))
            new_text = new_text[:at] + block + new_text[at:]
            edits = [TextEdit(at, at, block), *edits]
            imports_at = (len(new_text[:at].encode("utf-8")), block)
            uses = [(at_byte, line + block.count("\n") * (at_byte >= imports_at[0])) for at_byte, line in uses]
        else:
            imports_at = (0, "")
        compile_error = pysource.compile_error(new_text) if spec.name == "python" and not errors else None
        if compile_error and pysource.compile_error(job.source.text):
            compile_error = None  # the old file did not compile either (Python 2, newer syntax): not the rewrite's
        redeclared = {}
        if spec.name in hoisting.LANGUAGES and not errors:
            before = hoisting.redeclarations(job.source.text, spec)
            redeclared = {n: line for n, line in hoisting.redeclarations(new_text, spec).items() if n not in before}
        lines = self._region_lines(job, new_region, start_char, imports_at[1]) if not errors else None
        python = spec.name == "python" and lines is not None
        undefined, early = names.brought_in(job.source.text, lines[0], new_text, lines[1]) if python else ([], [])
        bad_calls = (
            [m.text() for m in calls.calls_brought_in(job.source.text, new_text)]
            if spec.name == "python" and not errors
            else []
        )
        function = spec.name == "python" and not errors and target.kind not in CLASS_LIKE
        method = bool(target.containers)
        names_in = (target.simple_name, renamed or target.simple_name)  # an answer's helper may come first
        parameter_changes = (
            calls.parameter_changes(job.region, new_region, in_class=bool(target.containers), names=names_in)
            if function
            else []
        )
        async_change, async_calls = (
            self._async_change(job, new_region, new_text, names_in, lines[1]) if lines else ("", [])
        )
        generator_change, generator_uses = (
            self._generator_change(job, new_region, new_text, names_in, lines[1]) if function and lines else ("", [])
        )
        property_change = (
            properties.property_change(job.region, new_region, names_in) if function and lines and method else ""
        )
        property_uses = (
            properties.property_misuses(new_text, names_in[1], lines[1], property_change == "property")
            if property_change
            else []
        )
        unhoisted, early_uses, arrow_misuses = (
            self._declaration_change(job, new_region, new_text, names_in, lines[1]) if lines else ("", [], [])
        )
        loose = (
            [
                f"line {lines[1][0] + row - 1}: `{_clipped(text)}`"
                for row, text in pysource.loose_statements(job.region, new_region)
            ]
            if python and target.kind not in CLASS_LIKE
            else []
        )
        return RewriteResult(
            source=job.source,
            language=spec.name,
            target=target,
            instruction=job.instruction,
            old_region=job.region,
            new_region=new_region,
            new_text=new_text,
            edits=edits,
            errors=errors,
            stats=stats,
            pieces=_pieces(self.backend, answer.tokens, answer.origins, job.fence),
            context_lines=job.n_context,
            extra_definitions=extra,
            helpers=helpers,
            dropped=dropped,
            dropped_code=dropped_code,
            compile_error=compile_error or "",
            redeclared=redeclared,
            left_out=left_out,
            imports=imports,
            imports_at=imports_at,
            missing_imports=names.missing_imports(imports) if spec.name == "python" else [],
            imports_left_out=imports_left_out,
            unchanged=written_back(shown, code, spec),
            # (an answer that does not parse may only look empty to the parser: the parse error is the reason given)
            defines_nothing=not errors and defines_nothing(shown, code, spec, target.simple_name),
            undefined_names=undefined,
            early_names=early,
            bad_calls=bad_calls,
            parameter_changes=parameter_changes,
            async_change=async_change,
            async_calls=async_calls,
            loose_code=loose,
            generator_change=generator_change,
            generator_uses=generator_uses,
            property_change=property_change,
            property_uses=property_uses,
            unhoisted=unhoisted,
            early_uses=early_uses,
            arrow_misuses=arrow_misuses,
            renamed_to=renamed,
            renamed_uses=sorted({line for _, line in uses}),
            trace=build_trace(self.backend, job.prompt, answer.tokens, stats),
        )

    @staticmethod
    def _async_change(
        job: _Job, new_region: str, new_text: str, names_in: tuple[str, str], new_lines: tuple[int, int]
    ) -> tuple[str, list[int]]:
        """Whether the rewrite made its function async ("async") or an async one ordinary ("sync"), and the lines of
        the new file whose calls of it no longer fit (Python: editspec.calls; JavaScript, TypeScript:
        editspec.promises). ("", []) in other languages, for a class, or where the new file does not parse."""
        target, spec = job.target, job.spec
        if target.kind in CLASS_LIKE:
            return "", []
        method = bool(target.containers)
        if spec.name == "python":
            change = calls.async_change(job.region, new_region, names_in)
            if change:
                return change, calls.coroutine_misuses(new_text, names_in[1], new_lines, method, change == "async")
        else:
            change = promises.async_change(job.region, new_region, spec, names_in)
            if change:
                return change, promises.promise_misuses(
                    new_text, spec, names_in[1], new_lines[0], method, change == "async"
                )
        return "", []

    @staticmethod
    def _generator_change(
        job: _Job, new_region: str, new_text: str, names_in: tuple[str, str], new_lines: tuple[int, int]
    ) -> tuple[str, list[int]]:
        """Python: whether the rewrite made its function a generator ("generator") or a generator an ordinary
        function ("ordinary"), and the lines of the new file whose use of its value no longer fits
        (editspec.generators); ("", []) where neither."""
        change = generators.generator_change(job.region, new_region, names_in)
        if not change:
            return "", []
        method = bool(job.target.containers)
        return change, generators.generator_misuses(new_text, names_in[1], new_lines, method, change == "generator")

    @staticmethod
    def _declaration_change(
        job: _Job, new_region: str, new_text: str, names_in: tuple[str, str], new_lines: tuple[int, int]
    ) -> tuple[str, list[int], list[str]]:
        """JavaScript, TypeScript: how the rewrite now declares a function declaration ("const", "let", "var",
        "class"; "" when it still is one), the lines of the new file that use it before that runs, and what
        fails now that it is an arrow function (editspec.hoisting). ("", [], []) in other languages, for a
        method, or where nothing changed."""
        if job.spec.name not in hoisting.LANGUAGES or job.target.kind in CLASS_LIKE:
            return "", [], []
        change = hoisting.declaration_change(job.region, new_region, job.spec, names_in)
        if change is None:
            return "", [], []
        early, arrow = hoisting.broken_uses(new_text, job.spec, names_in[1], new_lines)
        return ("" if change[0] == "function" else change[0]), early, arrow

    @staticmethod
    def _region_lines(
        job: _Job, new_region: str, start_char: int, imports: str
    ) -> tuple[tuple[int, int], tuple[int, int]]:
        """The region's lines (first, last) in the old text and in the new one (imports the answer added go in above
        it), for the checks of editspec.names, editspec.calls and editspec.promises."""
        old_first = job.source.text.count("\n", 0, start_char) + 1
        new_first = old_first + imports.count("\n")
        return (
            (old_first, old_first + job.region.rstrip("\n").count("\n")),
            (new_first, new_first + new_region.rstrip("\n").count("\n")),
        )

    def _from_own_header(self, job: _Job, first: _Answer, generation, budget: int):
        """An answer that went astray before the target's own header (`opened_elsewhere`), written again from
        there: what it opened with up to there (imports; a method's class header), then the code shown up to the
        target's name (decorators and `def NAME`, indented as the answer's class body, if any), then the model's
        own. Returns the new answer, its generation (its stats count the first one's work too, as a second look's
        do) and its result, whose trace shows the tokens it was made to start from, as a fork's does, and the first
        answer."""
        shown = dedent(job.region, job.indent)
        header = own_header(job.target.simple_name).search(shown)
        at, indent = first.restart_at
        # Up to the name, not its parenthesis: a token the model would not write there ("(" where it writes "(self")
        # makes it write on as if from somewhere else (parameters of its own, a `# type: ignore`). And inside the
        # class: at the top level, `TextWrapper.wrap` was written as the module's function `wrap` (`width=70`).
        forced_text = first.text()[:at] + indent_lines(shown[: header.end(1)], indent)
        forced = self.backend.tokenize(forced_text, parse_special=False)
        answer = _Answer(self, job, forced, ["target"] * len(forced), first.counts)
        again = self.decoder.decode(
            job.prompt + forced,
            stop=prompts.FenceStop(self.backend, job.fence),
            on_tokens=answer,
            max_tokens=budget - len(forced),
            opening_draft=0,  # (the drafts copy the code shown from its header on)
            scores=self.second_look,
        )
        stats = copy.copy(generation.stats)
        stats.rounds = list(stats.rounds)
        _add_work(stats, again.stats)
        stats.stop_reason = again.stats.stop_reason
        result = self._result(job, answer, stats)
        result.trace = forked_trace(
            self.backend, job.prompt, forced, again.tokens, again.stats, answer.origins[: len(forced)]
        )
        result.trace["own_header"] = {
            "first_answer": first.text(),
            "forced_tokens": len(forced),
            "kind": "method" if job.target.containers else "function",
        }
        return answer, dataclasses.replace(again, stats=stats), result

    def _look_again(self, job: _Job, first: _Answer, generation, budget: int) -> RewriteResult | None:
        """The second look at an answer that is the code written back as it was (`written_back`): the user asked
        for a change, and a model that writes its input back has usually passed by the change at a place where
        it nearly wrote something else. So fork there: at each of the SECOND_LOOK_FORKS places where the
        likeliest other token was likeliest, write that token and let the model go on greedily; keep the
        answer, among those that change the code itself (not only a comment, spacing or an import) and pass
        the checks, that the model finds likeliest as a whole (the sum of its tokens' log-probabilities).
        None when no fork does."""
        scores = generation.scores
        prefix_logprob = [0.0]
        for score in scores:
            prefix_logprob.append(prefix_logprob[-1] + score.logprob)
        places = sorted(
            (i for i, score in enumerate(scores) if self._may_fork_with(score.alternative)),
            key=lambda i: scores[i].alternative_logprob,
            reverse=True,
        )[:SECOND_LOOK_FORKS]
        # A fork's bound: the log-probability of the first answer up to it and of its own token. Log-probabilities
        # only fall as a fork goes on, so one that starts below the best answer found need not start at all.
        bounds = {i: prefix_logprob[i] + scores[i].alternative_logprob for i in places}
        stats = copy.copy(generation.stats)
        stats.rounds = list(stats.rounds)
        with _fork_states(self.backend):
            best, tried = self._forks(job, first, generation, budget, places, bounds, stats)
        if best is None:
            return None
        result = best[1]
        result.second_look.update(tried=tried, first_answer=first.text(), first_logprob=round(prefix_logprob[-1], 3))
        result.trace["second_look"] = result.second_look
        stats.stop_reason = result.stats.stop_reason
        result.stats = stats
        return result

    def _forks(self, job: _Job, first: _Answer, generation, budget: int, places, bounds, stats: Stats):
        """The forks of a second look, best first: (the best (log-probability, result) or None, forks started).

        A fork's log-probability only falls as it goes on, so the fork to write next is always the likeliest so
        far; it is paused once it falls more than PAUSE_MARGIN below the likeliest other (and stopped for good
        below the best answer found), and goes on from where it was if it is the likeliest again. So a fork
        that starts likeliest and then loses (the first fork of `117-matrix` here: 261 tokens written whole
        before) is written only until another leads. The answer kept is the same as writing each fork whole in
        turn: the likeliest fork that changes the code and passes the checks."""
        tokens, scores = generation.tokens, generation.scores
        head = first.tokens[: len(first.tokens) - len(tokens)]  # what the generation was made to start from
        forks = []
        for i in places:
            forced = [*head, *tokens[:i], scores[i].alternative]
            answer = _Answer(self, first.job, forced, [*first.origins[: len(head) + i], "target"], first.counts)
            forks.append(_Fork(i, forced, bounds[i], answer, prompts.FenceStop(self.backend, first.job.fence)))
        best: tuple[float, RewriteResult] | None = None
        tried = 0
        while True:
            live = [f for f in forks if best is None or f.logprob > best[0]]
            if not live:
                break
            fork = max(live, key=lambda f: f.logprob)
            floors = [f.logprob - PAUSE_MARGIN for f in live if f is not fork]
            if best is not None:
                floors.append(best[0])
            answer = fork.answer
            answer.stop_below = max(floors) - fork.bound if floors else None
            answer.less_likely = False
            tried += fork.stats is None
            written = answer.tokens
            segment = self.decoder.decode(
                job.prompt + written,
                stop=fork.stop,
                on_tokens=answer,
                max_tokens=budget - len(written),
                # No opening: a fork's prompt is read but for its last token, so what an opening would verify with
                # it is a first pass like any other, and its length is the policy's (48 tokens drafted there
                # unasked, all wrong, cost 2.1 s in a fork of 117-matrix).
                opening_draft=0,
                scores=True,
            )
            _add_work(stats, segment.stats)
            fork.add(segment)
            behind = answer.less_likely and not fork.stop.closed  # (it may fall behind in the round that closes it)
            if answer.less_likely and fork.stop.closed:
                fork.stats.stop_reason = "stop"
            if behind and not answer.refused and len(answer.tokens) < budget:
                if best is None or fork.logprob > best[0]:
                    _keep_state(self.backend)  # paused: it may go on, from here
                else:
                    forks.remove(fork)
                continue
            forks.remove(fork)
            if answer.refused or behind or fork.stats.stop_reason == "max_tokens":
                continue
            if fork.stats.stop_reason == "cancelled":
                raise RewriteCancelled("the rewrite was cancelled")
            result = self._result(job, answer, copy.copy(fork.stats))
            if (
                result.problem() is not None
                or same_code(dedent(job.region, job.indent), answer_code(result), job.spec)
                or (best is not None and fork.logprob <= best[0])
            ):
                continue  # refused, or no change to the code (a comment, spacing, an import), or less likely
            line = self.backend.detokenize([*head, *tokens[: fork.at]]).count("\n") + 1
            result.second_look = {
                "forked_at_token": len(head) + fork.at,
                "forked_at_line": line,
                "logprob": round(fork.logprob, 3),
            }
            result.trace = forked_trace(
                self.backend, job.prompt, fork.forced, fork.tokens, fork.stats, answer.origins[: len(fork.forced)]
            )
            best = (fork.logprob, result)
        return best, tried

    def _may_fork_with(self, token: int) -> bool:
        """A fork must go on writing code: not end the answer, nor begin its closing fence."""
        return not self.backend.is_end_of_generation(token) and not self.backend.token_text(token).lstrip().startswith(
            prompts.FENCE[:2]
        )


# Places forked at most, for an answer that is the code unchanged: each fork writes the rest of the definition
# again, so a further one costs a whole answer's decoding for a less likely alternative.
SECOND_LOOK_FORKS = 3
# A fork is paused once it falls this far (in nats) below the likeliest other fork: a little room, so that two
# forks of about the same likelihood are not switched at every pass (each switch reads one token again).
PAUSE_MARGIN = 1.0


@dataclass
class _Fork:
    """One fork of a second look: where it parts from the first answer, and all it has written so far."""

    at: int  # the first answer's token it replaces
    forced: list[int]  # the first answer up to there, then the other token
    bound: float  # the log-probability of `forced`
    answer: _Answer
    stop: prompts.FenceStop  # one per fork: a closing fence may span a pause
    stats: Stats | None = None  # its segments' work as one generation (for its result and trace)

    @property
    def logprob(self) -> float:
        """Of `forced` and all written since: only falls as the fork goes on."""
        return self.bound + self.answer.logprob

    @property
    def tokens(self) -> list[int]:
        """Written after `forced` (the answer holds both)."""
        return self.answer.tokens[len(self.forced) :]

    def add(self, segment) -> None:
        """Take in the work of what the fork wrote since it was started or last paused."""
        if self.stats is None:
            self.stats = copy.copy(segment.stats)
            self.stats.rounds = list(segment.stats.rounds)
        elif segment.tokens:
            # A resumed segment's first token came out of reading the pause's last token: a plain step.
            self.stats.rounds.append(Round([], 0, None, None, segment.tokens[0], segment.stats.prefill_seconds))
            _add_work(self.stats, segment.stats)
        self.stats.stop_reason = segment.stats.stop_reason


def _keep_state(backend) -> None:
    """Keep the backend's KV state in its (the forks') prefix cache: a paused fork goes on without re-reading."""
    if backend.prefix_cache is not None and backend.tokens and hasattr(backend, "save_state"):
        backend.prefix_cache.put(backend.tokens, backend.save_state())


def moved(target: Definition, result: RewriteResult) -> Definition:
    """Where a definition above the rewritten one is in the result's text. Rewriting a definition never moves what
    is above it, but for the imports it adds: those move down what follows them. (Several definitions of a file are
    rewritten bottom-up, each in the text the one before left.)"""
    at, block = result.imports_at
    if not block or target.start < at:
        return target
    shift, lines = len(block.encode("utf-8")), block.count("\n")
    return dataclasses.replace(
        target,
        start=target.start + shift,
        end=target.end + shift,
        node_start=target.node_start + shift,
        node_end=target.node_end + shift,
        own_start=target.own_start + shift,
        own_end=target.own_end + shift,
        line=target.line + lines,
        end_line=target.end_line + lines,
    )


def answer_code(result: RewriteResult) -> str:
    return dedent(result.new_region, common_indent(result.new_region.split("\n")))


@dataclass
class _Job:
    """One rewrite's inputs, as every answer to it is judged against them."""

    source: SourceFile
    spec: LanguageSpec
    target: Definition
    instruction: str
    data: bytes
    tree: object
    old_errors: set[int]  # where the file's own syntax errors start (bytes)
    fence: str  # the prompt's code fence, longer than any run of backticks in the code
    prompt: list[int]
    region: str
    indent: str
    n_context: int
    opens_with_imports: bool  # the code shown opens with import statements of its own
    existing: set[str]
    sharing: dict[str, int]  # other definitions on the target's lines (see sharing_lines): how many of each name
    outside: tuple[list[bytes], list[bytes]]  # the code on its first and last line that is not its (outside_code)
    on_progress: ProgressCallback | None


def _outside_lost(job: _Job, new_tree, new_data: bytes, new_end: int) -> str:
    """The code on the target's first or last line outside it (outside_code) that the new lines do not keep, as
    the file shows it, or "": the new lines must open with the same tokens as the old code before the target and
    close with those after it (layout and comments aside)."""
    before, after = job.outside
    if not before and not after:
        return ""
    new = code_leaves(new_tree, job.target.start, new_end, new_data)
    lost = []
    if new[: len(before)] != before or len(new) < len(before) + len(after):
        lost.append(job.data[job.target.start : job.target.own_start])
    if after and new[-len(after) :] != after:
        lost.append(job.data[job.target.own_end : job.target.end])
    return " … ".join(_clipped(" ".join(part.decode("utf-8", "replace").split())) for part in lost if part.strip())


def _line_list(lines: list[int], most: int = 8) -> str:
    """Lines as a note names them: "line 3", "lines 3, 9", "lines 1, ..., 8 and 4 more"."""
    shown = ", ".join(map(str, lines[:most]))
    return f"line{'s' * (len(lines) > 1)} {shown}" + (f" and {len(lines) - most} more" if len(lines) > most else "")


def _some(items: list[str], most: int) -> str:
    """The first `most` of `items` as a note lists them, "; ..." after them where there are more."""
    return "; ".join(items[:most]) + ("; ..." if len(items) > most else "")


def _clipped(code: str, most: int = 80) -> str:
    """`code` as a message quotes it: its start and end, where it is longer than `most` characters (a minified
    line is thousands)."""
    return code if len(code) <= most else f"{code[: most * 2 // 3]} … {code[-(most // 4) :]}"


class _Answer:
    """What one generation has written (after a fork: the forced prefix, then its own tokens), where each token
    came from, and the engine's callback: progress, cancellation, and the stop once a refusal is certain."""

    def __init__(self, rewriter: Rewriter, job: _Job, prefix=(), prefix_origins=(), counts=None):
        self.rewriter, self.job = rewriter, job
        self.backend = rewriter.backend
        self.tokens: list[int] = list(prefix)
        self.origins: list[str] = list(prefix_origins)
        self.counts = counts if counts is not None else {"drafted": 0, "accepted": 0, "passes": 1}
        self.bytes = b"".join(self.backend.token_bytes(t) for t in prefix)
        self.lines_checked = 0
        self.refused = False
        self.logprob = 0.0  # of the tokens written since the prefix (with scores: every one, the first included)
        self.stop_below: float | None = None  # stop once `logprob` falls below this (a second look's fork)
        self.less_likely = False  # stopped so
        # Python, a function: watched until its opening lines settle whether the answer went astray before the
        # target's own header (`opened_elsewhere`); if so, stopped there (`restart_at`: where the answer is to be
        # started again from the target's header, and the indentation it takes there).
        self.watch_opening = (
            job.spec.name == "python"
            and not prefix
            and own_header(job.target.simple_name).search(job.region) is not None
        )
        self.restart_at: tuple[int, str] | None = None

    def text(self) -> str:
        return prompts.code_before_fence(self.bytes.decode("utf-8", errors="replace"), self.job.fence)

    def __call__(self, tokens: list[int], rnd: Round) -> bool:
        accepted = min(rnd.accepted, len(tokens))
        kind = "copied" if rnd.origin == "lookup" else "drafted"
        self.origins.extend([kind] * accepted + ["target"] * (len(tokens) - accepted))
        self.counts["drafted"] += len(rnd.drafted)
        self.counts["accepted"] += rnd.accepted
        self.counts["passes"] += 0 if rnd.opening else 1
        self.tokens.extend(tokens)
        # Grown by this round's tokens, not re-joined from all of them: this runs every round. Before the stop
        # below: a fork paused there goes on later with all it wrote.
        grown = b"".join(self.backend.token_bytes(t) for t in tokens)
        self.bytes += grown
        if rnd.scores:
            self.logprob += sum(score.logprob for score in rnd.scores)
            if self.stop_below is not None and self.logprob < self.stop_below:
                self.less_likely = True
                return True
        job, finish_refused = self.job, self.rewriter.finish_refused
        if self.watch_opening and b"\n" in grown:  # (it reads complete lines only)
            settled, self.restart_at = opened_elsewhere(self.text(), job.spec, job.target, job.existing)
            self.watch_opening = not settled
            if self.restart_at is not None:
                return True
        if job.on_progress is None and finish_refused:
            return False
        text = unwrap_enclosing_class(self.text(), job.target.containers)
        lines = text.count("\n")
        if not finish_refused and lines > self.lines_checked:
            self.lines_checked = lines
            if settled_extra_definition(text, job.spec, job.target, job.existing):
                self.refused = True
                return True
        if job.on_progress is None:
            return False
        return bool(job.on_progress(Progress(text, len(self.tokens), **self.counts)))


@contextlib.contextmanager
def _fork_states(backend):
    """While a second look forks: no later request starts with a fork's prompt (the kept prompts are set aside),
    and every fork starts from the first answer's KV state, held in memory for the forks alone. Without it a fork
    re-read the first answer up to its fork point whenever an earlier fork had written over the cache (60 tokens
    of a 100-token answer: about 1.5 s here)."""
    kept = backend.prefix_cache
    backend.prefix_cache = PrefixCache(PREFIX_CACHE_MB << 20)
    _keep_state(backend)
    try:
        yield
    finally:
        backend.prefix_cache = kept


def _add_work(total: Stats, more: Stats) -> None:
    """Count a fork's work into a rewrite's: every token written and every pass, its reading as decoding."""
    total.generated_tokens += more.generated_tokens
    total.target_passes += more.target_passes
    total.drafted_tokens += more.drafted_tokens
    total.accepted_tokens += more.accepted_tokens
    total.decode_seconds += more.prefill_seconds + more.decode_seconds
    total.rounds.extend(more.rounds)


class RewriteCancelled(RewriteError):
    pass


class ResultRefused(RewriteError):
    """A result that must not be written without --force: it does not parse, adds definitions, or was cut off."""


def apply_rewrite(result: RewriteResult, force: bool = False) -> bool:
    """What `editspec rewrite --apply` does with a result (the quality benchmark goes through it too): refuse
    one with a problem unless forced, then write the file atomically if it changed. Returns whether it wrote."""
    problem = result.problem()
    if problem and not force:
        raise ResultRefused(f"not written: {problem}; check the diff, or use --force")
    if not result.changed:
        return False
    write_atomically(result.source.path, result.source.encode(result.new_text), result.source.raw)
    return True


# An answer longer than this many times the code (plus some room) is almost always the model repeating itself.
ANSWER_GROWTH, ANSWER_ROOM = 4, 256


def answer_budget(code_tokens: int, max_tokens: int | None) -> int:
    """The user's --max-tokens if given; else room for the code to grow fourfold and then some."""
    return max_tokens if max_tokens is not None else ANSWER_GROWTH * code_tokens + ANSWER_ROOM


def _pieces(backend, tokens: list[int], origins: list[str], fence: str = prompts.FENCE) -> list[Piece]:
    """Group consecutive tokens of the same origin; the closing fence is not part of the code (it may be split
    over several tokens: what counts is the text before it)."""
    code = prompts.code_before_fence(backend.detokenize(tokens), fence)
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")  # a split character: its last token
    pieces: list[Piece] = []
    used = 0
    for tok, origin in zip(tokens, origins, strict=False):
        if used >= len(code):
            break
        text = decoder.decode(backend.token_bytes(tok))[: len(code) - used]
        if not text:
            continue
        used += len(text)
        if pieces and pieces[-1].origin == origin:
            pieces[-1].text += text
        else:
            pieces.append(Piece(text, origin))
    return pieces
