"""The VS Code extension's own tests (`npm test`): its logic, its glue with `vscode` faked, and a protocol test
that drives the real server through vscode-jsonrpc and must end with the text an in-process rewrite produces.
The server runs the scripted model (tests/scripted.py): its answer is known to the character, where a real
model's greedy answer can take the other branch at a near-tie when the prompt is read in other batches (the
server reads ahead at the code action). The real model through the real server: tests/test_coder.py."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from editspec.decoding import DecodeOptions
from editspec.locate import definitions, find_by_name, language_for
from editspec.rewrite import Rewriter, SourceFile
from tests.scripted import scripted_decoder

ROOT = Path(__file__).resolve().parents[1]
INSTRUCTION = 'scripted: [["text", "result"]]'  # changes several lines: several streamed edits
EXTENSION = ROOT / "extension" / "vscode"
CODE = (
    "def describe(values):\n    count = len(values)\n    biggest = max(values)\n    smallest = min(values)\n"
    "    text = 'count ' + str(count)\n    text = text + ' max ' + str(biggest)\n"
    "    text = text + ' min ' + str(smallest)\n    return text\n"
)


@pytest.mark.skipif(
    not shutil.which("npm") or not (EXTENSION / "node_modules").is_dir(),
    reason="needs Node and `npm ci` in extension/vscode",
)
def test_npm_test(tmp_path):
    spec = language_for("example.py")
    target = find_by_name(definitions(CODE.encode(), spec), "describe")
    expected = Rewriter(scripted_decoder(DecodeOptions(max_tokens=600))).rewrite(
        SourceFile.from_bytes(CODE.encode()), spec, target, INSTRUCTION
    )
    assert expected.problem() is None and expected.new_text == CODE.replace("text", "result")
    (tmp_path / "expected.py").write_text(expected.new_text)
    env = dict(
        os.environ,
        EDITSPEC_TEST_PYTHON=sys.executable,
        EDITSPEC_ROOT=str(ROOT),
        EDITSPEC_EXPECTED=str(tmp_path / "expected.py"),
        EDITSPEC_INSTRUCTION=INSTRUCTION,
        EDITSPEC_SERVER_MODULE="tests.scripted_lsp",
        # A pace for the answer: without one the scripted model can finish before the server's first edit goes
        # out, and its progress then comes as one (seen once in CI on a busy machine: "streamed 1 edits").
        EDITSPEC_SCRIPTED_DELAY="0.01",
    )
    run = subprocess.run(["npm", "test"], cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    # Every test in the files ran (a file node could not load would count none of its tests).
    written = sum(f.read_text().count("\ntest(") for f in (EXTENSION / "test").glob("*.test.cjs"))
    assert written >= 32
    passed = f"# pass {written}\n"
    assert "# fail 0" in run.stdout and passed in run.stdout, run.stdout[-4000:] + run.stderr[-2000:]
