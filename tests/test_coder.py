"""The default model doing the main job, where the result is the point: the README's rewrite command, and one
rewrite streamed by the language server into an editor's document. (Slowest tests: a 1.5B model on the CPU.)"""

import asyncio
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from lsprotocol import types

ROOT = Path(__file__).resolve().parents[1]
pytestmark = pytest.mark.coder


def load_module(path: Path):
    namespace: dict = {"__name__": "rewritten"}
    exec(compile(path.read_text(), str(path), "exec"), namespace)
    return namespace


def test_the_readme_rewrite_on_the_default_model(coder_env, tmp_path):
    """`editspec rewrite samples/shapes.py --function total_area --instruction "Use the built-in sum."`: a diff
    that git applies, and the function it leaves uses sum() and computes what it did before."""
    command = [
        "editspec",
        "rewrite",
        "samples/shapes.py",
        "--function",
        "total_area",
        "--instruction",
        "Use the built-in sum.",
    ]
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    diff = done.stdout
    assert diff.startswith("--- a/samples/shapes.py\n+++ b/samples/shapes.py\n")
    assert "-    for shape in shapes:" in diff
    assert any(line.startswith("+") and "sum(" in line for line in diff.splitlines())

    work = tmp_path / "work"
    (work / "samples").mkdir(parents=True)
    shutil.copy(ROOT / "samples" / "shapes.py", work / "samples" / "shapes.py")
    applied = subprocess.run(["git", "apply", "-"], input=diff, cwd=work, capture_output=True, text=True)
    assert applied.returncode == 0, applied.stderr
    old = load_module(ROOT / "samples" / "shapes.py")
    new = load_module(work / "samples" / "shapes.py")
    shapes = [old["Rect"](2, 3), old["Circle"](1.5), old["Rect"](0.5, 4)]
    assert new["total_area"](shapes) == pytest.approx(old["total_area"](shapes))
    assert new["total_area"]([]) == 0
    # everything but the function is as it was
    rest = (ROOT / "samples" / "shapes.py").read_text().split("def total_area")[0]
    assert (work / "samples" / "shapes.py").read_text().startswith(rest)


CODE = (
    "import math\n\n\n"
    "def total(values):\n"
    "    s = 0\n"
    "    for v in values:\n"
    "        s = s + v\n"
    "    return s\n\n\n"
    "def mean(values):\n"
    "    return total(values) / len(values)\n"
)


async def test_a_streamed_language_server_rewrite_on_the_default_model(coder_env):
    """The server on the default model streams a rewrite into the document: several edits while the model
    writes, the last one leaving a working function, and nothing else in the document changed."""
    from pygls.lsp.client import LanguageClient

    uri = "file:///work/stats.py"
    client = LanguageClient("test", "1")
    doc = {"text": CODE, "version": 1, "states": []}

    def offset(pos):
        lines = doc["text"].splitlines(keepends=True)
        return sum(len(line) for line in lines[: pos.line]) + pos.character

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply(params: types.ApplyWorkspaceEditParams):
        edits = params.edit.document_changes[0].edits if params.edit.document_changes else params.edit.changes[uri]
        for e in sorted(edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
            doc["text"] = doc["text"][: offset(e.range.start)] + e.new_text + doc["text"][offset(e.range.end) :]
        doc["version"] += 1
        doc["states"].append(doc["text"])
        client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=uri, version=doc["version"]),
                [types.TextDocumentContentChangeWholeDocument(text=doc["text"])],
            )
        )
        return types.ApplyWorkspaceEditResult(applied=True)

    messages = []

    @client.feature(types.WINDOW_SHOW_MESSAGE)
    def show(params: types.ShowMessageParams):
        messages.append(params.message)

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def create(params):
        return None

    @client.feature(types.PROGRESS)
    def progress(params):
        pass

    await client.start_io(sys.executable, "-m", "lsp", env=dict(os.environ))
    try:
        caps = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(
                apply_edit=True, workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)
            ),
            window=types.WindowClientCapabilities(work_done_progress=True),
        )
        await asyncio.wait_for(
            client.initialize_async(
                types.InitializeParams(capabilities=caps, initialization_options={"editIntervalMs": 0})
            ),
            60,
        )
        client.initialized(types.InitializedParams())
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=uri, language_id="python", version=1, text=CODE))
        )
        result = await asyncio.wait_for(
            client.workspace_execute_command_async(
                types.ExecuteCommandParams(
                    command="editspec.rewrite",
                    arguments=[
                        {"uri": uri, "position": {"line": 4, "character": 4}, "instruction": "Use the built-in sum."}
                    ],
                )
            ),
            300,
        )
        assert result["applied"] is True and result["changed"] is True, (result, messages)
        assert len(doc["states"]) >= 2  # streamed: intermediate states before the last edit
        final = doc["text"]
        assert "sum(values)" in final and "for v in values" not in final
        namespace: dict = {}
        exec(final, namespace)
        assert namespace["total"]([1, 2, 3.5]) == 6.5 and namespace["mean"]([2, 4]) == 3
        assert final.endswith(CODE[CODE.index("\n\n\ndef mean") :])
        await asyncio.wait_for(client.shutdown_async(None), 30)
        client.exit(None)
    finally:
        if client._server is not None and client._server.returncode is None:
            client._server.kill()  # a failed test must not wait for the server
        await client.stop()
