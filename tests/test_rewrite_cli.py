"""`editspec rewrite` end to end on the bundled model, its error cases, and the work outside the model."""

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from editspec.cli import EXIT_INPUT, EXIT_MODEL, main
from editspec.decoding import DecodeOptions, Decoder
from editspec.locate import definitions, find_by_name, language_for, parse, reparse_after_replace, syntax_errors
from editspec.rewrite import Rewriter, SourceFile, apply_edits, text_edits

CODE = (
    "import math\n\n\n"
    "class Shape:\n"
    "    def area(self, r):\n"
    "        result = math.pi * r * r\n"
    "        return result\n\n\n"
    "def total(values):\n"
    "    s = 0\n"
    "    for v in values:\n"
    "        s = s + v\n"
    "    return s\n"
)


def run(*args, input=None):
    return CliRunner().invoke(main, ["rewrite", *args, "--max-tokens", "120", "-q"], input=input)


@pytest.fixture
def source(tmp_path):
    path = tmp_path / "geometry.py"
    path.write_bytes(CODE.encode())
    os.chmod(path, 0o640)
    return path


def test_prints_a_diff_and_leaves_the_file(source):
    result = run(str(source), "-f", "total", "-i", "Use the built-in sum.")
    assert result.exit_code == 0, result.output
    name = str(source).lstrip("/")  # outside the current directory: the absolute path without its leading /
    assert result.output.startswith(f"--- a/{name}\n+++ b/{name}\n@@")
    assert "-    for v in values:" in result.output
    assert source.read_bytes() == CODE.encode()


def git_apply_check(patch: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "apply", "--check", "-v", "-"], input=patch, text=True, cwd=cwd, capture_output=True)


def test_patches_apply_with_git_and_patch_for_absolute_and_relative_paths(source, monkeypatch):
    absolute = run(str(source), "-f", "total", "-i", "Use the built-in sum.")
    assert absolute.exit_code == 0 and absolute.output.startswith("--- a/")
    checked = git_apply_check(absolute.output, "/")
    assert checked.returncode == 0, checked.stderr
    dry = subprocess.run(
        ["patch", "-p1", "--dry-run", "-d", "/"], input=absolute.output, text=True, capture_output=True
    )
    assert dry.returncode == 0, dry.stdout + dry.stderr
    monkeypatch.chdir(source.parent)
    for given in ("geometry.py", "./geometry.py", str(source)):  # inside the current directory: relative headers
        relative = run(given, "-f", "total", "-i", "Use the built-in sum.")
        assert relative.output.startswith("--- a/geometry.py\n+++ b/geometry.py\n"), relative.output
        checked = git_apply_check(relative.output, source.parent)
        assert checked.returncode == 0, checked.stderr


def test_apply_writes_atomically_and_keeps_the_mode(source):
    result = run(str(source), "--line", "11", "-i", "Use the built-in sum.", "--apply")
    assert result.exit_code == 0, result.output
    new = source.read_text()
    assert new != CODE and new.startswith("import math\n\n\nclass Shape:\n    def area(self, r):\n")
    assert "def total" in new and syntax_errors(new.encode(), language_for(source)) == []
    assert oct(os.stat(source).st_mode & 0o777) == "0o640"
    assert [p.name for p in source.parent.iterdir()] == ["geometry.py"]  # no temporary file left


def test_json_fields_are_consistent(source):
    result = run(str(source), "-f", "Shape.area", "-i", "Return the expression directly.", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["target"] == {"name": "Shape.area", "kind": "function_definition", "start_line": 5, "end_line": 7}
    s = data["stats"]
    decode_rounds = [r for r in data["rounds"] if not r["opening"]]  # the opening shares the prefill's pass
    assert s["generated_tokens"] >= 1 and s["target_passes"] == len(decode_rounds) + 1
    assert s["accepted_tokens"] <= s["drafted_tokens"]
    assert s["accepted_tokens"] == sum(r["accepted"] for r in data["rounds"])
    edits = data["edits"]
    rebuilt = CODE
    for e in sorted(edits, key=lambda e: e["start"], reverse=True):
        rebuilt = rebuilt[: e["start"]] + e["new_text"] + rebuilt[e["end"] :]
    assert rebuilt.endswith(CODE[CODE.index("\n\n\ndef total") :])  # nothing outside the method changed
    assert data["changed"] == (rebuilt != CODE) and (data["diff"] != "") == data["changed"]
    assert {p["origin"] for p in data["pieces"]} <= {"copied", "drafted", "target"}


ERRORS = [
    (["missing.py", "-f", "total", "-i", "x"], "no such file"),
    (["{dir}", "-f", "total", "-i", "x"], "is a directory"),
    (["{file}", "-f", "nope", "-i", "x"], "no function, method or class named 'nope'"),
    (["{file}", "-f", "total", "-i", "   "], "instruction is empty"),
    (["{file}", "-l", "2", "-i", "x"], "no function, method or class there; the nearest: "),
    (["{file}", "-l", "500", "-i", "x"], "past the end"),
    (["{file}", "-i", "x"], "exactly one of --function"),
    (["{file}", "-f", "total", "-i", "x", "--language", "cobol"], "unknown language"),
    (["{binary}", "-f", "total", "-i", "x"], "binary"),
    (["{latin1}", "-l", "1", "-i", "x"], "not UTF-8"),
    (["{txt}", "-l", "1", "-i", "x"], "--language"),
    (["{twice}", "-f", "f", "-i", "x"], "2 definitions match 'f'"),
]


def test_the_next_rewrite_process_reads_only_what_changed(source):
    """Prompt states stay on disk between `editspec rewrite` runs: the same rewrite again re-reads only the
    prompt's last token, another instruction little more than the instruction; `--prefix-cache-mb 0` keeps and
    reuses nothing."""

    def stats(instruction, *extra):
        result = run(str(source), "-f", "total", "-i", instruction, "--json", *extra)
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["stats"]

    first = stats("Use the built-in sum.")
    again = stats("Use the built-in sum.")
    assert again["prompt_tokens"] == first["prompt_tokens"]
    assert again["reused_prompt_tokens"] == again["prompt_tokens"] - 1
    other = stats("Add type hints.")
    assert 0.6 * other["prompt_tokens"] < other["reused_prompt_tokens"] < other["prompt_tokens"] - 5
    kept = Path(os.environ["XDG_CACHE_HOME"]) / "editspec" / "prompts"
    assert list(kept.glob("*/*.kv"))
    assert stats("Use the built-in sum.", "--prefix-cache-mb", "0")["reused_prompt_tokens"] == 0


@pytest.mark.parametrize("args,message", ERRORS)
def test_bad_input_is_one_clear_message_and_nothing_changes(tmp_path, source, args, message):
    files = {
        "dir": tmp_path,
        "file": source,
        "binary": tmp_path / "b.py",
        "latin1": tmp_path / "l.py",
        "txt": tmp_path / "notes.txt",
        "twice": tmp_path / "t.py",
    }
    files["binary"].write_bytes(b"\x00\x01def f(): pass\n")
    files["latin1"].write_bytes("x = 'caf\xe9'\n".encode("latin-1"))
    files["txt"].write_text("def f(): pass\n")
    files["twice"].write_text("def f():\n    return 1\n\n\ndef f():\n    return 2\n")
    before = {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()}
    result = run(*[a.format(**files) for a in args])
    assert result.exit_code == EXIT_INPUT, result.output
    assert message in result.output and "Traceback" not in result.output
    assert {p: p.read_bytes() for p in tmp_path.iterdir() if p.is_file()} == before


def test_unloadable_model(source, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    result = run(str(source), "-f", "total", "-i", "x", "--model", str(bad))
    assert result.exit_code == EXIT_MODEL and "could not load" in result.output
    assert source.read_bytes() == CODE.encode()


def test_text_edits_are_small_and_exact():
    old = "a = 1\nb = 2\nc = 3\n"
    new = "a = 1\nb = 20\nc = 3\nd = 4\n"
    edits = text_edits(old, new)
    assert apply_edits(old, edits) == new
    assert sum(e.end - e.start for e in edits) <= 2 and all(len(e.new_text) <= 6 for e in edits)


def test_overhead_outside_the_model_is_small_on_a_big_file(backend):
    lines = ["import os", "import sys", ""]
    i = 0
    while len(lines) < 5000:
        lines += [
            f"def func_{i}(a, b):",
            f"    x = a + b * {i}",
            f"    if x > {i}:",
            "        return x",
            "    return -x",
            "",
        ]
        i += 1
    text = "\n".join(lines) + "\n"
    rewriter = Rewriter(Decoder(backend, DecodeOptions(speculate=False)))
    timings = []
    for _ in range(5):
        t0 = time.perf_counter()
        source = SourceFile.from_bytes(text.encode())
        spec = language_for("big.py")
        data = source.text.encode()
        tree = parse(data, spec)
        target = find_by_name(definitions(data, spec, tree), "func_400")
        old_errors = syntax_errors(data, spec, tree)
        prompt, region, _, _ = rewriter.prompt_tokens(source, spec, target, "Add type hints.", tree)
        new_region = region.replace("(a, b)", "(a: int, b: int)")
        new_data = data[: target.start] + new_region.encode() + data[target.end :]
        new_tree = reparse_after_replace(tree, data, target.start, target.end, new_data, spec)
        assert syntax_errors(new_data, spec, new_tree) == old_errors == []
        assert len(text_edits(region, new_region)) == 1
        timings.append(time.perf_counter() - t0)
    # 20-50 ms on the machines this project has run on (72 ms on the slowest); a quadratic step would be seconds
    assert prompt and min(timings) < 0.150, f"{min(timings) * 1000:.1f} ms"


def test_seed_makes_sampling_reproducible_on_the_real_model(source):
    def sample(seed):
        result = run(
            str(source), "-f", "total", "-i", "Rename s to acc.", "--temperature", "0.9", "--seed", str(seed), "--json"
        )
        assert result.exit_code == 0, result.output
        return json.loads(result.stdout)["new_region"]

    first = sample(3)
    assert sample(3) == first
    assert any(sample(seed) != first for seed in (4, 5, 6)), "the seed changes nothing: is it used?"


def test_a_negative_seed_is_a_clear_error(source):
    result = run(str(source), "-f", "total", "-i", "x", "--temperature", "0.9", "--seed", "-1")
    assert result.exit_code == 2 and "--seed" in result.output and "Traceback" not in result.output
    assert source.read_bytes() == CODE.encode()


def test_draft_model_is_loaded_and_changes_nothing(source, backend):
    args = [str(source), "-f", "total", "-i", "Rename s to acc.", "--json"]
    alone = json.loads(run(*args).stdout)
    drafted = run(*args, "--draft-model", "tiny")
    assert drafted.exit_code == 0, drafted.output
    assert json.loads(drafted.stdout)["new_region"] == alone["new_region"]
    missing = run(*args, "--draft-model", str(source.parent / "nope.gguf"))
    assert missing.exit_code == EXIT_MODEL and "nope.gguf" in missing.output
    # With a fixed draft length the draft model drafts (the adaptive policy rightly declines a draft model as
    # slow as the target), its tokens are accepted, and the output is still the target's own.
    from editspec import prompts
    from editspec.backend import LlamaBackend
    from tests.test_real_model import NEAR_TIE, plain_margin_at

    draft = LlamaBackend("tiny", n_ctx=backend.n_ctx)
    try:
        spec = language_for("x.py")
        target = find_by_name(definitions(CODE.encode(), spec), "total")
        src = SourceFile.from_bytes(CODE.encode())
        decoder = Decoder(backend, DecodeOptions(draft_length=4), draft_backend=draft)
        prompt = Rewriter(decoder).prompt_tokens(src, spec, target, "Rename s to acc.")[0]
        backend.truncate(0)
        with_draft = decoder.decode(prompt, stop=prompts.FenceStop(backend), max_tokens=200)
        backend.truncate(0)
        plain = Decoder(backend, DecodeOptions(speculate=False)).decode(
            prompt, stop=prompts.FenceStop(backend), max_tokens=200
        )
    finally:
        draft.close()
    assert any(r.origin == "model" and r.accepted for r in with_draft.stats.rounds)
    # The target's own output, up to llama.cpp's batch numerics: any divergence is at a near-tie.
    if with_draft.tokens != plain.tokens:
        i = next(i for i, (a, b) in enumerate(zip(with_draft.tokens, plain.tokens, strict=False)) if a != b)
        margin = plain_margin_at(backend, prompt, plain.tokens, i)
        assert margin < NEAR_TIE, f"diverged at token {i} where plain greedy was sure (margin {margin:.2f})"


def test_reparsing_an_edit_leaves_the_old_tree_for_the_next_answer():
    """A second look judges several answers against one file: each reparse starts from the file's own tree."""
    spec = language_for("a.py")
    old = b"def f():\n    return 1\n\n\ndef g(:\n    pass\n"
    tree = parse(old, spec)
    end = old.index(b"\n\n\n")
    answers = [b"def f(x, y):\n    z = x + y\n    return z", b"def f():\n    return (1 +", b"def f(): return 1"]
    for new_code in answers * 2:
        new = new_code + old[end:]
        new_tree = reparse_after_replace(tree, old, 0, end, new, spec)
        assert str(new_tree.root_node) == str(parse(new, spec).root_node)
        assert syntax_errors(new, spec, new_tree) == syntax_errors(new, spec)
    assert tree.root_node.end_byte == len(old)


def test_the_fence_is_longer_than_any_run_of_backticks_in_the_code():
    from editspec import prompts

    assert prompts.fence_for("def f():\n    return 1\n") == "```"
    assert prompts.fence_for("/// ```\n/// x\n/// ```\nfn f() {}") == "````"
    assert prompts.fence_for("s = '`````'") == "``````"


class _Bytes:
    def token_bytes(self, token: bytes) -> bytes:
        return token


@pytest.mark.parametrize(
    ("fence", "pieces", "stops_at", "code"),
    [
        ("```", [b"x = 1\n", b"```", b"\n"], 2, "x = 1\n"),
        ("````", [b"/// ```\n", b"fn a() {}\n", b"````"], 3, "/// ```\nfn a() {}\n"),  # the fence it was shown
        ("````", [b"fn a() {}\n", b"```", b"\n"], 3, "fn a() {}\n"),  # three backticks alone on a line close it too
        ("````", [b"    ```\n", b"x```\n", b"y\n"], None, "    ```\nx```\ny\n"),  # the code's own backticks
        ("```", [b"x = 1\n", b"   ```", b"\n"], 2, "x = 1\n"),  # indented by up to three spaces, as in Markdown
        ("```", [b"```\n"], 1, ""),  # the answer's start is a line's start
        # Not inside a line, nor indented further: a doc comment's example the model added is code (before, the
        # answer was cut there, held no definition and was refused).
        (
            "```",
            [b"/// Sums.\n/// ", b"```", b"\n/// ", b"```\n", b"fn a() {}\n", b"```", b"\n"],
            6,
            "/// Sums.\n/// ```\n/// ```\nfn a() {}\n",
        ),
        (
            "```",
            [b'def f():\n    """\n    ```\n    f()\n', b'    ```\n    """\n', b"```"],
            3,
            'def f():\n    """\n    ```\n    f()\n    ```\n    """\n',
        ),
    ],
)
def test_the_answer_ends_at_its_fence_or_at_a_line_of_backticks_alone(fence, pieces, stops_at, code):
    from editspec import prompts

    stop, out, stopped = prompts.FenceStop(_Bytes(), fence), [], None
    for i, piece in enumerate(pieces, start=1):
        out.append(piece)
        if stop(out) and stopped is None:
            stopped = i
    assert stopped == stops_at
    assert prompts.code_before_fence(b"".join(pieces).decode(), fence) == code


def test_code_holding_a_chat_template_s_control_text_is_read_as_text(backend):
    """Code that builds chat prompts (`"<|im_end|>"` in a string) must not end the user's message in the prompt."""
    from editspec import prompts

    (end,) = backend.tokenize("<|im_end|>")  # the tiny model's template ends each turn with this control token
    code = 'def turn(role, text):\n    return "<|im_start|>" + role + "\\n" + text + "<|im_end|>\\n"\n'
    other = "def f(x):\n    return x + 1\n"
    tokens = prompts.edit_prompt_tokens(backend, code, "Add type hints.")
    plain = prompts.edit_prompt_tokens(backend, other, "Add type hints.")
    assert tokens.count(end) == plain.count(end) == 2  # the system turn's end and the user turn's, no more
    assert backend.tokenize(prompts.edit_prompt(backend, code, "Add type hints.")).count(end) == 3  # read at once
    assert code.rstrip() in backend.detokenize(tokens)  # control tokens have no text: the code is there as text
    # Any other code reads exactly as the whole prompt read at once (so kept prompt states still match).
    assert plain == backend.tokenize(prompts.edit_prompt(backend, other, "Add type hints."))


def test_the_first_run_says_it_measures_this_machine(source, tmp_path, monkeypatch):
    """Measuring what verify passes cost takes a while on a model file's first run (about a minute for the coder
    model on 2 cores): the user is told, that once; plain decoding measures nothing and says nothing."""
    import editspec.calibration

    costs = tmp_path / "cache" / "verify-costs.json"
    monkeypatch.setattr(editspec.calibration, "cache_file", lambda: costs)
    monkeypatch.setattr(editspec.calibration, "SWEEPS", 1)  # what is said, not what is measured, is the point

    def rewrite(*extra):
        args = ["rewrite", str(source), "-f", "total", "-i", "Use the built-in sum.", "--max-tokens", "40", *extra]
        return CliRunner().invoke(main, args)

    note = "measuring what a verify pass costs on this machine"
    plain = rewrite("--no-speculation")
    assert plain.exit_code == 0 and note not in plain.stderr and not costs.exists(), plain.output
    quiet = rewrite("-q")
    assert quiet.exit_code == 0 and note not in quiet.stderr and costs.is_file(), quiet.output
    costs.unlink()
    first, second = rewrite(), rewrite()
    assert first.exit_code == 0 and note in first.stderr, first.output
    assert second.exit_code == 0 and note not in second.stderr, second.output
