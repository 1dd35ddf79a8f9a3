"""The VS Code extension's own tests (`npm test`): its logic, its glue with `vscode` faked, and a protocol test
that drives the real server through vscode-jsonrpc and must end with the text the CLI produces."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from editspec.decoding import DecodeOptions, Decoder
from editspec.locate import definitions, find_by_name, language_for
from editspec.rewrite import Rewriter, SourceFile

ROOT = Path(__file__).resolve().parents[1]
INSTRUCTION = "Rename the variable text to result."  # changes several lines: several streamed edits
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
def test_npm_test(tmp_path, backend):
    spec = language_for("example.py")
    target = find_by_name(definitions(CODE.encode(), spec), "describe")
    expected = Rewriter(Decoder(backend, DecodeOptions(max_tokens=200))).rewrite(
        SourceFile.from_bytes(CODE.encode()), spec, target, INSTRUCTION
    )
    assert expected.problem() is None
    (tmp_path / "expected.py").write_text(expected.new_text)
    env = dict(
        os.environ,
        EDITSPEC_TEST_PYTHON=sys.executable,
        EDITSPEC_ROOT=str(ROOT),
        EDITSPEC_EXPECTED=str(tmp_path / "expected.py"),
        EDITSPEC_INSTRUCTION=INSTRUCTION,
    )
    run = subprocess.run(["npm", "test"], cwd=EXTENSION, env=env, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-2000:]
    assert "# fail 0" in run.stdout and "# pass 10" in run.stdout
