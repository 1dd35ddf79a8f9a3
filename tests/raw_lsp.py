"""A raw LSP client for hostile-input tests: hand-written framing (so that broken frames can be sent), and an
editor that applies the server's edits with its own, independent reading of LSP positions."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LSP_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")


def lsp_offset(text: str, line: int, character: int) -> int:
    """An LSP position (UTF-16 units; lines end at \\n, \\r\\n or \\r only) as an offset into text."""
    lines = LSP_LINE.findall(text)
    if line >= len(lines):
        assert line == len(lines) and character == 0, (line, character, len(lines))
        return len(text)
    start = sum(len(x) for x in lines[:line])
    body = lines[line].rstrip("\r\n")
    units = 0
    for i, ch in enumerate(body):
        if units >= character:
            assert units == character, "a position inside a surrogate pair"
            return start + i
        units += 2 if ord(ch) > 0xFFFF else 1
    assert units == character, f"character {character} is past the end of line {line} ({units} units)"
    return start + len(body)


def lsp_position(text: str, offset: int) -> dict:
    lines = LSP_LINE.findall(text[:offset])
    if not lines or re.search(r"(\r\n|\r|\n)$", text[:offset]):
        line, col_text = len(lines), ""
    else:
        line, col_text = len(lines) - 1, lines[-1]
    return {"line": line, "character": sum(2 if ord(c) > 0xFFFF else 1 for c in col_text)}


def apply_text_edits(text: str, edits: list[dict]) -> str:
    spans = []
    for e in edits:
        r = e["range"]
        a = lsp_offset(text, r["start"]["line"], r["start"]["character"])
        b = lsp_offset(text, r["end"]["line"], r["end"]["character"])
        spans.append((a, b, e["newText"]))
    for a, b, new in sorted(spans, reverse=True):
        text = text[:a] + new + text[b:]
    return text


class Editor:
    """Open documents and how they change: the server's edits applied, the user's typing, both told to the
    server with didChange (whole text, or one incremental change)."""

    def __init__(self, client: RawClient, incremental: bool = True):
        self.client, self.incremental = client, incremental
        self.docs: dict[str, list] = {}  # uri -> [text, version]
        self.applied: list[dict] = []  # the applyEdit params applied, in order
        self.hook = None  # hook(params) -> a reply dict, "silent" (no reply), or None (apply normally)

    def open(self, uri: str, text: str, language: str = "python") -> None:
        self.docs[uri] = [text, 1]
        self.client.notify(
            "textDocument/didOpen", {"textDocument": {"uri": uri, "languageId": language, "version": 1, "text": text}}
        )

    def text(self, uri: str) -> str:
        return self.docs[uri][0]

    def change(self, uri: str, start: int, end: int, new: str) -> None:
        """The user (or an edit) replaces text[start:end] with new. Under the client's write lock, as one step with
        sending it: the user's typing (the test's thread) and the server's edits (the reader's) must not interleave
        between reading the document and telling the server, or the server would get two changes of the same
        version, or a later version first (an editor's UI thread does both in turn)."""
        with self.client.write_lock:
            text, version = self.docs[uri]
            rng = {"start": lsp_position(text, start), "end": lsp_position(text, end)}
            self.docs[uri] = [text[:start] + new + text[end:], version + 1]
            change = {"range": rng, "text": new} if self.incremental else {"text": self.docs[uri][0]}
            self.client.notify(
                "textDocument/didChange",
                {"textDocument": {"uri": uri, "version": version + 1}, "contentChanges": [change]},
            )

    def apply_edit(self, params: dict):
        if self.hook is not None:
            reply = self.hook(params)
            if reply is not None:
                return reply
        return self.apply_normally(params)

    def apply_normally(self, params: dict, check_version: bool = True) -> dict:
        with self.client.write_lock:  # the version checked is the version edited (see `change`)
            return self._apply(params, check_version)

    def _apply(self, params: dict, check_version: bool) -> dict:
        edit = params["edit"]
        if "documentChanges" in edit:
            (change,) = edit["documentChanges"]
            uri, version, edits = change["textDocument"]["uri"], change["textDocument"]["version"], change["edits"]
            if check_version and version is not None and version != self.docs[uri][1]:
                return {"applied": False, "failureReason": "the document changed"}
        else:
            ((uri, edits),) = edit["changes"].items()
        text = self.docs[uri][0]
        new = apply_text_edits(text, edits)
        self.applied.append(params)
        if new != text:
            a = 0
            while a < min(len(text), len(new)) and text[a] == new[a]:
                a += 1
            s = 0
            while s < min(len(text), len(new)) - a and text[len(text) - 1 - s] == new[len(new) - 1 - s]:
                s += 1
            self.change(uri, a, len(text) - s, new[a : len(new) - s])
        return {"applied": True}


class RawClient:
    def __init__(
        self,
        settings: dict | None = None,
        capabilities: dict | None = None,
        env: dict | None = None,
        incremental: bool = True,
        module: str = "tests.scripted_lsp",
        args: tuple[str, ...] = (),
    ):
        full_env = dict(os.environ, **(env or {}))
        self.proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=ROOT,
            env=full_env,
        )
        self.lock = threading.Condition()
        self.received: list[dict] = []
        self.responses: dict = {}
        self.next_id = 0
        self.editor = Editor(self, incremental)
        self.write_lock = threading.RLock()  # held across a document change and its didChange (Editor.change)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()
        self.stderr: list[bytes] = []
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()
        self.capabilities = capabilities if capabilities is not None else DEFAULT_CAPABILITIES
        self.settings = settings

    # -- wire ------------------------------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        with self.write_lock:
            self.proc.stdin.write(data)
            self.proc.stdin.flush()

    def send(self, message: dict) -> None:
        body = json.dumps(message).encode()
        self.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)

    def notify(self, method: str, params) -> None:
        self.send({"jsonrpc": "2.0", "method": method, "params": params})

    def request(self, method: str, params=None) -> int:
        with self.lock:
            self.next_id += 1
            msg_id = self.next_id
        message = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return msg_id

    def call(self, method: str, params=None, timeout: float = 30.0) -> dict:
        return self.response(self.request(method, params), timeout)

    def response(self, msg_id, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        with self.lock:
            while msg_id not in self.responses:
                left = deadline - time.monotonic()
                assert left > 0, f"no response to request {msg_id} in {timeout} s"
                assert self.proc.poll() is None, f"the server died: {b''.join(self.stderr)[-3000:]!r}"
                self.lock.wait(min(left, 0.2))
            return self.responses[msg_id]

    def wait_for(self, predicate, timeout: float = 30.0) -> dict:
        deadline = time.monotonic() + timeout
        with self.lock:
            while True:
                for m in self.received:
                    if predicate(m):
                        return m
                left = deadline - time.monotonic()
                assert left > 0, "the expected message did not arrive"
                self.lock.wait(min(left, 0.2))

    def _read(self) -> None:
        """The reader thread. If it fails (a bad frame, an edit the editor cannot place), the server is killed:
        nothing would read its output any more, and a test writing to it would block for good once it stopped
        reading its input; killed, the test fails at its next write or wait, and pytest shows the reader's error."""
        try:
            self._read_messages()
        except BaseException:
            self.proc.kill()
            raise

    def _read_messages(self) -> None:
        out = self.proc.stdout
        while True:
            headers = {}
            while True:
                line = out.readline()
                if not line:
                    return
                assert line.endswith(b"\r\n"), f"the server sent a header line without CRLF: {line!r}"
                if line == b"\r\n":
                    break
                name, _, value = line.decode("ascii").partition(":")
                headers[name.strip().lower()] = value.strip()
            body = out.read(int(headers["content-length"]))
            message = json.loads(body)
            with self.lock:
                self.received.append(message)
                if "method" not in message:
                    self.responses[message.get("id")] = message
                self.lock.notify_all()
            if "method" in message and "id" in message:
                self._answer(message)

    def _answer(self, message: dict) -> None:
        method = message["method"]
        if method == "workspace/applyEdit":
            reply = self.editor.apply_edit(message["params"])
        else:
            reply = None  # progress create, registrations: a null result
        if reply == "silent":
            return
        if isinstance(reply, bytes):
            self.send_raw(reply)
            return
        if isinstance(reply, dict) and reply.get("raw") is not None:
            self.send(dict(reply["raw"], id=message["id"]) if reply.get("with_id") else reply["raw"])
            return
        self.send({"jsonrpc": "2.0", "id": message["id"], "result": reply})

    # -- session ---------------------------------------------------------------------------------------------
    def initialize(self) -> dict:
        reply = self.call(
            "initialize",
            {
                "processId": None,
                "rootUri": None,
                "capabilities": self.capabilities,
                "initializationOptions": self.settings,
            },
        )
        assert "result" in reply, reply
        self.notify("initialized", {})
        return reply

    def rewrite(self, uri: str, line: int, character: int, instruction: str, **extra) -> int:
        args = dict(
            {"uri": uri, "position": {"line": line, "character": character}, "instruction": instruction}, **extra
        )
        return self.request("workspace/executeCommand", {"command": "editspec.rewrite", "arguments": [args]})

    def stderr_text(self) -> str:
        return b"".join(self.stderr).decode(errors="replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait(10)


DEFAULT_CAPABILITIES = {
    "workspace": {"applyEdit": True, "workspaceEdit": {"documentChanges": True}},
    "window": {"workDoneProgress": True},
}
UNVERSIONED_CAPABILITIES = {"workspace": {"applyEdit": True}, "window": {"workDoneProgress": True}}


def scripted(*pairs: tuple[str, str]) -> str:
    """An instruction the scripted model carries out exactly (tests/scripted.py)."""
    return "scripted: " + json.dumps([list(p) for p in pairs])
