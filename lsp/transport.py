"""Reading LSP messages off a byte stream, and answering every request, whatever arrives.

pygls's reader stalls on a bad `Content-Length` (waiting for a line that may never come), dies on a huge one
(MemoryError, OverflowError), and answers no request it cannot parse or structure. Here:

- headers are read as LSP (and HTTP) defines them: "Name: value" lines, names in any case, ended by an empty
  line; a bare "\\n" is taken for "\\r\\n";
- `Content-Length` must be a decimal number from 1 to MAX_MESSAGE_BYTES; otherwise the frame is answered with
  a parse error and the reader looks for the next header (a body it cannot delimit is skipped that way too);
- a body that is not JSON gets -32700, one that is not a JSON-RPC message -32600, and a request whose params
  do not fit its method -32602, always with the request's id when it has one;
- the lifecycle is LSP's: requests before `initialize` get -32002, a second `initialize` and requests after
  `shutdown` get -32600, `exit` ends the process with 0 after `shutdown` and 1 without.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import re
from collections.abc import Awaitable, Callable

from lsprotocol import types
from pygls.exceptions import JsonRpcException

log = logging.getLogger("editspec.lsp.transport")

MAX_MESSAGE_BYTES = 64 << 20  # a 10 MB document fits several times over, in JSON's escapes too
MAX_HEADER_BYTES = 8 << 10
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
INVALID_PARAMS = -32602
SERVER_NOT_INITIALIZED = -32002
CONTENT_LENGTH = re.compile(rb"content-length:", re.IGNORECASE)
HEADER_NAME = re.compile(rb"[A-Za-z0-9-]+")


class FrameError(Exception):
    """A frame whose body cannot be read: answered with a parse error; reading goes on."""


class Frames:
    """Splits a byte stream into message bodies. `feed` returns bodies and FrameErrors in arrival order."""

    def __init__(self, max_bytes: int = MAX_MESSAGE_BYTES):
        self.max_bytes = max_bytes
        self.buffer = bytearray()
        self.headers: dict[str, bytes] = {}
        self.length: int | None = None  # set while reading a body
        self.skipping = False  # after a broken frame: ignore lines until one holds a Content-Length header

    def feed(self, data: bytes) -> list[bytes | FrameError]:
        self.buffer += data
        out: list[bytes | FrameError] = []
        while True:
            if self.length is not None:
                if len(self.buffer) < self.length:
                    return out
                out.append(bytes(self.buffer[: self.length]))
                del self.buffer[: self.length]
                self.length = None
                continue
            end = self.buffer.find(b"\n")
            if end < 0:
                if len(self.buffer) > MAX_HEADER_BYTES:  # no header is this long: junk; keep a tail to resync on
                    self._junk(out, "a header line is too long")
                    del self.buffer[: -len(b"content-length:")]
                return out
            line = bytes(self.buffer[:end]).rstrip(b"\r")
            del self.buffer[: end + 1]
            self._header_line(line, out)

    def _junk(self, out: list, why: str) -> None:
        if not self.skipping:
            out.append(FrameError(why))
        self.skipping, self.headers = True, {}

    def _header_line(self, line: bytes, out: list) -> None:
        if self.skipping:
            found = CONTENT_LENGTH.search(line)
            if found is None:
                return
            line, self.skipping = line[found.start() :], False
        if line:
            name, colon, value = line.partition(b":")
            if not colon or not HEADER_NAME.fullmatch(name.strip()):
                # Not a header: a body whose length was wrong, or junk. A header may start later in the line.
                self._junk(out, f"not a header line: {line[:80]!r}")
                found = CONTENT_LENGTH.search(line, 1)
                if found is not None:
                    self.skipping = False
                    self._header_line(line[found.start() :], out)
                return
            self.headers[name.strip().lower().decode("latin-1")] = value.strip()
            return
        if not self.headers:  # blank lines between messages are harmless
            return
        value, self.headers = self.headers.get("content-length"), {}
        if value is None:
            self._junk(out, "a message without a Content-Length header")
        elif not value.isdigit() or len(value) > 12:
            self._junk(out, f"Content-Length is not a size: {value[:40]!r}")
        elif not 0 < int(value) <= self.max_bytes:
            self._junk(out, f"Content-Length {int(value)} is outside 1..{self.max_bytes}")
        else:
            self.length = int(value)


def error_response(msg_id, code: int, message: str) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "error": {"code": code, "message": message}}


class Dispatcher:
    """Checks each message as JSON-RPC and LSP's lifecycle want it, then hands it to pygls's protocol."""

    def __init__(self, protocol):
        self.protocol = protocol
        self.initialize_seen = False

    def send(self, message: dict) -> None:
        self.protocol._send_data(message)

    def frame_error(self, error: FrameError) -> None:
        self.send(error_response(None, PARSE_ERROR, f"unreadable message: {error}"))

    def body(self, body: bytes) -> None:
        try:
            raw = json.loads(body)
        except (ValueError, RecursionError) as e:
            self.send(error_response(None, PARSE_ERROR, f"the message is not JSON: {e}"))
            return
        if not isinstance(raw, dict):
            self.send(error_response(None, INVALID_REQUEST, "a message must be a JSON object (batches are not LSP)"))
            return
        msg_id = raw.get("id")
        has_id = "id" in raw and isinstance(msg_id, (str, int)) and not isinstance(msg_id, bool)
        method = raw.get("method")
        if raw.get("jsonrpc") != "2.0" or ("method" in raw and not isinstance(method, str)):
            if "method" in raw or has_id:
                self.send(error_response(msg_id if has_id else None, INVALID_REQUEST, "not a JSON-RPC 2.0 message"))
            return
        if method is None:  # a response to one of our requests
            if not has_id:
                log.warning("a response without an id: %.200s", body)
                return
            self._to_protocol(raw, None, None)
            return
        is_request = "id" in raw
        if is_request and not has_id:
            self.send(error_response(None, INVALID_REQUEST, "a request id must be a string or an integer"))
            return
        reply = self._lifecycle(method, is_request)
        if reply is _DROP:
            return
        if reply is not None:
            self.send(error_response(msg_id, *reply))
            return
        self._to_protocol(raw, msg_id if is_request else None, method)

    def _lifecycle(self, method: str, is_request: bool) -> tuple[int, str] | None:
        if method == types.EXIT:
            return None
        if self.protocol._shutdown:
            return (INVALID_REQUEST, f"the server is shut down: {method} refused") if is_request else _DROP
        if method == types.INITIALIZE:
            return (INVALID_REQUEST, "the server is already initialized") if self.initialize_seen else None
        if not self.initialize_seen:
            return (SERVER_NOT_INITIALIZED, f"{method} before initialize") if is_request else _DROP
        return None

    def _to_protocol(self, raw: dict, request_id, method: str | None) -> None:
        try:
            message = self.protocol.structure_message(raw)
        except JsonRpcException as e:
            if request_id is not None:
                self.send(error_response(request_id, INVALID_PARAMS, f"{method}: the params do not fit: {e}"))
            elif method is None:  # a malformed response: its request is told it failed
                self._fail_request(raw.get("id"), "the client's reply was malformed")
            else:
                log.warning("dropped %s notification with params that do not fit", method)
            return
        if method == types.INITIALIZE:
            self.initialize_seen = True
        self.protocol.handle_message(message)

    def _fail_request(self, msg_id, why: str) -> None:
        future = self.protocol._request_futures.pop(msg_id, None)
        if future is not None and not future.done():
            future.set_exception(JsonRpcException(why))


_DROP = (0, "")  # a notification the lifecycle drops: nothing is sent


async def serve(read: Callable[[], Awaitable[bytes]], protocol, stop) -> None:
    """Read messages until the stream ends or `stop` is set; every one goes through Frames and Dispatcher."""
    frames, dispatch = Frames(), Dispatcher(protocol)
    while not stop.is_set():
        data = await read()
        if not data:
            return
        for item in frames.feed(data):
            try:
                if isinstance(item, FrameError):
                    dispatch.frame_error(item)
                else:
                    dispatch.body(item)
            except SystemExit:
                raise
            except Exception:  # one message's trouble never ends the server
                log.exception("could not handle a message")


def stdin_reader(executor) -> Callable[[], Awaitable[bytes]]:
    """Reads whatever stdin holds, up to 64 KiB, in a thread (the event loop never waits on a read)."""
    fd = os.dup(0)
    loop = asyncio.get_running_loop()

    def read() -> Awaitable[bytes]:
        return loop.run_in_executor(executor, os.read, fd, 1 << 16)

    return read
