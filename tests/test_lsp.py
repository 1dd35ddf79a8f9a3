"""The language server over stdio with the real bundled model, driven by a small editor-like client."""

import asyncio
import json
import random
import sys
import time
import typing

import pytest
import pytest_lsp
from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.protocol import default_converter
from pytest_lsp import ClientServerConfig, LanguageClient

from editspec.decoding import DecodeOptions, Decoder
from editspec.locate import definitions, find_by_name, language_for
from editspec.rewrite import Rewriter, SourceFile

URI = "file:///work/example.py"
CODE = (
    "import math\n\n\n"
    "def total(values):\n"
    "    s = 0\n"
    "    for v in values:\n"
    "        s = s + v\n"
    "    return s\n\n\n"
    "def describe(values):\n"
    "    count = len(values)\n"
    "    biggest = max(values)\n"
    "    smallest = min(values)\n"
    "    spread = biggest - smallest\n"
    "    average = sum(values) / count\n"
    "    middle = sorted(values)[count // 2]\n"
    "    text = 'count ' + str(count)\n"
    "    text = text + ' max ' + str(biggest)\n"
    "    text = text + ' min ' + str(smallest)\n"
    "    text = text + ' spread ' + str(spread)\n"
    "    text = text + ' mean ' + str(average)\n"
    "    text = text + ' median ' + str(middle)\n"
    "    return text\n"
)
SETTINGS = {"maxTokens": 300, "editIntervalMs": 0}
INSTRUCTION = "Use the built-in sum."
LONG = "Rename the function describe to summarize."  # changes line 1, then copies 130 tokens


def fixed_converter():
    """lsprotocol 2025.0.0 structures any CodeAction carrying a command as a Command (client side only)."""
    conv = default_converter()

    def hook(obj, _):
        return conv.structure(obj, types.Command if isinstance(obj.get("command"), str) else types.CodeAction)

    conv.register_structure_hook(typing.Union[types.Command, types.CodeAction], hook)  # noqa: UP007 - the exact type lsprotocol registers
    return conv


def make_client():
    client = LanguageClient(converter_factory=fixed_converter)
    pytest_lsp.client.register_lsp_features(client)
    return client


class Editor:
    """A document as an editor holds it: applies workspace edits and tells the server with didChange."""

    def __init__(self, client, text):
        self.client, self.text, self.version = client, text, 1
        self.edits: list[types.ApplyWorkspaceEditParams] = []
        self.on_edit = None  # a hook run after each applied edit

    def offset(self, pos: types.Position) -> int:
        lines = self.text.splitlines(keepends=True)
        return sum(len(line) for line in lines[: pos.line]) + pos.character

    def change(self, start: int, end: int, new: str) -> None:
        self.text = self.text[:start] + new + self.text[end:]
        self.version += 1
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=URI, version=self.version),
                [types.TextDocumentContentChangeWholeDocument(text=self.text)],
            )
        )

    def apply(self, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        edit = params.edit
        text_edits = edit.document_changes[0].edits if edit.document_changes else edit.changes[URI]
        for e in sorted(text_edits, key=lambda e: (e.range.start.line, e.range.start.character), reverse=True):
            self.text = self.text[: self.offset(e.range.start)] + e.new_text + self.text[self.offset(e.range.end) :]
        self.version += 1
        self.edits.append(params)
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                types.VersionedTextDocumentIdentifier(uri=URI, version=self.version),
                [types.TextDocumentContentChangeWholeDocument(text=self.text)],
            )
        )
        if self.on_edit is not None:
            self.on_edit(len(self.edits))
        return types.ApplyWorkspaceEditResult(applied=True)


@pytest_lsp.fixture(config=ClientServerConfig(server_command=[sys.executable, "-m", "lsp"], client_factory=make_client))
async def client(lsp_client: LanguageClient):
    editor = Editor(lsp_client, CODE)
    lsp_client.editor = editor

    @lsp_client.feature(types.WORKSPACE_APPLY_EDIT)
    def apply_edit(params):
        return editor.apply(params)

    await lsp_client.initialize_session(
        types.InitializeParams(capabilities=pytest_lsp.client_capabilities("neovim"), initialization_options=SETTINGS)
    )
    lsp_client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=URI, language_id="python", version=1, text=CODE))
    )
    yield
    await lsp_client.shutdown_session()


def rewrite_params(line, instruction=INSTRUCTION, **extra):
    return types.ExecuteCommandParams(
        command="editspec.rewrite",
        arguments=[{"uri": URI, "position": {"line": line, "character": 4}, "instruction": instruction, **extra}],
    )


def code_actions(client, line):
    return client.text_document_code_action_async(
        types.CodeActionParams(
            types.TextDocumentIdentifier(URI),
            types.Range(types.Position(line, 2), types.Position(line, 2)),
            types.CodeActionContext(diagnostics=[], only=[types.CodeActionKind.RefactorRewrite]),
        )
    )


@pytest.fixture(scope="module")
def cli_result():
    """What `editspec rewrite` produces for the same input, model and settings."""
    from editspec.backend import LlamaBackend

    backend = LlamaBackend("tiny")
    source = SourceFile.from_bytes(CODE.encode())
    spec = language_for("example.py")
    target = find_by_name(definitions(CODE.encode(), spec), "total")
    result = Rewriter(Decoder(backend, DecodeOptions(max_tokens=300))).rewrite(source, spec, target, INSTRUCTION)
    backend.close()
    return result


async def model_ready(client):
    # Up to two minutes: the first test of a run to load the model also measures its verify costs.
    for _ in range(2400):
        ends = [
            r
            for reports in client.progress_reports.values()
            for r in reports
            if isinstance(r, types.WorkDoneProgressEnd)
        ]
        if ends:
            return
        await asyncio.sleep(0.05)


async def test_the_model_loads_in_the_background_with_progress(client):
    await model_ready(client)
    loads = [
        reports
        for reports in client.progress_reports.values()
        if reports and isinstance(reports[0], types.WorkDoneProgressBegin) and reports[0].message == "loading the model"
    ]
    assert loads and isinstance(loads[0][-1], types.WorkDoneProgressEnd)
    assert loads[0][-1].message.startswith("ready: SmolLM2-135M-Instruct")


async def test_a_code_action_reads_the_prompt_ahead(client, cli_result):
    """Asking for code actions starts reading the prompt's instruction-free part; the rewrite that follows
    reads little more than the instruction, and writes the same text."""
    await model_ready(client)
    await code_actions(client, 5)
    result = await client.workspace_execute_command_async(rewrite_params(5))
    s = result["stats"]
    assert s["prompt_tokens"] - s["reused_prompt_tokens"] < 0.25 * s["prompt_tokens"]
    assert client.editor.text == cli_result.new_text


async def test_code_action_inside_a_function_only(client):
    t0 = time.perf_counter()
    actions = await code_actions(client, 5)
    elapsed = time.perf_counter() - t0
    assert actions and actions[0].title.startswith("Rewrite total")
    assert actions[0].command.command == "editspec.rewrite"
    assert any("Add type hints" in a.title for a in actions)
    assert elapsed < 0.5
    assert await code_actions(client, 1) is None  # between the imports and the first function


async def test_rewrite_streams_edits_and_reports_progress(client, cli_result):
    assert cli_result.problem() is None, "the model's answer for this input changed; pick another input"
    result = await client.workspace_execute_command_async(rewrite_params(5))
    assert result["applied"] is True
    assert result["stats"]["reused_prompt_tokens"] == 0  # no code action came first: nothing was read ahead
    assert len(client.editor.edits) >= 2
    assert client.editor.text == cli_result.new_text  # the same text the CLI writes
    reports = next(r for r in client.progress_reports.values() if r and r[0].title.startswith("editspec: "))
    assert isinstance(reports[0], types.WorkDoneProgressBegin) and isinstance(reports[-1], types.WorkDoneProgressEnd)
    assert any(isinstance(r, types.WorkDoneProgressReport) and "tok/s" in (r.message or "") for r in reports)
    assert "acceptance" in reports[-1].message and "prompt: read " in reports[-1].message
    page = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="editspec.trace", arguments=[URI])
    )
    assert page["html"].count('<span class="tok ') == result["stats"]["generated_tokens"]
    with pytest.raises(JsonRpcException, match="no rewrite has finished"):
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="editspec.trace", arguments=["file:///other.py"])
        )


async def start_and_cancel(client, how):
    """Start a long rewrite, cancel it at the first streamed edit; return the command's outcome."""
    loop = asyncio.get_running_loop()
    cancelled = asyncio.Event()

    def on_edit(n):
        if n != 1:
            return
        if how == "progress":
            token = next(t for t, r in client.progress_reports.items() if r and r[0].title.startswith("editspec: "))
            client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        elif how == "command":
            client.protocol.send_request(
                "workspace/executeCommand", types.ExecuteCommandParams(command="editspec.cancel", arguments=[URI])
            )
        else:
            client.protocol.notify("$/cancelRequest", types.CancelParams(id="rewrite-1"))
        loop.call_soon_threadsafe(cancelled.set)

    client.editor.on_edit = on_edit
    future = client.protocol.send_request("workspace/executeCommand", rewrite_params(12, LONG), msg_id="rewrite-1")
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), 120)
    except JsonRpcException as e:
        return e


@pytest.mark.parametrize("how", ["progress", "command", "cancel_request"])
async def test_cancel_puts_the_function_back(client, how):
    outcome = await start_and_cancel(client, how)
    if how == "cancel_request":
        assert isinstance(outcome, JsonRpcException)  # pygls answers -32800 at once...
        for _ in range(200):  # ...and the server puts the document back right after
            if client.editor.text == CODE:
                break
            await asyncio.sleep(0.05)
    else:
        assert outcome["applied"] is False and outcome["reason"] == "cancelled"
    assert len(client.editor.edits) >= 2  # something was streamed, then restored
    assert client.editor.text == CODE
    # and the server still answers
    assert await code_actions(client, 5)


async def test_an_edit_outside_the_region_is_kept(client, cli_result):
    def on_edit(n):
        if n == 1:
            client.editor.change(0, 0, "# a note the user typed meanwhile\n")

    client.editor.on_edit = on_edit
    result = await client.workspace_execute_command_async(rewrite_params(5))
    assert result["applied"] is True
    assert client.editor.text == "# a note the user typed meanwhile\n" + cli_result.new_text


async def test_an_edit_inside_the_region_stops_the_rewrite(client):
    def on_edit(n):
        if n == 1:
            at = client.editor.text.index("    count = len(values)") + len("    count = len(values)")
            client.editor.change(at, at, "  # mine")

    client.editor.on_edit = on_edit
    result = await client.workspace_execute_command_async(rewrite_params(12, LONG))
    assert result == {"applied": False, "reason": "edited"}
    assert "    count = len(values)  # mine\n" in client.editor.text
    assert client.editor.text.startswith(CODE[: CODE.index("def describe")])


@pytest.mark.parametrize(
    "arguments,message",
    [
        (
            [{"uri": "file:///nowhere.py", "position": {"line": 0, "character": 0}, "instruction": "x"}],
            "unknown document",
        ),
        ([{"uri": URI, "position": {"line": 500, "character": 0}, "instruction": "x"}], "outside the document"),
        ([{"uri": URI, "position": {"line": 0, "character": 0}, "instruction": "x"}], "no function"),
        ([{"uri": URI, "position": {"line": 5, "character": 0}, "instruction": "  "}], "instruction' is empty"),
        ([{"uri": URI}], "'position'"),
        (["not an object"], "takes one object"),
        ([], "takes one object"),
    ],
)
async def test_bad_input_is_an_error_and_the_server_lives_on(client, arguments, message):
    with pytest.raises(JsonRpcException, match=message):
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="editspec.rewrite", arguments=arguments)
        )
    assert client.editor.text == CODE
    assert await code_actions(client, 5)


async def test_an_unloadable_model_is_reported(client, tmp_path):
    bad = tmp_path / "bad.gguf"
    bad.write_bytes(b"GGUF" + b"\0" * 64)
    client.workspace_did_change_configuration(types.DidChangeConfigurationParams(settings={"model": str(bad)}))
    with pytest.raises(JsonRpcException, match="could not load"):
        await client.workspace_execute_command_async(rewrite_params(5))
    assert client.editor.text == CODE
    assert any("could not load" in m.message for m in client.messages)  # shown before the error reply
    assert await code_actions(client, 5)


async def test_a_second_rewrite_in_the_same_document_is_refused(client):
    first = client.workspace_execute_command_async(rewrite_params(12, LONG))
    task = asyncio.ensure_future(first)
    await asyncio.sleep(0.3)
    with pytest.raises(JsonRpcException, match="already running"):
        await client.workspace_execute_command_async(rewrite_params(5))
    await task


async def test_code_actions_stay_fast_while_a_rewrite_runs(client):
    timings = []
    started = asyncio.Event()
    client.editor.on_edit = lambda n: started.set()
    task = asyncio.ensure_future(client.workspace_execute_command_async(rewrite_params(12, LONG)))
    await asyncio.wait_for(started.wait(), 60)
    while not task.done() and len(timings) < 10:
        t0 = time.perf_counter()
        assert await code_actions(client, 5)
        timings.append(time.perf_counter() - t0)
        await asyncio.sleep(0.02)
    await task
    assert timings and min(timings) < 0.05 and sorted(timings)[len(timings) // 2] < 0.05, timings


async def test_fuzz_malformed_and_out_of_order_messages(client):
    rng = random.Random(7)
    methods = [
        "textDocument/codeAction",
        "workspace/executeCommand",
        "textDocument/didChange",
        "textDocument/didOpen",
        "textDocument/didClose",
        "editspec/unknown",
        "initialize",
        "shutdownx",
    ]
    writer = client.protocol.writer
    junk_values = [
        None,
        1,
        "x",
        [],
        {},
        {"uri": 5},
        {"textDocument": {"uri": URI}},
        [1, 2, {"a": None}],
        {"command": "editspec.rewrite", "arguments": [{"uri": URI, "position": "top"}]},
        {"command": "editspec.rewrite", "arguments": None},
        {"command": "nope"},
    ]
    for i in range(300):
        kind = rng.random()
        if kind < 0.15:
            body = b"{not json at all" + bytes([rng.randrange(32, 127) for _ in range(rng.randrange(1, 20))])
        else:
            msg = {"jsonrpc": "2.0", "method": rng.choice(methods), "params": rng.choice(junk_values)}
            if kind < 0.7:
                msg["id"] = f"fuzz-{i}"
            body = json.dumps(msg).encode()
        writer.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    await asyncio.sleep(0.5)
    client.text_document_did_close(types.DidCloseTextDocumentParams(types.TextDocumentIdentifier(URI)))
    client.text_document_did_open(
        types.DidOpenTextDocumentParams(types.TextDocumentItem(uri=URI, language_id="python", version=100, text=CODE))
    )
    actions = await code_actions(client, 5)
    assert actions and actions[0].title.startswith("Rewrite total")


def test_tcp_listens_on_loopback_only():
    import socket
    import subprocess

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "lsp", "--tcp", str(port)], stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=5)
                break
            except OSError:
                assert time.time() < deadline, "the server did not listen"
                time.sleep(0.1)
        body = json.dumps(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {"processId": None, "rootUri": None, "capabilities": {}},
            }
        ).encode()
        conn.sendall(b"Content-Length: %d\r\n\r\n" % len(body) + body)
        reply = b""
        while b"executeCommandProvider" not in reply:
            chunk = conn.recv(65536)
            assert chunk, reply
            reply += chunk
        assert b"editspec.rewrite" in reply
        # While connected: bound to loopback only. The kernel's own table of listening sockets (state 0A),
        # addresses in hex: 127.0.0.1 is 0100007F.
        listening = []
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table) as f:
                for row in f.read().splitlines()[1:]:
                    local, state = row.split()[1], row.split()[3]
                    address, hex_port = local.split(":")
                    if state == "0A" and int(hex_port, 16) == port:
                        listening.append(address)
        assert listening == ["0100007F"], listening
        conn.close()
    finally:
        proc.kill()
        proc.wait()
