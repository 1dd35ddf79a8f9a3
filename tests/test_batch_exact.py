"""Batch mode's promises on the scripted model (tests/scripted.py), where every rewrite is known exactly:
the patch, interruption and resume (in apply and patch mode, after a finished file was edited), --fresh."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from editspec.cli import main
from tests.raw_lsp import ROOT, scripted

SAMPLES = ROOT / "samples"
WIDEN = scripted(("return ", "return  "))  # valid in every language here, and visible in every function


def make_tree(tmp_path: Path, names=("shapes.py", "stack.go", "users.ts")) -> Path:
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in names:
        shutil.copy(SAMPLES / name, tree / name)
    return tree


def widened(text: str) -> str:
    return text.replace("return ", "return  ")


def test_the_patch_is_exactly_the_rewrites_and_applies(tmp_path, scripted_model, monkeypatch):
    tree = make_tree(tmp_path)
    before = {p.name: p.read_text() for p in tree.iterdir()}
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["batch", "tree", "-i", WIDEN, "-q", "--state", str(tmp_path / "s.json")])
    assert result.exit_code == 0, result.output
    assert {p.name: p.read_text() for p in tree.iterdir()} == before  # patch mode writes nothing
    patch = result.stdout
    assert patch.count("+++ b/tree/") == 3
    applied = subprocess.run(["git", "apply", "-"], input=patch, text=True, cwd=tmp_path, capture_output=True)
    assert applied.returncode == 0, applied.stderr
    for name, text in before.items():
        assert (tree / name).read_text() == widened(text), name


def test_glob_repeated_takes_the_files_any_pattern_matches(tmp_path, scripted_model):
    """`--glob '*.py' --glob '*.go'`: both kinds of file, not only the last pattern's (click keeps the last of an
    option given twice unless it is declared repeatable)."""
    tree = make_tree(tmp_path)
    args = ["batch", str(tree), "-i", WIDEN, "-q", "--state", str(tmp_path / "s.json")]
    result = CliRunner().invoke(main, [*args, "--glob", "*.py", "--glob", "*.go"])
    assert result.exit_code == 0, result.output
    assert sorted(line.split("/")[-1] for line in result.stdout.splitlines() if line.startswith("+++ ")) == [
        "shapes.py",
        "stack.go",
    ]
    assert "2 files: 2 rewritten" in result.stderr


def test_a_function_that_reads_a_name_nothing_defines_is_rewritten_with_a_note(tmp_path, scripted_model):
    tree = make_tree(tmp_path, ("shapes.py",))
    undefined = scripted(("return total", "return rounded(total)"))
    args = ["batch", str(tree), "-i", undefined, "-q", "--apply", "--state", str(tmp_path / "s.json")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "return rounded(total)" in (tree / "shapes.py").read_text()
    note = next(line for line in result.stderr.splitlines() if line.strip().startswith("note:"))
    assert note.strip().startswith("note: ") and "shapes.py: total_area: the new total_area uses `rounded`" in note


def batch_one_js(tmp_path: Path, text: str | None, instruction: str, *extra: str):
    """`editspec batch` over a tree of one file, m.js, holding `text` (None: as the last call left it): the result,
    the file, and the file's outcome as `--json` gives it."""
    path = tmp_path / "tree" / "m.js"
    if text is not None:
        path.parent.mkdir(exist_ok=True)
        path.write_text(text)
    args = ["batch", str(path.parent), "-i", instruction, "--json", str(tmp_path / "r.json"), *extra]
    result = CliRunner().invoke(main, [*args, "-q", "--state", str(tmp_path / "s.json")])
    assert result.exit_code == 0, result.output
    (outcome,) = json.loads((tmp_path / "r.json").read_text())["files"]
    return result, path, outcome


def test_a_function_sharing_a_line_with_a_rewritten_one_is_named_as_not_rewritten(tmp_path, scripted_model):
    """`a` and `b` on one line: a rewrite replaces whole lines, so only `a` is rewritten (its prompt asks for the rest
    of its line as it is); `b` was left out silently, as if done."""
    text = "function a(x){return x+1} function b(y){return y*2}\n"
    result, path, outcome = batch_one_js(tmp_path, text, scripted(("x+1", "x+10")), "--apply")
    assert path.read_text() == "function a(x){return x+10} function b(y){return y*2}\n"
    note = next(line for line in result.stderr.splitlines() if line.strip().startswith("note:"))
    assert "m.js: b: not rewritten: it shares a line with a" in note
    assert f"(rewrite it alone: editspec rewrite {path} -f b)" in note
    assert [name for name, _ in outcome["notes"]] == ["b"]


def test_of_two_functions_of_one_name_on_one_line_only_the_first_is_rewritten(tmp_path, scripted_model):
    """Minified code: `m` twice on one line. The plan rewrites the first and notes the second as not rewritten; the
    rewrite found both by name and line, and rewrote the line once for each (here `x+1` became `x+100`), every one a
    model run (a minified file of 400 functions took 17 minutes to fail 400 times)."""
    text = "function m(x){return x+1} function m(y){return y*2}\n"
    result, path, outcome = batch_one_js(tmp_path, text, scripted(("x+1", "x+10")), "--apply")
    assert path.read_text() == "function m(x){return x+10} function m(y){return y*2}\n"
    assert outcome["rewritten"] == 1 and outcome["failures"] == []
    assert outcome["notes"] == [["m", "not rewritten: it shares a line with m, whose rewrite replaces that line "
                                f"(rewrite it alone: editspec rewrite {path} --line 1:27)"]]  # fmt: skip
    assert "1 of 1 function done, 1 rewritten, 0 failed" in result.stderr


def test_a_minified_line_s_summary_stays_short(tmp_path, scripted_model):
    """30 functions on one line: the summary lists 20 notes and says how many more there are; a failure quotes the
    code its answer did not keep by its start and end, not the whole line."""
    text = "".join(f"function f{i}(a){{return a+{i + 100}}};" for i in range(30)) + "\n"
    result, _, outcome = batch_one_js(tmp_path, text, scripted(("a+100", "a+1")))
    notes = [line for line in result.stderr.splitlines() if line.startswith("  note: ")]
    assert len(notes) == 20 and "  … and 9 more notes (--json FILE lists them all)" in result.stderr.splitlines()
    assert len(outcome["notes"]) == 29
    result, _, _ = batch_one_js(tmp_path, None, scripted(("a+100", "a+1"), ("a+120", "a+2")), "--fresh")
    (failure,) = [line for line in result.stderr.splitlines() if line.startswith("  failed: ")]
    assert "the answer does not keep `;function f1(a){return a+101};function f2(a){return" in failure
    assert " … 29(a){return a+129};`, which shares a line with f0" in failure and len(failure) < 400, failure


def test_a_function_whose_calls_no_longer_fit_is_rewritten_with_a_note(tmp_path, scripted_model):
    tree = make_tree(tmp_path, ("shapes.py",))
    shapes = tree / "shapes.py"
    shapes.write_text(shapes.read_text() + "\n\nprint(total_area([]))\n")
    narrowed = scripted(("def total_area(shapes):", "def total_area(shapes, unit):"))
    state = str(tmp_path / "s.json")
    result = CliRunner().invoke(main, ["batch", str(tree), "-i", narrowed, "-q", "--apply", "--state", state])
    assert result.exit_code == 0, result.output
    assert "def total_area(shapes, unit):" in shapes.read_text()
    notes = " ".join(result.stderr.split())
    assert "shapes.py: total_area: after this rewrite of total_area, the file calls its own functions" in notes
    assert "total_area(...) gets no `unit`" in notes


def scripted_batch(tree: Path, state: Path, *extra: str, delay: float = 0.0):
    command = [sys.executable, "-m", "tests.scripted_cli", "batch", str(tree), "-q", "--state", str(state)]
    env = dict(os.environ, EDITSPEC_SCRIPTED_DELAY=str(delay))
    return command + ["-i", WIDEN, *extra], env


def interrupt_after_first_file(tree: Path, state: Path, *extra: str, signum: int = signal.SIGINT) -> None:
    command, env = scripted_batch(tree, state, *extra, delay=0.05)
    # A shell's background job (`cmd &` without job control) ignores SIGINT, and a child inherits that: Python
    # then never raises KeyboardInterrupt. The run must see Ctrl-C as a user's terminal sends it.
    proc = subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    deadline = time.time() + 60
    while time.time() < deadline and proc.poll() is None:
        if state.exists() and json.loads(state.read_text())["files"]:
            break
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(signum)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "Run the same command again to resume" in err


def resume(tree: Path, state: Path, *extra: str) -> subprocess.CompletedProcess:
    command, env = scripted_batch(tree, state, *extra)
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["Ctrl-C", "kill"])
def test_interrupted_apply_never_half_writes_and_resumes(tmp_path, signum):
    tree = make_tree(tmp_path)
    originals = {p.name: p.read_text() for p in tree.iterdir()}
    state = tmp_path / "state.json"
    interrupt_after_first_file(tree, state, "--apply", signum=signum)
    done = [name for name, text in originals.items() if (tree / name).read_text() == widened(text)]
    untouched = [name for name, text in originals.items() if (tree / name).read_text() == text]
    assert len(done) >= 1 and sorted(done + untouched) == sorted(originals), "a file is half-written"
    resumed = resume(tree, state, "--apply")
    assert resumed.returncode == 0, resumed.stderr
    assert f"resuming: {len(done)} file{'s' * (len(done) != 1)} already done" in resumed.stderr
    for name, text in originals.items():
        assert (tree / name).read_text() == widened(text), f"{name}: redone or not done"
    assert not state.exists()
    assert not [p.name for p in tree.iterdir() if p.name.endswith(".editspec")], "a temporary file was left"


def test_resume_redoes_a_finished_file_that_was_edited_since(tmp_path):
    tree = make_tree(tmp_path)
    originals = {p.name: p.read_text() for p in tree.iterdir()}
    state = tmp_path / "state.json"
    interrupt_after_first_file(tree, state, "--apply")
    (done,) = [name for name, text in originals.items() if (tree / name).read_text() == widened(text)][:1]
    edited = (tree / done).read_text() + "\n"
    (tree / done).write_text(edited)
    assert resume(tree, state, "--apply").returncode == 0
    assert (tree / done).read_text() == widened(edited)  # done again, on the edited text
    for name, text in originals.items():
        if name != done:
            assert (tree / name).read_text() == widened(text)


def test_fresh_starts_over(tmp_path):
    tree = make_tree(tmp_path)
    originals = {p.name: p.read_text() for p in tree.iterdir()}
    state = tmp_path / "state.json"
    interrupt_after_first_file(tree, state, "--apply")
    done = [name for name, text in originals.items() if (tree / name).read_text() == widened(text)]
    fresh = resume(tree, state, "--apply", "--fresh")
    assert fresh.returncode == 0 and "resuming" not in fresh.stderr
    for name, text in originals.items():
        assert (tree / name).read_text() == (widened(widened(text)) if name in done else widened(text)), name


def test_interrupted_patch_mode_resumes_into_one_whole_patch(tmp_path):
    tree = make_tree(tmp_path)
    originals = {p.name: p.read_text() for p in tree.iterdir()}
    state = tmp_path / "state.json"
    patch_file = tmp_path / "out.diff"
    interrupt_after_first_file(tree, state, "--patch", str(patch_file))
    assert {p.name: p.read_text() for p in tree.iterdir()} == originals
    resumed = resume(tree, state, "--patch", str(patch_file))
    assert resumed.returncode == 0 and "resuming: 1 file already done" in resumed.stderr
    # The tree is outside the current directory: its paths are absolute without the leading /, applied from /.
    applied = subprocess.run(["git", "apply", str(patch_file)], cwd="/", capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    for name, text in originals.items():
        assert (tree / name).read_text() == widened(text), name


def test_no_speculation_reports_no_speed_up(tmp_path, scripted_model):
    tree = make_tree(tmp_path)
    args = ["batch", str(tree), "-i", WIDEN, "-q", "--state", str(tmp_path / "s.json")]
    plain = CliRunner().invoke(main, [*args, "--no-speculation"])
    assert plain.exit_code == 0 and "3 rewritten" in plain.stderr and "speed-up" not in plain.stderr


def test_apply_writes_a_linked_file_once_through_its_link_and_leaves_out_a_read_only_one(
    tmp_path, scripted_model, monkeypatch
):
    tree = make_tree(tmp_path, ("shapes.py", "stack.go", "users.ts"))
    (tree / "alias.py").symlink_to(tree / "shapes.py")  # the same file twice: rewritten once, by its own name
    elsewhere = tmp_path / "linked.go"
    shutil.copy(tree / "stack.go", elsewhere)
    named = tmp_path / "named.go"
    named.symlink_to(elsewhere)  # a link named on the command line: its target is written, the link kept
    before = {p: p.read_text() for p in (tree / "shapes.py", tree / "users.ts", elsewhere)}
    real_access = os.access

    def access(path, mode):  # tests may run as root, whom no mode bit stops: users.ts is read-only to this user
        return not (mode == os.W_OK and str(path).endswith(".ts")) and real_access(path, mode)

    monkeypatch.setattr(os, "access", access)
    args = ["batch", str(tree), str(named), "-i", WIDEN, "--apply", "--state", str(tmp_path / "s.json")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "3 files: 3 rewritten" in result.stderr, result.stderr
    assert f"left out: {tree / 'users.ts'}" in result.stderr and "read-only" in result.stderr
    assert (tree / "shapes.py").read_text() == widened(before[tree / "shapes.py"])  # once, not twice
    assert (tree / "alias.py").is_symlink() and named.is_symlink()
    assert elsewhere.read_text() == widened(before[elsewhere])
    assert (tree / "users.ts").read_text() == before[tree / "users.ts"]


def interrupt_part_way(tree: Path, state: Path, *extra: str) -> int:
    """Start a batch, interrupt it (Ctrl-C) once a file is part-way through: some of its functions done, the file
    not. Returns how many functions of it the state keeps."""
    command, env = scripted_batch(tree, state, *extra, delay=0.05)
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # fmt: skip
    deadline, kept = time.time() + 60, 0
    while time.time() < deadline and proc.poll() is None and not kept:
        with contextlib.suppress(OSError, ValueError):
            partial = json.loads(state.read_text()).get("partial", {})
            kept = sum(len(p["planned"]) - len(p["pending"]) for p in partial.values())
        time.sleep(0.02)
    assert proc.poll() is None, "the run finished before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    said = " ".join(err.split())
    # (A function may finish between the look at the state and the key press: then more are kept.)
    found = re.search(r"interrupted after 0 of 1 file and (\d+) functions? of 1 more \(kept for the rerun\)", said)
    assert found and int(found[1]) >= kept, said
    assert f"(and {found[1]} in files part-way through)" in said  # the summary counts them too
    return int(found[1])


@pytest.mark.parametrize("workers", [(), ("--workers", "1")], ids=["in-process", "worker-process"])
def test_an_interrupted_file_goes_on_from_its_last_function(tmp_path, workers):
    # One file of five methods and functions: interrupted after some, the rerun does only the others. Done again,
    # a function would be widened twice ("return   ").
    tree = make_tree(tmp_path, names=("shapes.py",))
    original = (tree / "shapes.py").read_text()
    state = tmp_path / "state.json"
    report = tmp_path / "report.json"
    kept = interrupt_part_way(tree, state, "--apply", "--json", str(report), *workers)
    assert (tree / "shapes.py").read_text() == original, "a part-way file was written"
    (part_way,) = json.loads(report.read_text())["part_way"]
    assert part_way["path"].endswith("shapes.py") and (part_way["functions"], part_way["done"]) == (5, kept)
    resumed = resume(tree, state, "--apply", *workers)
    assert resumed.returncode == 0, resumed.stderr
    said = " ".join(resumed.stderr.split())
    assert f"resuming: 0 files already done, and {kept} function{'s' * (kept != 1)} of 1 file part-way through" in said
    assert (tree / "shapes.py").read_text() == widened(original)
    assert not state.exists()


def test_a_part_way_file_edited_since_starts_over(tmp_path):
    tree = make_tree(tmp_path, names=("shapes.py",))
    state = tmp_path / "state.json"
    interrupt_part_way(tree, state, "--apply")
    edited = (tree / "shapes.py").read_text() + "\n"
    (tree / "shapes.py").write_text(edited)
    resumed = resume(tree, state, "--apply")
    assert resumed.returncode == 0 and "part-way" not in resumed.stderr, resumed.stderr
    assert (tree / "shapes.py").read_text() == widened(edited)
