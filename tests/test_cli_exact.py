"""The CLI's promises, on the scripted model (tests/scripted.py) where every answer is known to the character:
line ends, --range and --line, several --function, exit codes, --trace, the trailing newline."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from editspec.cli import EXIT_CHANGED, EXIT_INPUT, EXIT_INTERRUPTED, EXIT_UNPARSABLE, EXIT_USAGE, main
from editspec.names import EAGER_ANNOTATIONS
from tests.raw_lsp import scripted

TWO = (
    "import math\n\n\n"
    "class Rect:\n"
    "    def __init__(self, w, h):\n"
    "        self.w, self.h = w, h\n\n\n"
    "def total(xs):\n"
    "    s = 0\n"
    "    for x in xs:\n"
    "        s = s + x\n"
    "    return s\n"
)
USE_SUM = scripted(("    s = 0\n    for x in xs:\n        s = s + x\n    return s", "    return sum(xs)"))


def run(*args, input=None):
    result = CliRunner().invoke(main, ["rewrite", *args, "-q"], input=input)
    return result


@pytest.fixture
def two(tmp_path, scripted_model):
    path = tmp_path / "two.py"
    path.write_bytes(TWO.encode())
    return path


def test_a_file_with_mixed_line_ends_keeps_each_line_s_own(tmp_path, scripted_model):
    mixed = TWO.replace("import math\n", "import math\r\n").replace("    s = 0\n", "    s = 0\r\n")
    path = tmp_path / "mixed.py"
    path.write_bytes(mixed.encode())
    result = run(str(path), "-f", "total", "-i", scripted(("for x in xs", "for x in list(xs)")), "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == mixed.replace("for x in xs", "for x in list(xs)").encode()


def test_a_crlf_file_stays_crlf_and_new_lines_get_crlf(tmp_path, scripted_model):
    path = tmp_path / "win.py"
    path.write_bytes(TWO.replace("\n", "\r\n").encode())
    result = run(str(path), "-f", "total", "-i", USE_SUM, "--apply")
    assert result.exit_code == 0, result.output
    expected = TWO.replace("    s = 0\n    for x in xs:\n        s = s + x\n    return s", "    return sum(xs)")
    assert path.read_bytes() == expected.replace("\n", "\r\n").encode()


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_a_byte_order_mark_stays_where_it_is(tmp_path, scripted_model, line_end):
    # The file's first definition starts on the line the mark is on: the mark is the file's, not the definition's.
    code = TWO[TWO.index("def total") :]
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbf" + code.replace("\n", line_end).encode())
    result = run(str(path), "--line", "1", "-i", USE_SUM, "--apply")
    assert result.exit_code == 0, result.output
    expected = "def total(xs):\n    return sum(xs)\n".replace("\n", line_end)
    assert path.read_bytes() == b"\xef\xbb\xbf" + expected.encode()


def test_the_trailing_newline_or_its_absence_is_kept(tmp_path, scripted_model):
    path = tmp_path / "no_eol.py"
    path.write_bytes(TWO.rstrip("\n").encode())
    assert run(str(path), "-f", "total", "-i", USE_SUM, "--apply").exit_code == 0
    assert (
        path.read_bytes()
        == TWO.rstrip("\n")
        .replace("    s = 0\n    for x in xs:\n        s = s + x\n    return s", "    return sum(xs)")
        .encode()
    )


def test_range_counts_the_file_s_own_bytes(tmp_path, scripted_model):
    crlf = TWO.replace("\n", "\r\n").encode()
    path = tmp_path / "win.py"
    path.write_bytes(crlf)
    # The last byte of Rect's body on disk; in the "\n" text that offset is 9 bytes further: inside total.
    at = crlf.index(b"self.w, self.h = w, h") + 20
    result = run(str(path), "--range", f"{at}:{at}", "-i", "unchanged", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["target"]["name"] == "Rect.__init__"
    outside = run(str(path), "--range", f"{len(crlf) + 1}:{len(crlf) + 2}", "-i", "x")
    assert outside.exit_code == EXIT_INPUT and "outside the file" in outside.output
    backwards = run(str(path), "--range", f"{at}:{at - 1}", "-i", "x")
    assert backwards.exit_code == EXIT_INPUT and "ends before it starts" in backwards.output


def test_line_and_column_pick_the_innermost_definition(two):
    def target(where):
        result = run(str(two), "--line", where, "-i", "unchanged", "--json")
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["target"]["name"]

    assert target("4") == "Rect"
    assert target("5:5") == "Rect.__init__"
    assert target("11:9") == "total"
    missing = run(str(two), "--line", "2", "-i", "x")
    assert missing.exit_code == EXIT_INPUT and "no function" in missing.output


# -- several --function -------------------------------------------------------------------------------------------

ADD_DOC = scripted(
    ("class Rect:\n", 'class Rect:\n    """A rectangle."""\n\n'), ("def total(xs):\n", "def total(xs):\n    # sum\n")
)
# total's answer also defines Rect again, before total: refused, as one --function refuses it.
# An answer for total that writes it twice (refused: the model wrote more than total); Rect's gets a comment.
TWICE = scripted(
    ("def total(xs):\n", "def total(xs):\n    pass\n\n\ndef total(xs):\n"),
    ("class Rect:\n    def", "class Rect:\n    # r\n    def"),
)


def test_several_functions_a_class_among_them(two):
    result = run(str(two), "-f", "Rect", "-f", "total", "-i", ADD_DOC, "--apply")
    assert result.exit_code == 0, result.output
    expected = TWO.replace("class Rect:\n", 'class Rect:\n    """A rectangle."""\n\n').replace(
        "def total(xs):\n", "def total(xs):\n    # sum\n"
    )
    assert two.read_text() == expected


@pytest.mark.parametrize(
    ("name", "raw", "target"),
    [
        ("mac.py", b"def f(x):\r    return x\r\rdef g(y):\r    return y\r", "f"),
        ("mac.js", b"function f(x) {\r  return x\r}\r\rfunction g(y) {\r  return y\r}\r", "g"),
    ],
)
def test_a_definition_with_lone_cr_line_ends_is_refused(tmp_path, scripted_model, name, raw, target):
    """Classic Mac OS line ends: to tree-sitter's Python grammar `def f` held `def g`, and rewriting f rewrote g too
    (exit 0). Lines are LF or CRLF to editspec; a lone CR inside the definition is refused, naming its line."""
    path = tmp_path / name
    path.write_bytes(raw)
    result = run(str(path), "-f", target, "-i", scripted(("return", "return  ")), "--apply")
    assert result.exit_code == EXIT_INPUT, result.output
    assert f"{target} breaks lines with a lone carriage return (CR, in line 1)" in result.output
    assert path.read_bytes() == raw


def test_lone_crs_before_a_line_s_end_or_before_the_definition_are_kept(tmp_path, scripted_model):
    """`\r\r\n` (some tools write it) is a line end after a stray CR; CRs before the definition on its first line are
    outside code (the language server's `import math\r\r\r`): both rewrite as before."""
    path = tmp_path / "crcr.py"
    path.write_bytes(b"import math\r\r\rdef f(x):\r\r\n    return x\r\r\n")
    result = run(str(path), "-f", "f", "-i", scripted(("return x", "return -x")), "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_bytes() == b"import math\r\r\rdef f(x):\r\r\n    return -x\r\n"


@pytest.mark.parametrize(
    "text",
    [
        "function a(x) {\n  return x + 1\n} function b(y) {\n  return y * 2\n}\n",  # a's last line is b's first
        "function a(x){return x+1} function b(y){return y*2}\n",  # one line
    ],
)
def test_several_functions_that_share_a_line_are_refused_before_the_model_runs(tmp_path, scripted_model, text):
    """Each rewrite replaces its target's whole lines, and several are placed by where their definitions were: with
    a line shared, b's rewrite (a rename) moved the end of a's lines, and a's rewrite then cut `function bee(y) {`
    to `function bee(y){`, exit 0; on one line the two were taken for one definition and only b was asked for."""
    path = tmp_path / "ab.js"
    path.write_text(text)
    both = scripted(("x + 1", "x + 10"), ("function b(y)", "function bee(y)"), ("x+1", "x+10"))
    result = run(str(path), "-f", "a", "-f", "b", "-i", both, "--apply")
    assert result.exit_code == EXIT_INPUT and "a and b share a line" in result.output, result.output
    assert path.read_text() == text
    only_a = scripted(("x + 1", "x + 10"), ("x+1", "x+10"))
    assert run(str(path), "-f", "a", "-f", "a", "-i", only_a, "--apply").exit_code == 0  # one given twice: once
    assert path.read_text() == text.replace("x + 1", "x + 10").replace("x+1", "x+10")


def test_a_function_moved_down_by_the_imports_another_s_rewrite_added_is_judged_where_it_now_is(
    tmp_path, scripted_model
):
    """`second` (rewritten first: bottom-up) adds `import math` above `first`; `first` is then judged at its new
    place, its own code too (taken at the old offsets, the tail of its last line read as code beside it that the
    answer had to keep, and a correct answer was refused)."""
    text = "def first(x):\n    return x + 1\n\n\ndef second(y):\n    return y * 2\n"
    path = tmp_path / "m.py"
    path.write_text(text)
    edit = scripted(("return x + 1", "return x + 2"), ("def second(y):", "import math\n\n\ndef second(y):"))
    result = run(str(path), "-f", "first", "-f", "second", "-i", edit, "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == "import math\n\n" + text.replace("x + 1", "x + 2")


def test_several_lines_rewrite_each_definition_there_as_several_functions_do(two):
    """`-l 5 -l 10` rewrites the definitions at both lines (it rewrote only the last one given, silently), and so
    do two `--range`; two lines in one definition rewrite it once; a definition inside another given too is
    refused."""
    widen = scripted(("return", "return  "), ("self.w, self.h", "self.w, self.h  "))
    result = run(str(two), "-l", "5", "-l", "10", "-i", widen, "--apply")
    assert result.exit_code == 0, result.output
    assert two.read_text() == TWO.replace("self.w, self.h", "self.w, self.h  ").replace("return", "return  ")
    two.write_text(TWO)
    once = run(str(two), "-l", "10", "-l", "12", "-i", widen, "--apply")
    assert once.exit_code == 0, once.output
    assert two.read_text() == TWO.replace("return", "return  ")  # total, once (a second time would widen again)
    nested = run(str(two), "-l", "4", "-l", "5", "-i", widen)
    assert nested.exit_code == EXIT_INPUT and "Rect.__init__ is inside Rect (both given with --line)" in nested.output
    piped = run("-", "--language", "python", "-l", "5", "-l", "10", "-i", "x", input=TWO)
    assert piped.exit_code == EXIT_INPUT and "several --line need a file" in piped.output
    # --range likewise: byte ranges inside __init__ and total.
    init, total = TWO.index("self.w, self.h"), TWO.index("return s")
    two.write_text(TWO)
    ranges = run(str(two), "--range", f"{init}:{init + 3}", "--range", f"{total}:{total}", "-i", widen, "--apply")
    assert ranges.exit_code == 0, ranges.output
    assert two.read_text() == TWO.replace("self.w, self.h", "self.w, self.h  ").replace("return", "return  ")


def test_several_functions_refuse_per_function_as_one_does(two):
    diff = run(str(two), "-f", "Rect", "-f", "total", "-i", TWICE)
    # No --apply: the diff of what would be written, a warning, and the exit --apply would give (for scripts).
    assert diff.exit_code == EXIT_UNPARSABLE, diff.output
    assert "+    # r" in diff.stdout and "+    pass" not in diff.stdout
    assert "total: the model wrote more than total" in diff.stderr
    assert "total: refused: --apply would not write this" in diff.stderr

    applied = run(str(two), "-f", "Rect", "-f", "total", "-i", TWICE, "--apply")
    assert applied.exit_code == EXIT_UNPARSABLE, applied.output
    assert two.read_text() == TWO.replace("class Rect:\n    def", "class Rect:\n    # r\n    def")  # Rect only

    as_json = json.loads(run(str(two), "-f", "Rect", "-f", "total", "-i", "unchanged", "--json").stdout)
    assert [f["target"]["name"] for f in as_json["functions"]] == ["Rect", "total"]
    assert all(f["applied"] and f["problem"] is None for f in as_json["functions"])


def test_several_functions_with_force_show_and_trace(two, tmp_path):
    forced = run(str(two), "-f", "Rect", "-f", "total", "-i", TWICE, "--apply", "--force")
    assert forced.exit_code == 0, forced.output
    assert two.read_text().count("def total(xs):") == 2  # forced: written as the model wrote it
    two.write_text(TWO)
    shown = run(str(two), "-f", "Rect", "-f", "total", "-i", ADD_DOC, "--show")
    assert shown.exit_code == 0
    assert "── Rect ──" in shown.stdout and "── total ──" in shown.stdout and "# sum" in shown.stdout
    traced = run(str(two), "-f", "Rect", "-f", "total", "-i", ADD_DOC, "--trace", str(tmp_path / "t.html"))
    assert traced.exit_code == 0
    assert "# sum" in (tmp_path / "t.total.html").read_text()
    assert "A rectangle" in (tmp_path / "t.Rect.html").read_text()


# -- exit codes ---------------------------------------------------------------------------------------------------


def test_apply_refuses_when_the_file_changed_on_disk(two, monkeypatch):
    import editspec.rewrite

    original = editspec.rewrite.Rewriter.rewrite

    def rewrite_while_someone_saves(self, source, *args, **kwargs):
        result = original(self, source, *args, **kwargs)
        two.write_text(two.read_text() + "# saved meanwhile\n")
        return result

    monkeypatch.setattr(editspec.rewrite.Rewriter, "rewrite", rewrite_while_someone_saves)
    result = run(str(two), "-f", "total", "-i", USE_SUM, "--apply")
    assert result.exit_code == EXIT_CHANGED and "changed on disk" in result.output
    assert two.read_text() == TWO + "# saved meanwhile\n"
    several = run(str(two), "-f", "total", "-f", "Rect", "-i", USE_SUM, "--apply")
    assert several.exit_code == EXIT_CHANGED and "changed on disk" in several.output
    assert two.read_text() == TWO + "# saved meanwhile\n" * 3  # the user's saves, nothing of ours


def test_apply_writes_through_a_symbolic_link_and_keeps_it_a_link(two, tmp_path):
    link = tmp_path / "elsewhere" / "link.py"
    link.parent.mkdir()
    link.symlink_to(two)
    for args in (["-f", "total"], ["-f", "total", "-f", "Rect"]):
        two.write_bytes(TWO.encode())
        result = run(str(link), *args, "-i", USE_SUM, "--apply")
        assert result.exit_code == 0, result.output
        assert link.is_symlink() and link.resolve() == two.resolve()
        assert "return sum(xs)" in two.read_text() and "s = s + x" not in two.read_text()
        assert sorted(p.name for p in tmp_path.rglob("*")) == ["elsewhere", "link.py", "two.py"]  # no temporary


def test_a_read_only_file_is_refused_before_the_model_runs(two, monkeypatch):
    import os

    import editspec.rewrite

    def no_model(*args, **kwargs):
        raise AssertionError("the model ran for a file that cannot be written")

    # Tests may run as root, whom no mode bit stops: ask as an ordinary user would be answered.
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda path, mode: False if mode == os.W_OK else real_access(path, mode))
    assert "+    return sum(xs)" in run(str(two), "-f", "total", "-i", USE_SUM).output  # a diff: nothing to write
    monkeypatch.setattr(editspec.rewrite.Rewriter, "rewrite", no_model)
    for args in (["-f", "total"], ["-f", "total", "-f", "Rect"]):
        result = run(str(two), *args, "-i", USE_SUM, "--apply")
        assert result.exit_code == EXIT_INPUT and "read-only" in result.output, result.output
        assert two.read_text() == TWO


PATCH_FILES = {
    "crlf.py": TWO.replace("\n", "\r\n"),
    "mixed.py": TWO.replace("    s = 0\n", "    s = 0\r\n"),
    "no newline at end.py": TWO.rstrip("\n"),  # and a name with spaces
    "odd breaks.py": TWO.replace("def total", "# a\fb\u2028c\x1c\ndef total"),  # breaks for str.splitlines only
    "bom.py": "\ufeff" + TWO,
}


@pytest.mark.parametrize("name", list(PATCH_FILES))
def test_the_printed_patch_applies_with_git_and_patch_as_apply_writes_it(tmp_path, scripted_model, monkeypatch, name):
    import subprocess

    monkeypatch.chdir(tmp_path)
    original = PATCH_FILES[name].encode()
    (tmp_path / name).write_bytes(original)
    patch = run(name, "-f", "total", "-i", USE_SUM)
    assert patch.exit_code == 0 and "+    return sum(xs)" in patch.output, patch.output
    assert run(name, "-f", "total", "-i", USE_SUM, "--apply").exit_code == 0
    written = (tmp_path / name).read_bytes()
    assert written != original
    for tool in (["git", "apply"], ["patch", "-p1", "--quiet"]):
        where = tmp_path / tool[0]
        where.mkdir()
        (where / name).write_bytes(original)
        done = subprocess.run(tool, input=patch.stdout_bytes, cwd=where, capture_output=True, timeout=30)
        assert done.returncode == 0, (tool, done.stdout, done.stderr, patch.output)
        assert (where / name).read_bytes() == written, tool


def test_apply_to_a_fifo_is_refused_before_reading_it_and_a_device_is_not_read(two, tmp_path):
    import contextlib
    import os
    import threading

    fifo = tmp_path / "pipe.py"
    os.mkfifo(fifo)

    def unblock():  # reading a FIFO with no writer waits for ever: a read here ends (and the test fails) in 5 s
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))

    for path in (fifo, tmp_path / "link.py"):
        if path != fifo:
            path.symlink_to(fifo)
        timer = threading.Timer(5, unblock)
        timer.start()
        result = run(str(path), "-f", "total", "-i", USE_SUM, "--apply")
        timer.cancel()
        assert result.exit_code == EXIT_INPUT and "not a regular file" in result.output, result.output
        assert fifo.is_fifo()
    result = run("/dev/zero", "-f", "total", "-i", USE_SUM)  # read whole, it would fill the memory
    assert result.exit_code == EXIT_INPUT and "is a device" in result.output, result.output


@pytest.mark.parametrize("failing", ["mkstemp", "fsync", "replace"])
def test_a_write_that_fails_leaves_the_file_as_it_was_and_no_temporary(two, tmp_path, monkeypatch, failing):
    import errno
    import os
    import tempfile

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    module = tempfile if failing == "mkstemp" else os
    monkeypatch.setattr(module, failing, full)
    for args in (["-f", "total"], ["-f", "total", "-f", "Rect"]):
        result = run(str(two), *args, "-i", USE_SUM, "--apply")
        assert result.exit_code == EXIT_INPUT, result.output
        assert "cannot write" in result.output and "No space left" in result.output
        assert two.read_text() == TWO
        assert [p.name for p in tmp_path.iterdir()] == ["two.py"]


@pytest.mark.parametrize("where", ["after", "before"])
def test_a_half_written_line_elsewhere_is_not_the_rewrite_s_error(tmp_path, scripted_model, where):
    """A user mid-edit: a line that does not parse outside the target. The rewrite is judged on what it wrote,
    also when it changes how many lines come before that line; an error of its own is still refused."""
    half = "\n\ndef other(:\n    pass\n"
    text = TWO + half if where == "after" else TWO.replace("\n\nclass Rect", half + "\n\nclass Rect")
    path = tmp_path / "mid_edit.py"
    path.write_text(text)
    result = run(str(path), "-f", "total", "-i", USE_SUM, "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace(
        "    s = 0\n    for x in xs:\n        s = s + x\n    return s", "    return sum(xs)"
    )
    path.write_text(text)
    broken = scripted(("    return s", "    return (s +"))
    result = run(str(path), "-f", "total", "-i", broken, "--apply")
    assert result.exit_code == EXIT_UNPARSABLE and "does not parse" in result.output, result.output
    assert path.read_text() == text


RUST_DOC = (
    "/// Adds two numbers.\n///\n/// ```\n/// assert_eq!(add(2, 3), 5);\n/// ```\n"
    "pub fn add(a: i32, b: i32) -> i32 {\n    let s = a + b;\n    return s;\n}\n\n"
    "pub fn sub(a: i32, b: i32) -> i32 {\n    a - b\n}\n"
)
PY_DOC = (
    'def pairs(text):\n    """Parse lines.\n\n    ```python\n    >>> pairs("a=1")\n    ```\n    """\n'
    "    r = {}\n    return r\n"
)


@pytest.mark.parametrize(
    ("name", "text", "old", "new"),
    [
        ("lib.rs", RUST_DOC, "    let s = a + b;\n    return s;", "    a + b"),
        ("doc.py", PY_DOC, "    r = {}", "    r: dict = {}"),
    ],
)
def test_code_holding_a_code_fence_is_rewritten_whole(tmp_path, scripted_model, name, text, old, new):
    """A doc comment's example (```) used to close the answer where the model copied it: the Rust function was
    written as its first doc lines, taking the function out of the file."""
    path = tmp_path / name
    path.write_text(text)
    fn = "add" if name == "lib.rs" else "pairs"
    result = run(str(path), "-f", fn, "-i", scripted((old, new)), "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace(old, new)


def test_an_answer_with_no_definition_is_refused(two):
    """Whatever cut it short, an answer that holds no definition would delete the target: refused (exit 5)."""
    body = "def total(xs):\n    s = 0\n    for x in xs:\n        s = s + x\n    return s"
    for args in (["-f", "total"], ["-f", "total", "-f", "Rect"]):
        result = run(str(two), *args, "-i", scripted((body, "# total: see below")), "--apply")
        assert result.exit_code == EXIT_UNPARSABLE and "holds no definition" in result.output, result.output
        assert two.read_text() == TWO
    forced = run(str(two), "-f", "total", "-i", scripted((body, "# total: see below")), "--apply", "--force")
    assert forced.exit_code == 0 and "def total" not in two.read_text()  # --force writes what it is told


def test_a_python_function_written_as_a_lambda_of_its_name_is_a_definition(two):
    """Asked to "Convert it to an arrow function", the coder wrote `total_area = lambda shapes: ...`: it was refused
    as holding no definition ("it may have been cut short"), which was false. A lambda bound to another name still
    would take the function out of the file; nor is the lambda code beside the function."""
    body = "def total(xs):\n    s = 0\n    for x in xs:\n        s = s + x\n    return s"
    other = run(str(two), "-f", "total", "-i", scripted((body, "sum_all = lambda xs: sum(xs)")), "--apply")
    assert other.exit_code == EXIT_UNPARSABLE and "holds no definition" in other.output, other.output
    as_lambda = run(str(two), "-f", "total", "-i", scripted((body, "total = lambda xs: sum(xs)")), "--apply")
    assert as_lambda.exit_code == 0, as_lambda.output
    assert "\ntotal = lambda xs: sum(xs)\n" in two.read_text() and "def total" not in two.read_text()
    assert "note:" not in as_lambda.stderr


def test_an_answer_that_does_not_parse_is_refused_as_such_not_as_holding_no_definition(tmp_path, scripted_model):
    """Unbalanced braces leave the parser no function to see in the answer: the reason given is the parse error
    (it had been "the answer holds no definition ... it may have been cut short")."""
    text = "function f(a) {\n  if (a) {\n    return 1;\n  }\n  return 0;\n}\n\nfunction g() {\n  return f(1);\n}\n"
    path = tmp_path / "f.js"
    path.write_text(text)
    result = run(str(path), "-f", "f", "-i", scripted(("  if (a) {\n", "  if (a) {\n  if (a) {\n")), "--apply")
    assert result.exit_code == EXIT_UNPARSABLE and "does not parse (line 11" in result.output, result.output
    assert "holds no definition" not in result.output and path.read_text() == text


def test_a_function_answered_with_the_files_class_first_is_written_from_its_own_header(two):
    """The model writes the file's `class Rect` again before `total` (refused until the forty-eighth session):
    the answer is stopped at the class's header and started again from `def total`."""
    copies_rect = scripted(
        ("def total(xs):\n", "class Rect:\n    pass\n\n\ndef total(xs):\n"), ("return s", "return sum(xs)")
    )
    result = run(str(two), "-f", "total", "-i", copies_rect, "--apply", "--json")
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    assert said["problem"] is None and said["trace"]["own_header"]["first_answer"] == "class Rect:\n"
    assert two.read_text() == TWO.replace("return s", "return sum(xs)")


def test_a_preview_of_a_refused_result_exits_as_apply_would(two):
    """Without --apply nothing is written either way, but a script must be able to tell a refused result: the diff
    and the warning, then exit 5; --force takes the result, and a preview of an accepted one exits 0."""
    for extra in ([], ["--json"], ["--show"]):
        result = run(str(two), "-f", "total", "-i", TWICE, *extra)
        assert result.exit_code == EXIT_UNPARSABLE, (extra, result.output)
        assert "refused: --apply would not write this" in result.stderr
        assert two.read_text() == TWO
    assert "+def total(xs):" in run(str(two), "-f", "total", "-i", TWICE).stdout  # the diff is shown all the same
    assert json.loads(run(str(two), "-f", "total", "-i", TWICE, "--json").stdout)["problem"]
    forced = run(str(two), "-f", "total", "-i", TWICE, "--force")
    assert forced.exit_code == 0 and "refused" not in forced.stderr, forced.output
    assert run(str(two), "-f", "total", "-i", USE_SUM).exit_code == 0


def test_interrupted_is_130_and_nothing_written(two, monkeypatch):
    import editspec.rewrite

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(editspec.rewrite.Rewriter, "rewrite", interrupted)
    for args in (["-f", "total"], ["-f", "total", "-f", "Rect"]):
        result = run(str(two), *args, "-i", USE_SUM, "--apply")
        assert result.exit_code == EXIT_INTERRUPTED, result.output
        assert two.read_text() == TWO


def test_bad_usage_is_2(two):
    assert run(str(two), "-f", "total", "-i", "x", "--no-such-option").exit_code == EXIT_USAGE
    assert run(str(two), "-f", "total").exit_code == EXIT_USAGE  # no instruction


def test_trace_writes_the_page(two, tmp_path):
    result = run(str(two), "-f", "total", "-i", USE_SUM, "--trace", str(tmp_path / "t.html"))
    assert result.exit_code == 0
    page = (tmp_path / "t.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and "sum(xs)" in page


def test_no_speculation_writes_what_speculation_writes(two):
    spec = run(str(two), "-f", "total", "-i", USE_SUM, "--json")
    plain = run(str(two), "-f", "total", "-i", USE_SUM, "--json", "--no-speculation")
    a, b = json.loads(spec.stdout), json.loads(plain.stdout)
    assert a["new_region"] == b["new_region"] and "sum(xs)" in a["new_region"]
    assert a["stats"]["drafted_tokens"] > 0 and b["stats"]["drafted_tokens"] == 0


def test_stdin_in_and_the_new_file_out(scripted_model):
    result = run("-", "--language", "python", "-f", "total", "-i", USE_SUM, "--apply", input=TWO)
    assert result.exit_code == 0, result.output
    assert result.stdout == TWO.replace(
        "    s = 0\n    for x in xs:\n        s = s + x\n    return s", "    return sum(xs)"
    )
    several = run("-", "--language", "python", "-f", "total", "-f", "Rect", "-i", "x", input=TWO)
    assert several.exit_code == EXIT_INPUT and "standard input" in several.output


def test_show_prints_the_new_code(two):
    result = run(str(two), "-f", "total", "-i", USE_SUM, "--show")
    assert result.exit_code == 0
    assert "legend:" in result.stdout and "return sum(xs)" in result.stdout and "s = s + x" not in result.stdout


def test_a_method_in_a_crlf_file_keeps_its_class_indentation(tmp_path, scripted_model):
    path = tmp_path / "win.py"
    path.write_bytes(TWO.replace("\n", "\r\n").encode())
    result = run(
        str(path),
        "-f",
        "Rect.__init__",
        "-i",
        scripted(("self.w, self.h = w, h", "self.w = w\n    self.h = h")),  # as shown: dedented
        "--apply",
    )
    assert result.exit_code == 0, result.output
    expected = TWO.replace("        self.w, self.h = w, h\n", "        self.w = w\n        self.h = h\n")
    assert path.read_bytes() == expected.replace("\n", "\r\n").encode()


def test_generation_stops_early_when_the_model_goes_on_to_copy_another_definition(two):
    copy = "\n\n\nclass Rect:\n    def __init__(self, w, h):\n        self.w, self.h = w, h\n" * 3
    result = run(str(two), "-f", "total", "-i", scripted(("    return s", "    return sum(xs)" + copy)), "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["left_out"] == ["Rect"] and data["problem"] is None
    assert data["new_region"] == "def total(xs):\n    s = 0\n    for x in xs:\n        s = s + x\n    return sum(xs)\n"
    written = len(data["new_region"]) + len(copy)  # bytes (= tokens here) of the whole scripted answer
    assert data["stats"]["generated_tokens"] < written - len(copy) // 2, data["stats"]
    assert data["stats"]["stop_reason"] == "extra_definition"


def test_a_function_too_long_for_the_context_is_one_line_and_batch_goes_on(tmp_path, scripted_model, monkeypatch):
    monkeypatch.setenv("EDITSPEC_SCRIPTED_CTX", "4096")
    big = "def big(x):\n" + "".join(f"    x = x + {i}  # step {i}\n" for i in range(700)) + "    return x\n"
    (tmp_path / "big.py").write_text(big)
    (tmp_path / "small.py").write_text(TWO)
    one = run(str(tmp_path / "big.py"), "-f", "big", "-i", USE_SUM, "--apply")
    assert one.exit_code == EXIT_INPUT and "too long for the model's context" in one.output
    assert one.output.count("\n") <= 2 and "Traceback" not in one.output
    batch = CliRunner().invoke(main, ["batch", str(tmp_path), "-i", USE_SUM, "--apply", "-q",
                                      "--state", str(tmp_path / "s.json")])  # fmt: skip
    assert batch.exit_code == 0, batch.output
    assert "big: big is too long" in batch.output
    assert (tmp_path / "big.py").read_text() == big
    assert "return sum(xs)" in (tmp_path / "small.py").read_text()


# The coder model, asked for type hints, opens its answer with the import they need.
HINTS = scripted(("def __init__(self, w, h):", "from typing import Any\n\ndef __init__(self, w: Any, h: Any) -> None:"))


def test_imports_the_answer_opens_with_go_to_the_file_s_imports(two):
    """Not inside the class above the method (a method's body would not see them): after `import math`."""
    result = run(str(two), "-f", "Rect.__init__", "-i", HINTS, "--apply", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["imports"] == ["from typing import Any"]
    assert two.read_text() == TWO.replace("import math\n", "import math\nfrom typing import Any\n").replace(
        "def __init__(self, w, h):", "def __init__(self, w: Any, h: Any) -> None:"
    )


def test_a_wildcard_import_the_answer_adds_is_written_with_a_note(two):
    """Seen in a batch adding type hints to click's formatting.py: the coder opened an answer with `from typing import
    *`, and it went into the file's imports without a word (it can hide a name the file imports above it). Of a
    module whose names cannot be listed without running it, the star import is written with a note."""
    hinted = "from shapes_lib import *\n\ndef __init__(self, w: Unit, h: Unit) -> None:"
    star = scripted(("def __init__(self, w, h):", hinted))
    result = run(str(two), "-f", "Rect.__init__", "-i", star, "--apply", "--json")
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    assert said["imports"] == ["from shapes_lib import *"]
    assert "import math\nfrom shapes_lib import *\n" in two.read_text()
    (warning,) = said["warnings"]
    assert warning.startswith("the rewrite adds `from shapes_lib import *` to the file's imports: it binds every")
    plain = run(str(two), "-f", "Rect.__init__", "-i", HINTS, "--json")  # a named import: no such note
    assert plain.exit_code == 0 and json.loads(plain.stdout)["warnings"] == []


def test_a_standard_wildcard_import_becomes_the_names_the_code_reads_or_nothing(two):
    """Asked to add type hints, the coder opened three answers of four with `from typing import *`, `from math
    import *` and `from functools import *`, above code that needed none, or only `Any`: each went into the user's
    file. Of a standard module that can be listed, only the names the new code reads and nothing else binds are
    imported, by name; a star import that brings in none of them is left out."""
    stars = "from typing import *\nfrom math import *\nfrom functools import *\n\n"
    hinted = scripted(("def __init__(self, w, h):", stars + "def __init__(self, w: Any, h: Optional[float]) -> None:"))
    result = run(str(two), "-f", "Rect.__init__", "-i", hinted, "--apply", "--json")
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    assert said["imports"] == ["from typing import Any, Optional"] and said["warnings"] == []
    assert "import math\nfrom typing import Any, Optional\n" in two.read_text()
    two.write_text(TWO)
    none_needed = scripted(("def __init__(self, w, h):", stars + "def __init__(self, w: float, h: float) -> None:"))
    result = run(str(two), "-f", "Rect.__init__", "-i", none_needed, "--apply", "--json")
    said = json.loads(result.stdout)
    assert said["imports"] == [] and said["warnings"] == [] and "import *" not in two.read_text()
    # a name the file binds already is not imported again (`pi` here); one nothing binds stays undefined
    two.write_text(TWO.replace("import math\n", "import math\nfrom math import pi\n"))
    uses = scripted(("def __init__(self, w, h):", stars + "def __init__(self, w: float = pi, h: float = tau) -> None:"))
    said = json.loads(run(str(two), "-f", "Rect.__init__", "-i", uses, "--json").stdout)
    assert said["imports"] == ["from math import tau"] and said["undefined_names"] == []


def test_an_import_of_a_name_its_module_lacks_is_written_with_a_note(two):
    """Asked to add type hints to fnmatch, the coder changed `os.path.normcase(name)` to `normcase(name)` and wrote
    `from os import normcase`: os has no normcase (os.path has), and the module no longer imported."""
    short = scripted(
        ("def total(xs):", "from os import normcase\n\ndef total(xs):"), ("return s", "return normcase(s)")
    )
    result = run(str(two), "-f", "total", "-i", short, "--apply", "--json")
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    assert said["missing_imports"] == ["`normcase` from os (os.path has it)"]
    version = f"{sys.version_info.major}.{sys.version_info.minor}"
    assert said["warnings"] == [
        f"the rewrite imports `normcase` from os (os.path has it), which Python {version}'s module does not have: "
        "ImportError when the file is imported; import each from where it is defined"
    ]


def test_an_import_of_the_files_own_name_from_a_module_that_lacks_it_is_left_out(two):
    """Asked to add type hints to textwrap's `shorten`, the coder wrote `from typing import TextWrapper` above the
    file's own `class TextWrapper`: the module no longer imported. The import is left out, the rest kept."""
    own = scripted(("def total(xs):", "from typing import List, Rect\n\ndef total(xs: List[Rect]):"))
    result = run(str(two), "-f", "total", "-i", own, "--apply", "--json")
    assert result.exit_code == 0, result.output
    said = json.loads(result.stdout)
    assert said["imports_left_out"] == ["`Rect` from typing"] and said["missing_imports"] == []
    assert said["warnings"] == []
    assert two.read_text() == TWO.replace("import math\n", "import math\nfrom typing import List\n").replace(
        "def total(xs):", "def total(xs: List[Rect]):"
    )


def test_an_import_the_file_has_already_is_left_out(two):
    again = scripted(("def total(xs):", "import math\n\n\ndef total(xs):"), ("return s", "return math.fsum(xs)"))
    result = run(str(two), "-f", "total", "-i", again, "--apply")
    assert result.exit_code == 0, result.output
    assert two.read_text() == TWO.replace(
        "    s = 0\n    for x in xs:\n        s = s + x\n    return s",
        "    s = 0\n    for x in xs:\n        s = s + x\n    return math.fsum(xs)",
    )


@pytest.mark.parametrize(
    ("head", "expected_head"),
    [
        ("", "from typing import Any\n\n"),  # no imports: at the top, a blank line after
        ('"""Shapes."""\n\n', '"""Shapes."""\nfrom typing import Any\n\n'),  # after the module docstring
        ("#!/usr/bin/env python\n", "#!/usr/bin/env python\nfrom typing import Any\n\n"),  # after leading comments
    ],
)
def test_a_file_without_imports_gets_them_at_the_top(tmp_path, scripted_model, head, expected_head):
    body = TWO.removeprefix("import math\n\n\n")
    path = tmp_path / "shapes.py"
    path.write_bytes((head + body).replace("\n", "\r\n").encode())  # in a CRLF file, CRLF lines
    result = run(str(path), "-f", "Rect.__init__", "-i", HINTS, "--apply")
    assert result.exit_code == 0, result.output
    written = path.read_bytes().decode()
    assert "\r\n" in written and "\n" not in written.replace("\r\n", "")
    expected = expected_head + body.replace("def __init__(self, w, h):", "def __init__(self, w: Any, h: Any) -> None:")
    assert written.replace("\r\n", "\n") == expected


# Both functions of TWO at once: `total` (rewritten first, bottom-up) adds an import above `Rect`.
BOTH_HINTS = scripted(
    ("def total(xs):", "from typing import List\n\n\ndef total(xs: List[int]) -> int:"),
    ("def __init__(self, w, h):", "def __init__(self, w: int, h: int) -> None:"),
)
BOTH_HINTED = (
    TWO.replace("import math\n", "import math\nfrom typing import List\n")
    .replace("def total(xs):", "def total(xs: List[int]) -> int:")
    .replace("def __init__(self, w, h):", "def __init__(self, w: int, h: int) -> None:")
)


def test_several_functions_when_a_later_one_adds_imports_above_an_earlier_one(two):
    """The earlier function moved down by the import line: it is rewritten where it now is, not a line above."""
    result = run(str(two), "-f", "Rect.__init__", "-f", "total", "-i", BOTH_HINTS, "--apply")
    assert result.exit_code == 0, result.output
    assert two.read_text() == BOTH_HINTED


def test_batch_when_a_later_function_adds_imports_above_an_earlier_one(two, monkeypatch):
    monkeypatch.chdir(two.parent)
    result = CliRunner().invoke(main, ["batch", ".", "-i", BOTH_HINTS, "-q", "--apply", "--state", "../s.json"])
    assert result.exit_code == 0, result.output
    assert two.read_text() == BOTH_HINTED


def test_stdin_and_stdout_on_one_file_is_named_as_the_shell_s_doing(tmp_path):
    """`editspec rewrite - ... < f.py > f.py`: the shell empties f.py before editspec starts. Say so (exit 3)
    instead of "no definition named total", which sends the user looking for the wrong thing."""
    import subprocess
    import sys
    from pathlib import Path

    command = [str(Path(sys.executable).parent / "editspec"), "rewrite", "-", "--language", "python", "-f", "total"]
    command += ["-i", USE_SUM]
    path = tmp_path / "f.py"
    path.write_text(TWO)
    with open(path, "rb") as stdin, open(path, "wb") as stdout:  # as the shell opens them: the file is now empty
        done = subprocess.run(command, stdin=stdin, stdout=stdout, stderr=subprocess.PIPE, text=True, timeout=60)
    assert done.returncode == EXIT_INPUT, done.stderr
    assert "standard input and standard output are the same file" in done.stderr and str(path) in done.stderr
    path.write_text(TWO)
    with open(path, "rb") as stdin, open(tmp_path / "out.py", "wb") as stdout:  # two files: on to the model
        done = subprocess.run(
            [*command, "--model", str(tmp_path / "no-such-model.gguf")],
            stdin=stdin,
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
        )
    assert "same file" not in done.stderr and done.returncode == 4, done.stderr


def test_a_rewrite_whose_new_signature_the_file_s_calls_do_not_fit_is_written_with_a_note(tmp_path, scripted_model):
    """editspec rewrites one definition, not its callers: a new required parameter leaves the file's call to it
    short (TypeError when it runs), which the user is told (and --json says)."""
    path = tmp_path / "called.py"
    path.write_text(TWO + "\n\nprint(total([1, 2]))\n")
    start = scripted(("def total(xs):", "def total(xs, start):"))
    result = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", start, "--apply"])
    assert result.exit_code == 0, result.output
    assert "def total(xs, start):" in path.read_text()
    assert (
        "note: after this rewrite of total, the file calls its own functions with arguments they do not take "
        "(line 16: total(...) gets no `start`)" in " ".join(result.stderr.split())
    )
    # and callers in other files, which no check can see, may be short too
    assert (
        "note: the new total adds required `start`: calls to it that do not pass a new required one no longer fit; "
        "check its callers, here and in other files" in " ".join(result.stderr.split())
    )
    defaulted = scripted(("def total(xs, start):", "def total(xs, start=0):"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", defaulted, "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["bad_calls"] == [] and json.loads(as_json.stdout)["parameter_changes"] == []
    renamed = scripted(("def total(xs, start):", "def total(values, start):"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", renamed, "--json"])
    assert json.loads(as_json.stdout)["parameter_changes"] == ["renames `xs` to `values`"]
    assert json.loads(as_json.stdout)["renamed_to"] is None


def test_a_rewrite_that_renames_the_function_is_written_with_a_note(tmp_path, scripted_model):
    """Asked to rename variables, the coder renamed `total_area` itself: every use of the old name breaks, in this
    file and in others, and no other check names them (they are outside the rewritten code), so the user is told."""
    path = tmp_path / "shapes.py"
    path.write_text(TWO)
    renamed = scripted(("def total(xs):", "def sum_all(xs):"))
    result = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", renamed, "--apply"])
    assert result.exit_code == 0, result.output
    assert "def sum_all(xs):" in path.read_text()
    assert (
        "note: the rewrite renames total to sum_all: every use of total now names nothing, in any other file that "
        "uses it (this file has none); rename them too, or ask again without renaming it"
        in " ".join(result.stderr.split())
    )
    # Uses in the file are named by line, in the file as written (after an import the answer brought in); a
    # comment or a string that says the name is not a use.
    path.write_text(TWO + "\n\n# total of two\nprint(total([1, 2]), 'total')\nfirst = total\n")
    renamed = scripted(("def total(xs):", "import os\n\n\ndef sum_all(xs):"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", renamed, "--json"])
    found = json.loads(as_json.stdout)
    assert found["renamed_to"] == "sum_all" and found["imports"] == ["import os"]
    assert found["renamed_uses"] == [18, 19]  # `import os` is line 2: the file's 17 and 18 move down
    assert "in this file at lines 18, 19 and in any other file that uses it" in " ".join(as_json.stderr.split())
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", scripted(("xs", "ys")), "--json"])
    assert json.loads(as_json.stdout)["renamed_to"] is None and json.loads(as_json.stdout)["renamed_uses"] == []


def test_a_rewrite_that_reads_a_name_nothing_defines_is_written_with_a_note(two):
    """The answer parses, so it is written; but `clamp` is defined nowhere: NameError when it runs, which the user
    is told (and --json says). A name the file imports gets no note."""
    undefined = scripted(("    s = 0\n    for x in xs:\n        s = s + x\n    return s", "    return clamp(sum(xs))"))
    result = CliRunner().invoke(main, ["rewrite", str(two), "-f", "total", "-i", undefined, "--apply"])
    assert result.exit_code == 0, result.output
    assert "return clamp(sum(xs))" in two.read_text()
    assert "note: the new total uses `clamp`, which the file does not define or import" in result.stderr
    two.write_text(TWO)  # --quiet hides progress, not the notes (as batch mode's --quiet)
    quiet = run(str(two), "-f", "total", "-i", undefined, "--apply")
    assert quiet.stderr.startswith("note: the new total uses `clamp`"), quiet.stderr
    as_json = CliRunner().invoke(
        main, ["rewrite", str(two), "-f", "total", "-i", scripted(("clamp", "math.fsum")), "--json"]
    )
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["undefined_names"] == []


@pytest.mark.skipif(not EAGER_ANNOTATIONS, reason="from Python 3.14 on, annotations are read when asked for")
def test_a_method_annotated_with_its_own_class_is_written_with_a_note(two):
    """`Rect` inside class Rect's body is not a name yet when the `def` runs: NameError on import, which the user is
    told (and --json says); quoted, it is not."""
    hinted = scripted(("def __init__(self, w, h):", "def __init__(self, w, h, like: Rect = None):"))
    result = CliRunner().invoke(main, ["rewrite", str(two), "-f", "Rect.__init__", "-i", hinted, "--apply"])
    assert result.exit_code == 0, result.output
    assert "like: Rect = None" in two.read_text()
    said = " ".join(result.stderr.split())
    assert "note: the new Rect.__init__'s signature reads `Rect` when the `def` runs, before the file defines" in said
    two.write_text(TWO)
    quoted = scripted(("def __init__(self, w, h):", 'def __init__(self, w, h, like: "Rect" = None):'))
    as_json = CliRunner().invoke(main, ["rewrite", str(two), "-f", "Rect.__init__", "-i", quoted, "--json"])
    assert as_json.exit_code == 0, as_json.output
    assert json.loads(as_json.stdout)["early_names"] == []


OVERLOADED = (
    "from typing import overload\n\n\n"
    "class Store:\n"
    "    @overload\n"
    "    def get(self, key: int) -> str: ...\n"
    "    @overload\n"
    "    def get(self, key: str) -> str: ...\n"
    "    def get(self, key):\n"
    "        return str(key)\n\n"
    "    def size(self):\n"
    "        return 1\n"
)


@pytest.mark.parametrize("name,suffix", [("Store.get", ".py"), ("find", ".ts")])
def test_overloads_are_rewritten_with_their_implementation(tmp_path, scripted_model, name, suffix):
    """`--function` names the overloads and the implementation as one: a new overload, written beside the others,
    is part of the rewrite (not a second definition of its name, refused)."""
    from tests.test_locate import SAMPLES

    path = tmp_path / f"f{suffix}"
    text = OVERLOADED if suffix == ".py" else (SAMPLES / "users.ts").read_text()
    # (the method as the model sees it, dedented; then as the file has it)
    old, new = (
        ("def get(self, key):", "@overload\ndef get(self, key: bytes) -> str: ...\ndef get(self, key):")
        if suffix == ".py"
        else ("find(key: number", "find(user: User): User | undefined;\nfind(key: number")
    )
    indent = "    " if suffix == ".py" else "  "
    path.write_text(text)
    result = run(str(path), "-f", name, "-i", scripted((old, new)), "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace(indent + old, indent + new.replace("\n", "\n" + indent))


def test_a_class_field_holding_a_function_is_rewritten_alone(tmp_path, scripted_model):
    text = (
        "class Button extends Component {\n"
        "  handleClick = (event) => {\n"
        "    this.setState({ clicked: true });\n"
        "  };\n\n"
        "  render() {\n"
        "    return null;\n"
        "  }\n"
        "}\n"
    )
    path = tmp_path / "button.js"
    path.write_text(text)
    add = scripted(("this.setState", "console.log(event.type);\n  this.setState"))
    result = run(str(path), "-f", "handleClick", "-i", add, "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace("    this.setState", "    console.log(event.type);\n    this.setState")


@pytest.mark.parametrize(
    "name,old,new",
    [
        ("ledger.rb", "note: note }", "note: note.to_s }"),
        ("Ledger.php", "'note' => $note]", "'note' => $note ?? '']"),
        ("Ledger.kt", "entries.add(amount)", "entries.add(amount * 1)"),
        ("ledger.lua", "note = note }", "note = note or '' }"),
        ("Ledger.swift", "entries.append(amount)", "entries.append(amount * 1)"),
        ("deploy.sh", 'echo "[$(date +%T)] $*"', "printf '%s\\n' \"[$(date +%T)] $*\""),
    ],
)
def test_a_method_in_ruby_php_kotlin_lua_swift_or_bash_is_rewritten_in_place(tmp_path, scripted_model, name, old, new):
    from tests.test_locate import SAMPLES

    path = tmp_path / name
    text = (SAMPLES / name).read_text()
    path.write_text(text)
    target = "log" if name.endswith(".sh") else "Ledger.add"
    result = run(str(path), "-f", target, "-i", scripted((old, new)), "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace(old, new)
    broken = run(str(path), "-f", target, "-i", scripted((new, new + " (")), "--apply")
    assert broken.exit_code == EXIT_UNPARSABLE and "not written" in broken.output  # checked in every language
    assert path.read_text() == text.replace(old, new)


def test_a_property_is_rewritten_with_its_setter(tmp_path, scripted_model):
    """`--function Box.width` is the property's getter and setter together: a change to the setter is written (it
    was two definitions of one name, and an answer holding both was refused as the same name twice)."""
    text = (
        "class Box:\n"
        "    @property\n"
        "    def width(self):\n"
        "        return self._w\n\n"
        "    @width.setter\n"
        "    def width(self, value):\n"
        "        self._w = value\n"
    )
    path = tmp_path / "box.py"
    path.write_text(text)
    old, new = "    self._w = value", "    self._w = max(0, value)"
    result = run(str(path), "-f", "Box.width", "-i", scripted((old, new)), "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace(old, new)


@pytest.mark.parametrize("line_end", ["\n", "\r\n"])
def test_a_method_s_blank_lines_are_shown_to_the_model_and_kept(tmp_path, scripted_model, line_end):
    """A blank line inside an indented definition (no spaces on it) was dropped from the code the model saw, so a
    rewrite that copied the method wrote it back without its blank lines."""
    text = (
        "class Box:\n"
        "    def area(self):\n"
        "        w = self.w\n"
        "\n"
        "        h = self.h\n"
        "  \n"  # shorter than the method's indentation: blank all the same
        "        return w * h\n"
    ).replace("\n", line_end)
    path = tmp_path / "box.py"
    path.write_bytes(text.encode())
    result = run(str(path), "-f", "Box.area", "-i", scripted(("return w * h", "return h * w")), "--apply")
    assert result.exit_code == 0, result.output
    expected = text.replace("return w * h", "return h * w").replace("  " + line_end, line_end)
    assert path.read_bytes().decode() == expected


@pytest.mark.parametrize(
    "name,text,target,kept,dropped",
    [
        (  # a function value inside its parent's one line
            "total.js",
            "export function total(items) { const price = (it) => it.cost * it.qty; return items.map(price).reduce"
            "((a, b) => a + b, 0); }\n\nexport function count(items) {\n  return items.length;\n}\n",
            "price",
            ("it.cost", "it.price"),
            (("export function total(items) { ", ""), (" return items.map(price).reduce((a, b) => a + b, 0); }", "")),
        ),
        (  # minified: two functions on one line
            "min.js",
            "function a(x){return x+1} function b(y){return y*2}\nconsole.log(a(1), b(2));\n",
            "b",
            ("y*2", "y*3"),
            (("function a(x){return x+1} ", ""),),
        ),
        (  # a method on its class's one line
            "point.rb",
            "class Point; def x; @x; end; end\n",
            "x",
            ("@x;", "@x || 0;"),
            (("class Point; ", ""), ("; end\n", "\n")),
        ),
        (  # code, not a definition: a call after the closing brace
            "call.js",
            "function a(x) {\n  return x + 1\n} a(1);\nconsole.log(a(2));\n",
            "a",
            ("x + 1", "x + 2"),
            ((" a(1);", ""),),
        ),
        ("let.js", "let n = 0; function a(x) { return x + n }\n", "a", ("x + n", "n + x"), (("let n = 0; ", ""),)),
        (
            "v.go",
            "package m\n\nfunc a() int { return 1 }; var v = 2\n",
            "a",
            ("return 1", "return 3"),
            (("; var v = 2", ""),),
        ),
        (  # the typedef's names
            "p.c",
            "typedef struct P {\n  int x;\n} P, *PP;\n\nint get(PP p) { return p->x; }\n",
            "P",
            ("int x;", "long x;"),
            (("typedef ", ""), ("} P, *PP;", "};")),
        ),
    ],
)
def test_an_answer_that_leaves_out_what_shares_the_target_s_line_is_refused(
    tmp_path, scripted_model, name, text, target, kept, dropped
):
    """A rewrite replaces the target's whole lines; when another definition (its parent, a neighbour) or other code
    shares them, the code shown holds it too, and an answer with the target alone would delete it from the file:
    refused, nothing written. Kept, the answer is written, on a line of its own too."""
    path = tmp_path / name
    path.write_text(text)
    refused = run(str(path), "-f", target, "-i", scripted(*dropped), "--apply", "--json")
    assert refused.exit_code == EXIT_UNPARSABLE, refused.output
    said = json.loads(refused.stdout)
    assert "which shares a line with" in said["problem"]
    assert said["dropped"] or said["dropped_code"] in {"a(1);", "let n = 0;", "; var v = 2", "typedef … P, *PP;"}
    assert path.read_text() == text
    written = run(str(path), "-f", target, "-i", scripted(kept), "--apply", "--json")
    assert written.exit_code == 0, written.output
    assert path.read_text() == text.replace(*kept)
    assert json.loads(written.stdout)["helpers"] == []  # what shares the line is not a new helper
    if name == "call.js":  # the same code laid out otherwise is kept
        path.write_text(text)
        assert run(str(path), "-f", "a", "-i", scripted(("} a(1);", "}\na(1);")), "--apply").exit_code == 0
        assert path.read_text() == text.replace("} a(1);", "}\na(1);")


def test_a_python_rewrite_that_python_would_not_compile_is_refused_though_tree_sitter_parses_it(
    tmp_path, scripted_model
):
    """tree-sitter's Python grammar takes more than Python does: a block mixing tabs and spaces inconsistently (a line
    copied with its tabs, a new one with spaces), a Python 2 print statement. Such an answer was written, exit 0,
    and the module no longer imported. A file Python does not compile in the first place (Python 2 here) is not
    held to it."""
    text = 'PATTERN = "\\d+"\n\n\nclass A:\n\tdef f(self, x):\n\t\tif x:\n\t\t\treturn 1\n\t\treturn 2\n'
    path = tmp_path / "t.py"
    path.write_text(text)
    for answer, said in [
        (("\treturn 2", "\tprint(x)\n    return 2"), "line 9: unindent does not match any outer indentation level"),
        (("\treturn 2", "\tprint 'x'\n\treturn 2"), "line 8: Missing parentheses in call to 'print'"),
    ]:
        refused = run(str(path), "-f", "A.f", "-i", scripted(answer), "--apply", "--json")
        assert refused.exit_code == EXIT_UNPARSABLE, refused.output
        problem = json.loads(refused.stdout)["problem"]
        assert (
            problem.startswith("the rewritten file does not compile in Python where the old one did")
            and said in problem
        )
        assert path.read_text() == text
    written = run(str(path), "-f", "A.f", "-i", scripted(("\treturn 2", "\tprint(x)\n\treturn 2")), "--apply")
    assert written.exit_code == 0, written.output
    python2 = "def f(x):\n    return x\n\n\ndef g():\n    print 'g'\n"
    path.write_text(python2)
    kept = run(str(path), "-f", "f", "-i", scripted(("return x", "return x + 1")), "--apply")
    assert kept.exit_code == 0, kept.output
    assert path.read_text() == python2.replace("return x", "return x + 1")


def test_a_parent_answered_with_only_the_function_it_holds_is_refused_not_taken_for_a_rename(tmp_path, scripted_model):
    """`total` holds `price` on its one line: an answer with `price` alone was taken as `total` renamed to `price`,
    deleting `total`; `price` is part of the file (inside the target, as a nested function on a line of its own
    always was), so the answer writes one of the file's other definitions instead of the target: refused."""
    text = "export function total(items) { const price = (it) => it.cost; return items.map(price).length; }\n"
    path = tmp_path / "total.js"
    path.write_text(text)
    alone = scripted(("export function total(items) { ", ""), (" return items.map(price).length; }", ""))
    result = run(str(path), "-f", "total", "-i", alone, "--apply")
    assert result.exit_code == EXIT_UNPARSABLE and "also price" in result.output, result.output
    assert path.read_text() == text
    renamed = scripted(("function total", "function sum"))  # a rename of total itself is still one
    assert run(str(path), "-f", "total", "-i", renamed, "--apply").exit_code == 0
    assert path.read_text() == text.replace("function total", "function sum")


MIXED_JS = (
    "class Cart {\n  add(item) {\n\tthis.items.push(item);\n  }\n\n  total() {\n\tlet sum = 0;\n\treturn sum;\n  }\n}\n"
)


def test_an_answer_from_column_0_keeps_the_header_s_indentation_where_the_region_mixes_tabs_and_spaces(
    tmp_path, scripted_model
):
    """The method's lines share no indentation (its header in spaces, its body in tabs), so the model sees the header
    indented; an answer written from column 0 went into the file there, the method at the class's column."""
    path = tmp_path / "cart.js"
    path.write_text(MIXED_JS)
    body = "  total() {\n\tlet sum = 0;\n\treturn sum;\n  }"
    result = run(str(path), "-f", "Cart.total", "-i", scripted((body, "total() {\n  return `a\nb`;\n}")), "--apply")
    assert result.exit_code == 0, result.output
    # The template literal's second line is the string's own text: left as written.
    assert path.read_text() == MIXED_JS.replace(body, "  total() {\n    return `a\nb`;\n  }")


def test_characters_python_alone_breaks_lines_at_stay_inside_their_line(tmp_path, scripted_model):
    """A form feed, `\\x1c` or `\\u2028` inside a method's string is its data, not a line break: the method's lines
    were split at them (`str.splitlines`), so they seemed to share no indentation, the header showed indented, and
    the coder's answer from column 0 got the header's indentation after each of them too: `'a\\x0c    b'`."""
    path = tmp_path / "odd.py"
    odd = "'a\x0cb\x1cc\u2028d'"
    text = f"class A:\n    def f(self):\n        s = {odd}\n        return s\n"
    path.write_text(text)
    # (the code as it was shown before, answered from column 0; the code as it is shown now)
    was = (f"    def f(self):\n        s = {odd}\n        return s", f"def f(self):\n    s = {odd}\n    return s + s")
    result = run(str(path), "-f", "A.f", "-i", scripted(("\n    return s", "\n    return s + s"), was), "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace("return s", "return s + s")


@pytest.mark.parametrize(
    ("name", "shown", "code", "expected"),
    [
        # The model kept the shown indentation, or the header was shown at column 0: the answer as it is.
        ("x.js", "  f() {\n\tx;\n  }\n", "  f() {\n    y;\n  }\n", "  f() {\n    y;\n  }\n"),
        ("x.js", "f() {\n  x;\n}\n", "f() {\n  y;\n}\n", "f() {\n  y;\n}\n"),
        # A Python string's lines further left: the header shows indented; its lines keep their column.
        (
            "x.py",
            '    def f(self):\n        s = """\nhello\n"""\n        return s\n',
            'def f(self):\n    text = """\nhello\n"""\n    return text\n',
            '    def f(self):\n        text = """\nhello\n"""\n        return text\n',
        ),
        # A docstring the model wrote from column 0 too follows the code (its text stayed left of its quotes).
        (
            "x.py",
            '    def f(self):\n        s = """\nhello\n"""\n        return s\n',
            'def f(self):\n    """Doc.\n\n    More.\n    """\n    return """\nhello\n"""\n',
            '    def f(self):\n        """Doc.\n\n        More.\n        """\n        return """\nhello\n"""\n',
        ),
        # The header in spaces, the answer in tabs: a prefix would move the tab stops; left as written.
        ("x.py", "  def f(x):\n\treturn x\n", "def f(x):\n\treturn x\n", "def f(x):\n\treturn x\n"),
        # A heredoc's body starts its first line: that line is the string's too.
        (
            "x.rb",
            "  def f\n    <<EOS\nhello\nEOS\n  end\n",
            "def f\n  <<EOS\nhi\nEOS\nend\n",
            "  def f\n    <<EOS\nhi\nEOS\n  end\n",
        ),
    ],
)
def test_restore_header_indent(name, shown, code, expected):
    from editspec.locate import language_for
    from editspec.rewrite import restore_header_indent

    assert restore_header_indent(shown, code, language_for(name)) == expected


def test_an_answer_in_spaces_is_indented_with_tabs_in_a_file_indented_with_tabs(tmp_path, scripted_model):
    """The coder model writes Python in four spaces a level whatever it is shown: the method came back as
    `\\t    if not xs:` among the file's tab lines."""
    path = tmp_path / "tabs.py"
    path.write_text('class A:\n\tdef f(self, xs):\n\t\t"""Sum.\n\t\t"""\n\t\treturn sum(xs)\n')
    shown = 'def f(self, xs):\n\t"""Sum.\n\t"""\n\treturn sum(xs)'
    answer = 'def f(self, xs):\n    """Sum.\n  two spaces: the docstring\'s own\n    """\n'
    answer += "    if not xs:\n        return 0\n    return sum(xs)"
    result = run(str(path), "-f", "A.f", "-i", scripted((shown, answer)), "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == (
        # (the docstring's lines get back the tab every line of the method was shown without, and follow the code:
        # its closing quotes a level in, in a tab; two spaces are less than a level, and stay)
        'class A:\n\tdef f(self, xs):\n\t\t"""Sum.\n\t  two spaces: the docstring\'s own\n\t\t"""\n'
        "\t\tif not xs:\n\t\t\treturn 0\n\t\treturn sum(xs)\n"
    )


@pytest.mark.parametrize(
    ("name", "shown", "code", "expected"),
    [
        # Two spaces a level; a line past a whole level keeps the rest as alignment.
        ("x.js", "f() {\n\tg(1,\n\t\t2);\n}\n", "f() {\n  g(1,\n     2);\n}\n", "f() {\n\tg(1,\n\t\t 2);\n}\n"),
        # The file indents by a tab and then spaces: its way, left alone.
        ("x.c", "int f() {\n\tif (x)\n\t    y();\n}\n", "int f() {\n    if (x)\n        z();\n}\n", None),
        # The code shown in spaces, or not indented: left alone.
        ("x.py", "def f():\n    return 1\n", "def f():\n    return 2\n", None),
        ("x.py", "X = 1\n", "X = 2\n", None),
        # Lines copied with their tabs beside new ones in spaces: which spaces make a tab is a guess, left alone.
        ("x.py", "def f(x):\n\tif x:\n\t\treturn 1\n", "def f(x):\n\tif x:\n\t\treturn 1\n    return 2\n", None),
        # A block comment's lines follow the code, a space past it as written: ` * b` stays under its `/*` whatever
        # a tab's width (until the forty-fourth session it kept five spaces under `\t/*`).
        (
            "x.c",
            "int f() {\n\treturn 1;\n}\n",
            "int f() {\n    /* a\n     * b */\n    return 2;\n}\n",
            "int f() {\n\t/* a\n\t * b */\n\treturn 2;\n}\n",
        ),
        # ... but not a comment's line the file aligns in spaces, copied as it is (the Linux headers' way).
        (
            "x.c",
            "int f() {\n\t/* a\n           b */\n\treturn 1;\n}\n",
            "int f() {\n    /* a\n           b */\n    return 2;\n}\n",
            "int f() {\n\t/* a\n           b */\n\treturn 2;\n}\n",
        ),
        # A Python docstring's lines follow the code (the coder's `Args:` was left of its quotes where a tab is 8
        # columns wide); a string that is data keeps its spaces; a docstring's line already in a tab is left alone.
        (
            "x.py",
            "def f(x):\n\treturn x\n",
            'def f(x):\n    """\n    Args:\n        x: a value.\n    """\n'
            '    s = """\n    data\n    """\n    return x\n',
            'def f(x):\n\t"""\n\tArgs:\n\t\tx: a value.\n\t"""\n\ts = """\n    data\n    """\n\treturn x\n',
        ),
        (
            "x.py",
            "class A:\n\tdef f(self):\n\t\treturn 1\n",
            'class A:\n    """A.\n\n    More.\n\t  tabbed\n    """\n    def f(self):\n        return 2\n',
            'class A:\n\t"""A.\n\n\tMore.\n\t  tabbed\n\t"""\n\tdef f(self):\n\t\treturn 2\n',
        ),
    ],
)
def test_follow_tabs(name, shown, code, expected):
    from editspec.locate import language_for
    from editspec.rewrite import follow_tabs

    assert follow_tabs(shown, code, language_for(name)) == (code if expected is None else expected)


def test_a_helper_written_before_the_function_is_not_taken_for_its_new_signature(tmp_path, scripted_model):
    """Asked to split a function, the coder wrote `def line_value(item)` above `def total(items)`: the parameters
    check compared the old total with the helper and told the user total renamed `items` to `item`."""
    path = tmp_path / "split.py"
    path.write_text(TWO + "\n\nprint(total([1, 2]))\n")
    split = scripted(("def total(xs):", "def add(s, x):\n    return s + x\n\n\ndef total(xs):"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", split, "--json"])
    assert as_json.exit_code == 0, as_json.output
    answer = json.loads(as_json.stdout)
    assert answer["helpers"] == ["add"] and answer["parameter_changes"] == [] and answer["warnings"] == []
    # the function's own change is still seen with a helper before it
    split_and_rename = scripted(("def total(xs):", "def add(s, x):\n    return s + x\n\n\ndef total(values):"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", split_and_rename, "--json"])
    assert json.loads(as_json.stdout)["parameter_changes"] == ["renames `xs` to `values`"]


def test_a_function_made_async_is_written_with_a_note_naming_the_calls_that_do_not_await_it(tmp_path, scripted_model):
    """Asked to "Make it async.", the coder made `total` `async def`, and the file's `print(total(items))` then
    printed a coroutine: the note names that line; the other way round, the calls that await it."""
    path = tmp_path / "calls.py"
    path.write_text(TWO + "\n\nprint(total([1, 2]))\n\n\nasync def main():\n    return await total([3])\n")
    made_async = scripted(("def total(xs):", "async def total(xs):"))
    result = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", made_async, "--apply"])
    assert result.exit_code == 0, result.output
    assert (
        "note: the new total is `async def`, and was not: a call that does not await it gets a coroutine, not its "
        "result, and the function does not run (this file does at line 16); await its calls"
        in " ".join(result.stderr.split())
    )
    assert "async def total(xs):" in path.read_text()
    made_sync = scripted(("async def total(xs):", "def total(xs):"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", made_sync, "--json"])
    answer = json.loads(as_json.stdout)
    assert answer["async_change"] == "sync" and answer["async_calls"] == [20]
    assert "is no longer `async def`: a call that awaits it, or hands it to asyncio, fails" in answer["warnings"][0]
    unchanged = scripted(("s = 0", "s = 0  # the sum"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", unchanged, "--json"])
    answer = json.loads(as_json.stdout)
    assert answer["async_change"] == "" and answer["async_calls"] == [] and answer["warnings"] == []


def test_a_helper_the_answer_writes_beside_the_function_gets_the_file_s_spacing(tmp_path, scripted_model):
    """Asked to split `total`, the coder wrote its helper one blank line above it, in a file that keeps two between
    functions (PEP 8; linters flag the one). Between methods, the class's one."""
    path = tmp_path / "split.py"
    path.write_text(TWO)
    split = scripted(("def total(xs):", "def add(s, x):\n    return s + x\ndef total(xs):"))
    assert run(str(path), "-f", "total", "-i", split, "--apply").exit_code == 0
    assert (
        "        self.w, self.h = w, h\n\n\ndef add(s, x):\n    return s + x\n\n\ndef total(xs):\n" in path.read_text()
    )
    path.write_text(TWO)
    after = scripted(("    return s", "    return s\n\n\n\n\ndef add(s, x):\n    return s + x"))
    assert run(str(path), "-f", "total", "-i", after, "--apply").exit_code == 0
    assert path.read_text().endswith("    return s\n\n\ndef add(s, x):\n    return s + x\n")
    rect = "class Rect:\n    def __init__(self, w, h):\n        self.w, self.h = w, h\n\n"
    rect += "    def area(self):\n        return 1\n"
    path.write_text(rect)
    method = scripted(("def area(self):", "def _check(self):\n    pass\n\n\n\ndef area(self):"))
    assert run(str(path), "-f", "Rect.area", "-i", method, "--apply").exit_code == 0
    assert path.read_text().endswith(
        "= w, h\n\n    def _check(self):\n        pass\n\n    def area(self):\n        return 1\n"
    )


def test_a_typescript_function_made_async_is_written_with_a_note(tmp_path, scripted_model):
    """Asked to "Make it async.", the coder made `total` async and the file's `total: ${total(items)}` then held
    "[object Promise]": neither the parser nor TypeScript's compiler says a word."""
    path = tmp_path / "cart.ts"
    path.write_text(
        "export function total(xs: number[]): number {\n  return xs.length;\n}\n\n"
        "export function report(xs: number[]): string {\n  return `total: ${total(xs)}`;\n}\n"
    )
    made_async = scripted(("export function total(xs: number[]): number", "export async function total(xs: number[])"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", made_async, "--json"])
    assert as_json.exit_code == 0, as_json.output
    answer = json.loads(as_json.stdout)
    assert answer["async_change"] == "async" and answer["async_calls"] == [6]
    assert answer["warnings"] == [
        "the new total is `async`, and was not: a call that does not await it gets a Promise, not its result (this "
        "file does at line 6); await its calls, here and in other files, or ask again without making it async"
    ]


def test_code_the_answer_puts_beside_the_function_is_written_with_a_note(tmp_path, scripted_model):
    """Asked to add logging, the coder wrote `logging.basicConfig(level=logging.WARNING)` above the function: it
    runs when the module is imported and sets up the logging of every program that imports it, without a word."""
    path = tmp_path / "loose.py"
    path.write_text(TWO)
    logged = scripted(("def total(xs):", "logging.basicConfig(level=logging.WARNING)\n\n\ndef total(xs):"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "total", "-i", logged, "--json"])
    assert as_json.exit_code == 0, as_json.output
    answer = json.loads(as_json.stdout)
    assert answer["loose_code"] == ["line 9: `logging.basicConfig(level=logging.WARNING)`"]
    assert (
        "the rewrite adds code beside total that runs when the module is loaded, not when total is called (line 9: "
        "`logging.basicConfig(level=logging.WARNING)`): check that it belongs there" in answer["warnings"]
    )
    # a method's: when its class is defined; a helper, an import, a string alone: none
    path.write_text("class A:\n    def f(self):\n        return 1\n")
    cached = scripted(("def f(self):", "cache = {}\n\ndef f(self):"))
    answer = json.loads(CliRunner().invoke(main, ["rewrite", str(path), "-f", "A.f", "-i", cached, "--json"]).stdout)
    assert answer["loose_code"] == ["line 2: `cache = {}`"] and "when the class is defined" in answer["warnings"][0]
    helper = scripted(("def f(self):", 'import os\n"""A note."""\ndef g(self):\n    return 2\n\ndef f(self):'))
    answer = json.loads(CliRunner().invoke(main, ["rewrite", str(path), "-f", "A.f", "-i", helper, "--json"]).stdout)
    assert answer["loose_code"] == [] and answer["helpers"] == ["g"], answer


def test_a_function_declaration_made_a_const_is_written_with_a_note_naming_the_uses_above_it(tmp_path, scripted_model):
    """Asked to "Convert it to an arrow function", the coder wrote `const formatTotal = (items) => {`, and the
    file's `console.log(formatTotal(rows))` above it then threw ReferenceError: a function declaration is hoisted,
    a `const` is not. The note names the line, with --quiet too (it hides progress, not the notes)."""
    path = tmp_path / "report.js"
    text = (
        "const rows = [1, 2];\n\nconsole.log(`total: ${formatTotal(rows)}`);\n\n"
        "function formatTotal(items) {\n  return items.length;\n}\n\nmodule.exports = { formatTotal };\n"
    )
    path.write_text(text)
    to_arrow = scripted(
        ("function formatTotal(items) {", "const formatTotal = (items) => {"),
        ("  return items.length;\n}", "  return items.length;\n};"),
    )
    result = run(str(path), "-f", "formatTotal", "-i", to_arrow, "--apply")
    assert result.exit_code == 0, result.output
    assert "const formatTotal = (items) => {" in path.read_text()
    assert (
        "note: the new formatTotal is a `const`, and was a function declaration, which is hoisted: this file uses it "
        "before its definition runs (at line 3), and such a use now throws ReferenceError (Cannot access "
        "'formatTotal' before initialization); keep it a `function` declaration, or define it above its first use"
        in " ".join(result.stderr.split())
    )
    # the uses below it, or in a function that runs later, are fine
    path.write_text(
        text.replace("console.log(`total: ${formatTotal(rows)}`);", "const show = () => formatTotal(rows);")
    )
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "formatTotal", "-i", to_arrow, "--json"])
    answer = json.loads(as_json.stdout)
    assert answer["unhoisted"] == "const" and answer["early_uses"] == [] and answer["warnings"] == []


def test_a_constructor_made_an_arrow_function_is_written_with_a_note(tmp_path, scripted_model):
    """Asked to "Convert it to an arrow function", the coder turned `function Point(x, y) { this.x = x; ...}` into
    `const Point = (x, y) => {`: `new Point(0, 0)` then throws TypeError and `this` is not the new object."""
    path = tmp_path / "point.js"
    path.write_text("function Point(x, y) {\n  this.x = x;\n  this.y = y;\n}\n\nconst origin = new Point(0, 0);\n")
    to_arrow = scripted(
        ("function Point(x, y) {", "const Point = (x, y) => {"), ("  this.y = y;\n}", "  this.y = y;\n};")
    )
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "Point", "-i", to_arrow, "--json"])
    assert as_json.exit_code == 0, as_json.output
    answer = json.loads(as_json.stdout)
    assert answer["arrow_misuses"] == ["line 6: `new Point(...)`", "line 2: `this`", "line 3: `this`"]
    assert answer["warnings"] == [
        "the new Point is an arrow function, and was not: an arrow function is not a constructor (`new` throws "
        "TypeError) and takes `this` and `arguments` from where it is defined, not from its call (line 6: `new "
        "Point(...)`; line 2: `this`; line 3: `this`); keep it a `function`, or change those lines"
    ]


def test_a_function_made_a_generator_is_written_with_a_note_naming_the_uses_of_a_list(tmp_path, scripted_model):
    """Asked to "Make it a generator", the coder replaced `result.append(n)` and `return result` with `yield n`,
    and the file's `found = evens(numbers)` then `if not found:` never held and `len(found)` raised TypeError."""
    path = tmp_path / "evens.py"
    path.write_text(
        "def evens(numbers):\n    result = []\n    for n in numbers:\n        if n % 2 == 0:\n"
        "            result.append(n)\n    return result\n\n\n"
        "def report(numbers):\n    found = evens(numbers)\n    if not found:\n        return 'none'\n"
        "    return f'{len(found)} even'\n"
    )
    to_generator = scripted(
        ("    result = []\n", ""), ("            result.append(n)\n    return result", "            yield n")
    )
    result = run(str(path), "-f", "evens", "-i", to_generator, "--apply")
    assert result.exit_code == 0, result.output
    assert "            yield n\n" in path.read_text()
    assert (
        "note: the new evens is a generator, and was not: its calls get a generator, not a list, which has no len(), "
        "cannot be indexed, is always true, is used up by one loop and runs nothing until iterated (this file uses "
        "one so at lines 9, 11); wrap such calls in list(), here and in other files" in " ".join(result.stderr.split())
    )
    back = scripted(("        if n % 2 == 0:\n            yield n", "        pass\n    return []"))
    as_json = CliRunner().invoke(main, ["rewrite", str(path), "-f", "evens", "-i", back, "--json"])
    answer = json.loads(as_json.stdout)
    assert answer["generator_change"] == "ordinary" and answer["generator_uses"] == []
    assert answer["warnings"][0].startswith("the new evens is no longer a generator: next() or .send() on its result")


def test_a_require_the_file_has_already_is_not_written_twice(tmp_path, scripted_model):
    """An answer opening with `const fs = require('fs');` in a CommonJS file that has `const fs = require("fs");`
    was written above the function as it came: binding `fs` twice is a SyntaxError, and the file no longer loaded
    (exit 0, no word: the parser takes it). A require is an import now: one the file has is left out, a new one
    goes after the file's."""
    path = tmp_path / "config.js"
    text = (
        'const fs = require("fs");\nconst path = require("path");\n\n'
        'function readConfig(dir) {\n  return JSON.parse(fs.readFileSync(path.join(dir, "c.json"), "utf8"));\n}\n'
    )
    path.write_text(text)
    again = scripted(
        (
            "function readConfig(dir) {",
            "const fs = require('fs');\nconst os = require('os');\n\nfunction readConfig(dir) {",
        ),
        ('"utf8"));', '"utf8")) || {};'),
    )
    result = run(str(path), "-f", "readConfig", "-i", again, "--apply")
    assert result.exit_code == 0, result.output
    assert path.read_text() == text.replace(
        'require("path");\n', "require(\"path\");\nconst os = require('os');\n"
    ).replace('"utf8"));', '"utf8")) || {};')


def test_a_javascript_rewrite_that_declares_a_name_twice_is_refused_though_it_parses(tmp_path, scripted_model):
    """An answer opening with `const TAX_RATE = 0.25;` above the function, in a file that has `const TAX_RATE =
    0.2;`: tree-sitter parses it, JavaScript will not load it. It was written, exit 0."""
    path = tmp_path / "cart.js"
    text = "const TAX_RATE = 0.2;\n\nfunction total(xs) {\n  return xs.length * (1 + TAX_RATE);\n}\n"
    path.write_text(text)
    again = scripted(("function total(xs) {", "const TAX_RATE = 0.25;\n\nfunction total(xs) {"))
    refused = run(str(path), "-f", "total", "-i", again, "--apply", "--json")
    assert refused.exit_code == EXIT_UNPARSABLE, refused.output
    answer = json.loads(refused.stdout)
    assert answer["redeclared"] == {"TAX_RATE": 3}
    assert answer["problem"] == (
        "the rewritten file declares `TAX_RATE` twice in one scope (again at line 3): JavaScript will not load it "
        "(SyntaxError: Identifier 'TAX_RATE' has already been declared)"
    )
    assert path.read_text() == text
    # a file that declared a name twice already is not the rewrite's doing
    path.write_text("let n;\nlet n;\n" + text)
    kept = run(str(path), "-f", "total", "-i", scripted(("xs.length", "xs.length + 0")), "--apply")
    assert kept.exit_code == 0, kept.output


def test_a_method_made_a_property_is_written_with_a_note_naming_its_calls(tmp_path, scripted_model):
    """Asked to "Make it a property", the coder put `@property` above `def area(self)`, and the file's
    `self.area()` then raised TypeError: 'float' object is not callable."""
    path = tmp_path / "circle.py"
    path.write_text(
        "class Circle:\n    def __init__(self, r):\n        self.r = r\n\n"
        "    def area(self):\n        return 3.14 * self.r\n\n"
        "    def describe(self):\n        return f'{self.area():.2f}'\n"
    )
    made = scripted(("def area(self):", "@property\ndef area(self):"))
    result = run(str(path), "-f", "Circle.area", "-i", made, "--apply")
    assert result.exit_code == 0, result.output
    assert "    @property\n    def area(self):" in path.read_text()
    assert (
        "note: the new Circle.area is a property, and was a method: `.area()` now calls the value it returns, and "
        "fails unless that is callable (this file does at line 10); drop the parentheses, here and in other files"
        in " ".join(result.stderr.split())
    )
