"""`editspec batch`: which files and functions, patch or apply, interruption and resume."""

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from click.testing import CliRunner

from editspec.batch import FileJob, collect_files, rewrite_file, select_functions
from editspec.cli import EXIT_INPUT, main
from editspec.decoding import DecodeOptions, Decoder
from editspec.locate import definitions, language_for
from editspec.rewrite import Rewriter
from tests.raw_lsp import ROOT, scripted

SAMPLES = Path(__file__).resolve().parents[1] / "samples"


def sha(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_collect_respects_gitignore_globs_and_links(tmp_path):
    (tmp_path / "src").mkdir()
    shutil.copy(SAMPLES / "shapes.py", tmp_path / "src" / "shapes.py")
    shutil.copy(SAMPLES / "stack.go", tmp_path / "stack.go")
    (tmp_path / "build").mkdir()
    shutil.copy(SAMPLES / "shapes.py", tmp_path / "build" / "generated.py")
    (tmp_path / ".gitignore").write_text("build/\n*.tmp.py\n")
    (tmp_path / "scratch.tmp.py").write_text("def f():\n    pass\n")
    (tmp_path / "notes.txt").write_text("not code")
    outside = tmp_path.parent / f"{tmp_path.name}-outside.py"
    outside.write_text("def secret():\n    pass\n")
    (tmp_path / "link.py").symlink_to(outside)
    (tmp_path / "inner.py").symlink_to(tmp_path / "src" / "shapes.py")  # a link inside the tree is fine...
    (tmp_path / "other.py").symlink_to(tmp_path / "build" / "generated.py")
    found = sorted(p.relative_to(tmp_path).as_posix() for p in collect_files([tmp_path]))
    assert found == ["other.py", "src/shapes.py", "stack.go"]  # ... but a file is taken once, by its own name
    assert collect_files([tmp_path / "src", tmp_path / "src" / "shapes.py"]) == [tmp_path / "src" / "shapes.py"]
    assert [p.name for p in collect_files([tmp_path], ["*.go"])] == ["stack.go"]
    # Several patterns: a file any of them matches, by its path under the root or by its name.
    both = collect_files([tmp_path], ["*.go", "src/*.py"])
    assert sorted(p.relative_to(tmp_path).as_posix() for p in both) == ["src/shapes.py", "stack.go"]


def test_collect_asks_git_inside_a_work_tree(tmp_path, monkeypatch):
    """`editspec batch src/` honours the repository root's .gitignore, .git/info/exclude and the global
    excludes file, as git does (it asks git)."""
    repo = tmp_path / "repo"
    (repo / "src" / "gen").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    (repo / ".gitignore").write_text("src/gen/\n")
    (repo / ".git" / "info" / "exclude").write_text("local_*.py\n")
    (tmp_path / "global-ignore").write_text("*.bak.py\n")
    (tmp_path / "gitconfig").write_text(f"[core]\n\texcludesFile = {tmp_path / 'global-ignore'}\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(tmp_path / "gitconfig"))
    for name in ("a.py", "gen/b.py", "local_c.py", "d.bak.py"):
        (repo / "src" / name).write_text("def f():\n    pass\n")
    assert [p.name for p in collect_files([repo / "src"])] == ["a.py"]
    assert sorted(p.name for p in collect_files([repo])) == ["a.py"]
    # A file named on the command line is taken even when ignored.
    assert collect_files([repo / "src" / "local_c.py"]) == [repo / "src" / "local_c.py"]


def test_select_functions_only_and_never_overlapping():
    source = b"class A:\n    def f(self):\n        def inner():\n            pass\n\n    def g(self):\n        pass\n"
    spec = language_for("x.py")
    left_out = []
    chosen = select_functions(definitions(source, spec), "*", left_out)
    assert [d.name for d in chosen] == ["A.f", "A.g"]
    assert left_out == []  # `inner` is rewritten with f (see test_batch_exact for one sharing a line)
    assert [d.name for d in select_functions(definitions(source, spec), "g")] == ["A.g"]
    # Several patterns: what any of them matches, each once, in the file's order.
    assert [d.name for d in select_functions(definitions(source, spec), ["A.g", "f", "g*"])] == ["A.f", "A.g"]
    # In a language's own notation for members, as `--function` takes them.
    assert [d.name for d in select_functions(definitions(source, spec), ["A::g"])] == ["A.g"]
    assert [d.name for d in select_functions(definitions(source, spec), "A#*")] == ["A.f", "A.g"]
    # A nested function also by the names of the functions around it, as `--function` takes it.
    assert [d.name for d in select_functions(definitions(source, spec), "A.f.inner")] == ["A.inner"]
    assert [d.name for d in select_functions(definitions(source, spec), "A.f.*")] == ["A.inner"]


def copy_tree(tmp_path):
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("shapes.py", "stack.go"):
        shutil.copy(SAMPLES / name, tree / name)
    return tree


def test_patch_mode_changes_nothing(tmp_path):
    tree = copy_tree(tmp_path)
    before = {p.name: p.read_bytes() for p in tree.iterdir()}
    patch = tmp_path / "out.diff"
    result = CliRunner().invoke(
        main,
        [
            "batch",
            str(tree),
            "-i",
            "Add a short comment at the top of the body.",
            "--select",
            "Sum",
            "--patch",
            str(patch),
            "--state",
            str(tmp_path / "s.json"),
            "--max-tokens",
            "120",
            "-q",
        ],
    )
    assert result.exit_code == 0, result.output
    assert {p.name: p.read_bytes() for p in tree.iterdir()} == before
    assert "1 file:" in result.output and "1 of 1 function done" in result.output
    # What the patch holds, exactly: tests/test_batch_exact.py (the scripted model).
    assert not (tmp_path / "s.json").exists()  # a finished run leaves no state behind


def test_no_matching_functions_is_an_error(tmp_path):
    tree = copy_tree(tmp_path)
    result = CliRunner().invoke(main, ["batch", str(tree), "-i", "x", "--select", "nothing_like_this"])
    assert result.exit_code == EXIT_INPUT and "no functions matching 'nothing_like_this' in" in result.output
    both = CliRunner().invoke(main, ["batch", str(tree), "-i", "x", "--select", "nope", "--select", "neither"])
    assert both.exit_code == EXIT_INPUT and "no functions matching 'nope' or 'neither'" in both.output


def test_a_file_changed_on_disk_is_skipped_and_left_alone(tmp_path, backend):
    tree = copy_tree(tmp_path)
    path = tree / "stack.go"
    spec = language_for(path)
    targets = select_functions(definitions(path.read_bytes(), spec), "Sum")
    rewriter = Rewriter(Decoder(backend, DecodeOptions(max_tokens=80)))
    original = rewriter.rewrite

    def rewrite_while_someone_edits(*args, **kwargs):
        result = original(*args, **kwargs)
        path.write_text(path.read_text() + "\n// edited meanwhile\n")
        object.__setattr__(result, "new_text", result.new_text + "// rewritten\n")
        return result

    rewriter.rewrite = rewrite_while_someone_edits
    outcome = rewrite_file(rewriter, FileJob(path, spec, targets), "Add a comment.", True, "stack.go")
    assert outcome.status == "skipped" and "changed on disk" in outcome.reason
    assert path.read_text().endswith("// edited meanwhile\n")


def test_batch_patches_apply_with_git_from_inside_and_outside(tmp_path, monkeypatch):
    from tests.test_rewrite_cli import CODE  # a file whose `total` even the tiny model rewrites with sum()

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "shapes.py").write_text(CODE)
    args = ["batch", "-i", "Use the built-in sum.", "--select", "total", "--max-tokens", "120", "-q"]
    monkeypatch.chdir(tmp_path)
    inside = CliRunner().invoke(main, [*args, "tree", "--state", str(tmp_path / "a.json")])
    assert inside.exit_code == 0, inside.output
    patch = inside.stdout
    assert patch.startswith("--- a/tree/shapes.py\n+++ b/tree/shapes.py\n"), patch  # a rewrite, not an empty patch
    check = subprocess.run(["git", "apply", "--check", "-"], input=patch, text=True, cwd=tmp_path, capture_output=True)
    assert check.returncode == 0, check.stderr
    monkeypatch.chdir(SAMPLES)  # the tree is outside the current directory: absolute paths without the leading /
    outside = CliRunner().invoke(main, [*args, str(tree), "--state", str(tmp_path / "b.json")])
    assert outside.exit_code == 0 and outside.stdout.startswith(f"--- a/{str(tree).lstrip('/')}/shapes.py\n")
    check = subprocess.run(
        ["git", "apply", "--check", "-"], input=outside.stdout, text=True, cwd="/", capture_output=True
    )
    assert check.returncode == 0, check.stderr
    assert outside.stdout == patch.replace("a/tree/", f"a/{str(tree).lstrip('/')}/").replace(
        "b/tree/", f"b/{str(tree).lstrip('/')}/"
    )


def test_a_function_sharing_a_line_is_named_with_how_to_rewrite_it_alone(tmp_path):
    """By its name where it is the file's only one of that name, else by the line and column where its code starts
    (`--line 3` alone takes the line's first definition, and minified code has one name many times on one line):
    the advice, run, rewrites that function."""
    source = b"function a(){return 1} function b(){return 2}\nfunction m(){return 3} function m(){return 4}\n"
    source += b"function c(){return 5} /* \xc3\xa9 */ function m(){return 6}\n"
    left_out = []
    select_functions(definitions(source, language_for("x.js")), "*", left_out, "src/my file.js", source)
    advice = [why.split("(")[-1] for _, why in left_out]
    assert advice == [
        "rewrite it alone: editspec rewrite 'src/my file.js' -f b)",
        "rewrite it alone: editspec rewrite 'src/my file.js' --line 2:24)",
        "rewrite it alone: editspec rewrite 'src/my file.js' --line 3:32)",
    ]
    path = tmp_path / "m.js"
    path.write_bytes(source)
    args = ["-m", "tests.scripted_cli", "rewrite", str(path), "-i", scripted(("return 6", "return 60"))]
    run = subprocess.run([sys.executable, *args, "--line", "3:32"], capture_output=True, text=True, cwd=ROOT)
    assert "+function c(){return 5} /* é */ function m(){return 60}" in run.stdout, run.stderr
