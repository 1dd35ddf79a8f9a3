"""The language server under hostile input (issue 17): no wrong text in the document, no wedge, an answer to
every request. A raw client with hand-written framing drives `editspec-lsp` running the scripted model
(tests/scripted.py), so that every edit's exact text is known."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time

import pytest

from tests.raw_lsp import ROOT, UNVERSIONED_CAPABILITIES, RawClient, lsp_position, scripted

URI = "file:///work/hostile.py"
TOTAL = "def total(values):\n    s = 0\n    for v in values:\n        s = s + v\n    return s\n"
SUM = "def total(values):\n    return sum(values)\n"
USE_SUM = scripted(("    s = 0\n    for v in values:\n        s = s + v\n    return s", "    return sum(values)"))
# Line by line, so that a slow model streams several edits.
SLOW_EDIT = scripted(("s = 0", "t = 0"), ("s = s + v", "t = t + v"), ("return s", "return t"))
SLOW = "def total(values):\n    t = 0\n    for v in values:\n        t = t + v\n    return t\n"


@pytest.fixture
def make_client():
    clients = []

    def make(settings=None, delay=0.0, **kw) -> RawClient:
        env = {"EDITSPEC_SCRIPTED_DELAY": str(delay)}
        c = RawClient(
            settings=dict({"editIntervalMs": 0, "applyEditTimeoutMs": 2000}, **(settings or {})), env=env, **kw
        )
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


@pytest.fixture
def client(make_client) -> RawClient:
    c = make_client()
    c.initialize()
    return c


def rewrite_result(c: RawClient, msg_id: int, timeout: float = 30) -> dict:
    reply = c.response(msg_id, timeout)
    assert "result" in reply, reply
    return reply["result"]


def code_action(c: RawClient, uri: str, line: int, character: int, timeout: float = 30) -> dict:
    pos = {"line": line, "character": character}
    return c.call(
        "textDocument/codeAction",
        {"textDocument": {"uri": uri}, "range": {"start": pos, "end": pos}, "context": {"diagnostics": []}},
        timeout,
    )


# -- 1. wrong text: line breaks that are not LSP's --------------------------------------------------------------

ODD_BREAKS = ["\f", "\v", "\x1c", "\x1d", "\x1e", "\x85", "\u2028", "\u2029"]


@pytest.mark.parametrize("brk", ODD_BREAKS, ids=[f"U+{ord(b):04X}" for b in ODD_BREAKS])
def test_characters_python_breaks_lines_at_but_lsp_does_not(client, brk):
    head = f"import math  # page{brk}break\n\n\n"
    client.editor.open(URI, head + TOTAL)
    actions = code_action(client, URI, 4, 4)["result"]
    assert actions and actions[0]["title"].startswith("Rewrite total")
    result = rewrite_result(client, client.rewrite(URI, 4, 4, USE_SUM))
    assert result["applied"] is True
    assert client.editor.text(URI) == head + SUM


@pytest.mark.parametrize("brk", ["\f", "\u2028"], ids=["FF", "U+2028"])
def test_cancel_restores_a_function_holding_such_a_character(make_client, brk):
    c = make_client(delay=0.05)
    c.initialize()
    text = "import math\n\n\n" + TOTAL.replace("s = 0", f"s = 0  # a{brk}b")
    c.editor.open(URI, text)
    c.editor.hook = lambda params: (
        c.request("workspace/executeCommand", {"command": "editspec.cancel", "arguments": [URI]}) and None
    )
    result = rewrite_result(c, c.rewrite(URI, 3, 4, SLOW_EDIT))
    assert result["applied"] is False and result["reason"] == "cancelled"
    assert c.editor.applied, "the rewrite streamed nothing: the cancel was not tested"
    assert c.editor.text(URI) == text


# -- 2. the region is tracked, never found again by its text ------------------------------------------------------


def test_an_identical_copy_of_the_function_is_never_edited(make_client):
    c = make_client(delay=0.05)
    c.initialize()
    text = "import math\n\n\n" + TOTAL + "\n\n" + TOTAL
    c.editor.open(URI, text)
    inside = text.index("    for v")  # a line inside the first copy

    def user_types_then_refuses(params):
        c.editor.hook = None
        c.editor.change(URI, inside, inside, "    # mine\n")
        return {"applied": False, "failureReason": "stale version"}

    c.editor.hook = user_types_then_refuses
    result = rewrite_result(c, c.rewrite(URI, 3, 4, SLOW_EDIT))
    assert result == {"applied": False, "reason": "edited"}
    assert c.editor.text(URI) == text[:inside] + "    # mine\n" + text[inside:]
    assert c.editor.applied == [], "an edit was applied after the user edited the function"


def test_an_edit_above_moves_the_region_and_the_rewrite_goes_on(make_client):
    c = make_client(delay=0.05)
    c.initialize()
    text = "import math\n\n\n" + TOTAL + "\n\n" + TOTAL
    c.editor.open(URI, text)
    seen = []

    def user_types_above(params):
        if not seen:
            seen.append(1)
            c.editor.change(URI, 0, 0, "import os\n")
            return {"applied": False, "failureReason": "stale version"}
        return None

    c.editor.hook = user_types_above
    result = rewrite_result(c, c.rewrite(URI, 3, 4, SLOW_EDIT))
    assert result["applied"] is True
    assert c.editor.text(URI) == "import os\n" + "import math\n\n\n" + SLOW + "\n\n" + TOTAL


# -- 3. line ends ------------------------------------------------------------------------------------------------


def test_one_crlf_line_in_an_lf_file(client):
    text = "import math\r\n\n\n" + TOTAL
    client.editor.open(URI, text)
    result = rewrite_result(client, client.rewrite(URI, 3, 4, USE_SUM))
    assert result["applied"] is True, result
    assert client.editor.text(URI) == "import math\r\n\n\n" + SUM


def test_a_crlf_file_keeps_crlf_and_an_lf_line_elsewhere_keeps_lf(client):
    text = ("import math\n\n\n" + TOTAL).replace("\n", "\r\n").replace("import math\r\n", "import math\n", 1)
    client.editor.open(URI, text)
    result = rewrite_result(client, client.rewrite(URI, 3, 4, USE_SUM))
    assert result["applied"] is True, result
    assert client.editor.text(URI) == "import math\n\r\n\r\n" + SUM.replace("\n", "\r\n")


RUST_URI = "file:///work/hostile.rs"
RUST = (
    "/// Adds.\n///\n/// ```\n/// assert_eq!(add(2, 3), 5);\n/// ```\n"
    "pub fn add(a: i32, b: i32) -> i32 {\n    let s = a + b;\n    return s;\n}\n"
)


def test_a_function_whose_doc_holds_a_code_fence_is_rewritten_whole(client):
    client.editor.open(RUST_URI, RUST)
    result = rewrite_result(
        client, client.rewrite(RUST_URI, 6, 8, scripted(("    let s = a + b;\n    return s;", "    a + b")))
    )
    assert result["applied"] is True, result
    assert client.editor.text(RUST_URI) == RUST.replace("    let s = a + b;\n    return s;", "    a + b")


def test_a_half_written_line_elsewhere_does_not_stop_a_rewrite(client):
    text = "import math\n\n\n" + TOTAL + "\n\ndef other(:\n"
    client.editor.open(URI, text)
    result = rewrite_result(client, client.rewrite(URI, 3, 4, USE_SUM))
    assert result["applied"] is True, result
    assert client.editor.text(URI) == "import math\n\n\n" + SUM + "\n\ndef other(:\n"


def test_an_answer_with_no_definition_is_taken_back_out_of_the_document(client):
    text = "import math\n\n\n" + TOTAL
    client.editor.open(URI, text)
    result = rewrite_result(client, client.rewrite(URI, 3, 4, scripted((TOTAL.rstrip("\n"), "# total: gone"))))
    assert result["applied"] is False and "no definition" in json.dumps(result), result
    assert client.editor.text(URI) == text


CLASS = (
    "import math\r\n\n\nclass Acc:\n    def total(self, values):\n"
    "        s = 0\n        for v in values:\n            s = s + v\n        return s\n"
)
HINTS = scripted(("def total(self, values):", "from typing import List\n\ndef total(self, values: List[int]) -> int:"))


@pytest.mark.parametrize("delay", [0.0, 0.002])
def test_imports_the_answer_opens_with_go_to_the_document_s_imports(make_client, delay):
    """Streamed, the import lines first show at the function's head; the final edit writes them after the
    document's imports (its own line end kept there) and takes them out of the class, in one edit."""
    c = make_client(delay=delay)
    c.initialize()
    c.editor.open(URI, CLASS)
    result = rewrite_result(c, c.rewrite(URI, 4, 8, HINTS))
    assert result["applied"] is True, result
    assert c.editor.text(URI) == CLASS.replace("import math\r\n", "import math\r\nfrom typing import List\n").replace(
        "def total(self, values):", "def total(self, values: List[int]) -> int:"
    )
    (final,) = c.editor.applied[-1]["edit"]["documentChanges"]
    insert, change = final["edits"]  # two text edits: the lines between (`class Acc:`) are not written over
    assert insert == {
        "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 0}},
        "newText": "from typing import List\n",
    }
    assert change["range"]["start"]["line"] == 4 and "class Acc" not in change["newText"]


def test_a_cancelled_rewrite_with_imports_leaves_the_document_as_it_was(make_client):
    c = make_client(delay=0.01)
    c.initialize()
    c.editor.open(URI, CLASS)
    msg_id = c.rewrite(URI, 4, 8, HINTS)
    deadline = time.monotonic() + 20
    while "from typing" not in c.editor.text(URI):  # streamed: the import at the function's head, for now
        assert time.monotonic() < deadline, "the import line never streamed"
        time.sleep(0.01)
    c.request("workspace/executeCommand", {"command": "editspec.cancel", "arguments": [URI]})
    result = rewrite_result(c, msg_id)
    assert result["applied"] is False and result["reason"] == "cancelled", result
    assert c.editor.text(URI) == CLASS


def test_lone_cr_line_ends(client):
    text = "import math\r\r\r" + TOTAL
    client.editor.open(URI, text)
    result = rewrite_result(client, client.rewrite(URI, 3, 4, USE_SUM))
    assert result["applied"] is True, result
    assert client.editor.text(URI) == "import math\r\r\r" + SUM


def test_positions_after_astral_characters(client):
    text = "x = '🙂🙂'  # 😀\n\n\n" + TOTAL.replace("s = 0", "s = 0  # 🙂")
    client.editor.open(URI, text)
    pos = lsp_position(text, text.index("for v"))
    result = rewrite_result(client, client.rewrite(URI, pos["line"], pos["character"], scripted(("# 🙂", "# 😀!"))))
    assert result["applied"] is True
    assert client.editor.text(URI) == text.replace("s = 0  # 🙂", "s = 0  # 😀!")


@pytest.mark.parametrize("character", [0, 1, 4])
def test_a_document_that_starts_with_a_byte_order_mark(client, character):
    """A client may send the mark as the text's first character. The cursor before it or after it is on the
    first definition; the rewrite keeps the mark (it is the file's, not the function's)."""
    text = "\ufeff" + TOTAL
    client.editor.open(URI, text)
    actions = code_action(client, URI, 0, character)["result"]
    assert actions and actions[0]["title"].startswith("Rewrite total"), actions
    result = rewrite_result(client, client.rewrite(URI, 0, character, USE_SUM))
    assert result["applied"] is True, result
    assert client.editor.text(URI) == "\ufeff" + SUM


# -- 4. clients without versioned edits ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "instruction, expected",
    [
        # Out of date, our first edit lands on "def total" and changes it: the server must undo it.
        (scripted(("s = 0", "u = 0"), ("s = s + v", "u = u + v"), ("return s", "return u")), "u"),
        # Out of date, it replaces the "t" of "total" with "t": no change; the server must send it again.
        (SLOW_EDIT, "t"),
    ],
    ids=["lands elsewhere", "changes nothing"],
)
def test_an_unversioned_edit_applied_out_of_date(make_client, instruction, expected):
    c = make_client(delay=0.05, capabilities=UNVERSIONED_CAPABILITIES)
    c.initialize()
    text = "import math\n\n\n" + TOTAL
    c.editor.open(URI, text)
    stale = []

    def user_types_above_first(params):
        if not stale:  # the user's change reaches the editor first; then it applies our (now stale) edit
            stale.append(c.editor.text(URI))
            c.editor.change(URI, 0, 0, "import os\n")
            return c.editor.apply_normally(params, check_version=False)
        return None

    c.editor.hook = user_types_above_first
    result = rewrite_result(c, c.rewrite(URI, 3, 4, instruction))
    assert stale
    assert result["applied"] is True, result
    body = f"def total(values):\n    {expected} = 0\n    for v in values:\n        {expected} = {expected} + v\n"
    assert c.editor.text(URI) == "import os\n" + "import math\n\n\n" + body + f"    return {expected}\n"


# -- 5. an editor that answers applyEdit badly, or never -----------------------------------------------------------

BAD_REPLIES = {
    "null result": {"raw": {"jsonrpc": "2.0", "result": None}, "with_id": True},
    "no result": {"raw": {"jsonrpc": "2.0"}, "with_id": True},
    "empty object": {"raw": {}},
    "error": {"raw": {"jsonrpc": "2.0", "error": {"code": -32603, "message": "no"}}, "with_id": True},
    "applied is a string": {"raw": {"jsonrpc": "2.0", "result": {"applied": "yes"}}, "with_id": True},
    "no answer": "silent",
}


@pytest.mark.parametrize("reply", BAD_REPLIES.values(), ids=BAD_REPLIES.keys())
def test_a_bad_or_missing_apply_edit_reply_never_wedges_the_server(client, reply):
    text = "import math\n\n\n" + TOTAL
    client.editor.open(URI, text)
    client.editor.hook = lambda params: reply
    t0 = time.monotonic()
    result = rewrite_result(client, client.rewrite(URI, 3, 4, USE_SUM), timeout=20)
    assert result["applied"] is False, result
    assert time.monotonic() - t0 < 15
    assert client.editor.text(URI) == text  # the editor applied nothing
    # The model is free again: the next rewrite, in this or another document, runs.
    client.editor.hook = None
    result = rewrite_result(client, client.rewrite(URI, 3, 4, USE_SUM), timeout=20)
    assert result["applied"] is True
    assert client.editor.text(URI) == "import math\n\n\n" + SUM


def test_cancel_works_while_the_editor_does_not_answer(client):
    client.editor.open(URI, "import math\n\n\n" + TOTAL)
    client.editor.hook = lambda params: "silent"
    msg_id = client.rewrite(URI, 3, 4, USE_SUM)
    client.wait_for(lambda m: m.get("method") == "workspace/applyEdit")
    cancel = client.call("workspace/executeCommand", {"command": "editspec.cancel", "arguments": [URI]})
    assert cancel["result"] == {"cancelled": [URI]}
    assert client.response(msg_id, timeout=10)["result"]["applied"] is False


# -- 6 and 7. never block the event loop: files and parsing -----------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_code_action_for_an_unopened_fifo(client, tmp_path):
    fifo = tmp_path / "x.py"
    os.mkfifo(fifo)
    t0 = time.monotonic()
    reply = code_action(client, fifo.as_uri(), 0, 0, timeout=5)
    assert reply["result"] is None
    client.editor.open(URI, TOTAL)
    assert code_action(client, URI, 1, 4, timeout=5)["result"]
    assert time.monotonic() - t0 < 5


def test_a_slow_parse_is_bounded_and_does_not_block_other_requests(client):
    # tree-sitter-python's time grows quadratically with comment lines after an indented block.
    slow = "def f():\n    if x:\n        pass\n" + "# c\n" * 30000
    client.editor.open("file:///work/slow.py", slow)
    client.editor.open(URI, TOTAL)
    t0 = time.monotonic()
    slow_id = client.request(
        "textDocument/codeAction",
        {
            "textDocument": {"uri": "file:///work/slow.py"},
            "range": {"start": {"line": 1, "character": 4}, "end": {"line": 1, "character": 4}},
            "context": {"diagnostics": []},
        },
    )
    time.sleep(0.3)
    t1 = time.monotonic()
    assert code_action(client, URI, 1, 4, timeout=5)["result"]
    assert time.monotonic() - t1 < 1.5, "a code action waited behind another document's parse"
    reply = client.response(slow_id, timeout=20)
    assert "result" in reply
    elapsed = time.monotonic() - t0
    assert elapsed < 12, elapsed  # the parse budget (5 s) and a margin
    refused = client.response(client.rewrite("file:///work/slow.py", 1, 4, USE_SUM), timeout=20)
    assert refused["error"]["code"] == -32602 and "parse" in refused["error"]["message"]


# -- 8. framing ----------------------------------------------------------------------------------------------------


def _ping(c: RawClient) -> dict:
    return c.call("workspace/executeCommand", {"command": "editspec.cancel", "arguments": []}, timeout=10)


BODY = json.dumps({"jsonrpc": "2.0", "id": "framed", "method": "workspace/executeCommand",
                   "params": {"command": "editspec.cancel", "arguments": []}}).encode()  # fmt: skip
BROKEN_FRAMES = {
    "not a number": b"Content-Length: abc\r\n\r\n" + BODY,
    "negative": b"Content-Length: -5\r\n\r\n" + BODY,
    "zero": b"Content-Length: 0\r\n\r\n" + BODY,
    "10**15": b"Content-Length: 1000000000000000\r\n\r\n" + BODY,
    "10**30": b"Content-Length: " + str(10**30).encode() + b"\r\n\r\n" + BODY,
    "too short": b"Content-Length: %d\r\n\r\n" % (len(BODY) - 5) + BODY,
    "no Content-Length": b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + BODY,
    "not JSON": b"Content-Length: 9\r\n\r\n{not json",
    "junk line": b"hello there\r\n",
}


@pytest.mark.parametrize("frame", BROKEN_FRAMES.values(), ids=BROKEN_FRAMES.keys())
def test_a_broken_frame_gets_a_parse_error_and_reading_goes_on(client, frame):
    client.send_raw(frame)
    error = client.wait_for(lambda m: m.get("error", {}).get("code") == -32700, timeout=10)
    assert error["id"] is None
    assert "result" in _ping(client)
    assert client.alive()


@pytest.mark.parametrize(
    "header", [b"content-length: %d\r\n\r\n", b"Content-Length: %d\n\n", b"CONTENT-LENGTH:%d\r\nX-Other: 1\r\n\r\n"]
)
def test_headers_in_other_cases_and_lf_only_lines_are_read(client, header):
    client.send_raw(header % len(BODY) + BODY)
    reply = client.response("framed", timeout=10)
    assert "result" in reply


def test_a_too_long_length_takes_the_next_message_then_reading_goes_on(client):
    client.send_raw(b"Content-Length: %d\r\n\r\n" % (len(BODY) + 20) + BODY)
    client.send({"jsonrpc": "2.0", "id": "swallowed", "method": "shutdownx"})
    client.wait_for(lambda m: m.get("error", {}).get("code") == -32700, timeout=10)
    assert "result" in _ping(client)


def test_a_batch_and_a_non_object_get_invalid_request(client):
    for body in (b"[1, 2]", b'"hello"', b'{"jsonrpc": "1.0", "id": 7, "method": "x"}'):
        client.send_raw(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    errors = [client.wait_for(lambda m, n=n: len([x for x in client.received if "error" in x]) >= n) for n in (3,)]
    assert errors
    codes = sorted(m["error"]["code"] for m in client.received if "error" in m)
    assert codes == [-32600, -32600, -32600]


# -- protocol manners ------------------------------------------------------------------------------------------------

BAD_PARAMS = {
    "line -1": {"textDocument": {"uri": URI}, "range": {"start": {"line": -1, "character": 0},
                "end": {"line": 0, "character": 0}}, "context": {"diagnostics": []}},
    "no range": {"textDocument": {"uri": URI}, "context": {"diagnostics": []}},
    "string params": "hello",
}  # fmt: skip


@pytest.mark.parametrize("params", BAD_PARAMS.values(), ids=BAD_PARAMS.keys())
def test_a_request_with_bad_params_gets_an_error_with_its_id(client, params):
    reply = client.call("textDocument/codeAction", params, timeout=10)
    assert reply["error"]["code"] == -32602


def test_lifecycle_before_initialize_and_a_second_initialize(make_client):
    c = make_client()
    assert c.call("textDocument/codeAction", BAD_PARAMS["no range"])["error"]["code"] == -32002
    assert c.call("initialize", {})["error"]["code"] == -32602  # initialize's params must fit, too
    c.initialize()
    c.editor.open(URI, TOTAL)
    again = c.call("initialize", {"processId": None, "rootUri": None, "capabilities": {}})
    assert again["error"]["code"] == -32600
    assert code_action(c, URI, 1, 4)["result"], "the second initialize dropped the open documents"


def test_two_back_to_back_rewrites_of_one_document(make_client):
    c = make_client(delay=0.05)
    c.initialize()
    c.editor.open(URI, "import math\n\n\n" + TOTAL)
    first, second = c.rewrite(URI, 3, 4, SLOW_EDIT), c.rewrite(URI, 3, 4, SLOW_EDIT)
    replies = [c.response(first), c.response(second)]
    assert ["result" in r for r in replies] == [True, False], replies
    assert "already running" in replies[1]["error"]["message"]
    assert c.editor.text(URI) == "import math\n\n\n" + SLOW


def test_shutdown_during_a_rewrite(make_client):
    c = make_client(delay=0.1)
    c.initialize()
    text = "import math\n\n\n" + TOTAL
    c.editor.open(URI, text)
    rewrite = c.rewrite(URI, 3, 4, SLOW_EDIT)
    c.wait_for(lambda m: m.get("method") == "workspace/applyEdit")
    shutdown = c.call("shutdown", None, timeout=20)
    assert shutdown == {"jsonrpc": "2.0", "id": shutdown["id"], "result": None}
    assert c.response(rewrite, timeout=5)["result"]["reason"] == "cancelled"
    assert c.editor.text(URI) == text  # put back before shutdown answered
    edits = len(c.editor.applied)
    after = c.call("textDocument/codeAction", BAD_PARAMS["no range"], timeout=5)
    assert after["error"]["code"] == -32600
    time.sleep(0.5)
    assert len(c.editor.applied) == edits, "an edit arrived after shutdown"
    c.notify("exit", None)
    assert c.proc.wait(10) == 0


def test_exit_without_shutdown_exits_1(client):
    client.notify("exit", None)
    assert client.proc.wait(10) == 1


@pytest.mark.parametrize("argument", [[123], [{"uri": URI}], [URI, URI]], ids=["number", "object", "two"])
def test_a_malformed_cancel_is_refused_and_cancels_nothing(make_client, argument):
    c = make_client(delay=0.05)
    c.initialize()
    c.editor.open(URI, "import math\n\n\n" + TOTAL)
    rewrite = c.rewrite(URI, 3, 4, SLOW_EDIT)
    c.wait_for(lambda m: m.get("method") == "workspace/applyEdit")
    reply = c.call("workspace/executeCommand", {"command": "editspec.cancel", "arguments": argument})
    assert reply["error"]["code"] == -32602
    assert c.response(rewrite)["result"]["applied"] is True
    assert c.editor.text(URI) == "import math\n\n\n" + SLOW


def test_closing_the_document_cancels_its_rewrite_without_another_edit(make_client):
    c = make_client(delay=0.05)
    c.initialize()
    c.editor.open(URI, "import math\n\n\n" + TOTAL)
    rewrite = c.rewrite(URI, 3, 4, SLOW_EDIT)
    c.wait_for(lambda m: m.get("method") == "workspace/applyEdit")
    c.notify("textDocument/didClose", {"textDocument": {"uri": URI}})
    n = len(c.editor.applied)
    result = c.response(rewrite)["result"]
    assert result == {"applied": False, "reason": "cancelled", "message": "the document was closed during the rewrite"}
    assert len(c.editor.applied) <= n + 1  # at most the edit already on its way
    shown = [m["params"]["message"] for m in c.received if m.get("method") == "window/showMessage"]
    assert not any("you edited" in m for m in shown), shown


# -- fuzz --------------------------------------------------------------------------------------------------------------


def test_fuzz(make_client):
    """Random broken frames, params and orderings, user edits, rewrites, cancels and odd applyEdit replies for
    a bounded time; then: the server is alive, every request was answered, and the document holds exactly the
    user's lines and the scripted rewrites' lines (no edit landed anywhere else)."""
    rng = random.Random(17)
    c = make_client(delay=0.01)
    c.initialize()
    funcs = [f"def f{n}(x):\n    return x + {n}\n" for n in range(4)]
    c.editor.open(URI, "import math\n\n\n" + "\n\n".join(funcs))
    requests, comments = [], 0

    def odd_reply(params):
        r = rng.random()
        if r < 0.1:
            return {"applied": False}
        if r < 0.15:
            return {"raw": {"jsonrpc": "2.0", "result": None}, "with_id": True}
        return None

    c.editor.hook = odd_reply
    deadline = time.monotonic() + 20
    methods = ["textDocument/codeAction", "workspace/executeCommand", "textDocument/hover", "initialize", "x/y"]
    junk = [None, 1, "x", [], {}, {"uri": 5}, {"textDocument": {"uri": URI}}, {"command": "editspec.rewrite"},
            {"command": "editspec.rewrite", "arguments": [{"uri": URI, "position": "top"}]}]  # fmt: skip
    while time.monotonic() < deadline:
        r = rng.random()
        text = c.editor.text(URI)
        if r < 0.15:
            c.send_raw(rng.choice(list(BROKEN_FRAMES.values())[:-1]))  # not the bare junk line: it may join a header
        elif r < 0.35:
            requests.append(c.request(rng.choice(methods), rng.choice(junk)))
        elif r < 0.6:  # the user adds a comment line at the start of a random line
            starts = [0] + [i + 1 for i, ch in enumerate(text) if ch == "\n" and i + 1 < len(text)]
            at = rng.choice(starts)
            c.editor.change(URI, at, at, f"# u{comments}\n")
            comments += 1
        elif r < 0.8:
            n = rng.randrange(4)
            at = text.find(f"def f{n}(")
            if at >= 0:
                pos = lsp_position(text, at)
                instruction = scripted((f"return x + {n}", f"return x + {n} or x"))
                requests.append(c.rewrite(URI, pos["line"], 4, instruction))
        elif r < 0.9:
            requests.append(c.request("workspace/executeCommand", {"command": "editspec.cancel", "arguments": [URI]}))
        else:
            pos = lsp_position(text, rng.randrange(len(text)))
            where = {"textDocument": {"uri": URI}, "range": {"start": pos, "end": pos}}
            requests.append(c.request("textDocument/codeAction", dict(where, context={"diagnostics": []})))
        time.sleep(rng.random() * 0.05)
    c.editor.hook = None
    outcomes = {}
    for msg_id in requests:
        reply = c.response(msg_id, timeout=30)
        result = reply.get("result")
        kind = result.get("reason", "applied") if isinstance(result, dict) and "applied" in result else "other"
        kind = f"error {reply['error']['code']}" if "error" in reply else kind
        outcomes[kind] = outcomes.get(kind, 0) + 1
    print("fuzz outcomes:", outcomes, "user lines:", comments, "edits applied:", len(c.editor.applied))
    assert outcomes.get("applied", 0) >= 3 and outcomes.get("edited", 0) + outcomes.get("cancelled", 0) >= 1
    assert c.alive()
    final = c.editor.text(URI)
    lines = final.splitlines(keepends=True)
    user = [line for line in lines if line.startswith("# u")]
    assert len(user) == comments and len(set(user)) == comments, "a user's line was lost or changed"
    rest = [line for line in lines if not line.startswith("# u")]
    for n in range(4):
        i = rest.index(f"def f{n}(x):\n")
        body = rest[i + 1].rstrip("\n")
        assert body.startswith(f"    return x + {n}") and set(body[len(f"    return x + {n}") :].split(" or ")) <= {
            "",
            "x",
        }
    assert "".join(rest).replace(" or x", "") == "import math\n\n\n" + "\n\n".join(funcs)
    # The server's copy of the document is the editor's: a last rewrite lands exactly.
    at = final.find("def f3(")
    reply = c.response(c.rewrite(URI, lsp_position(final, at)["line"], 4, scripted(("def f3", "def g3"))), timeout=30)
    assert reply["result"]["applied"] is True
    assert c.editor.text(URI) == final.replace("def f3", "def g3")


def test_the_real_server_entry_point_exits_with_lsp_codes():
    """The installed `editspec-lsp` (not the scripted one): exit without shutdown is 1."""
    proc = subprocess.Popen([sys.executable, "-m", "lsp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, cwd=ROOT)
    body = json.dumps({"jsonrpc": "2.0", "method": "exit"}).encode()
    proc.stdin.write(b"Content-Length: %d\r\n\r\n" % len(body) + body)
    proc.stdin.flush()
    assert proc.wait(20) == 1


@pytest.mark.parametrize(
    "name,header,old",
    [
        ("ledger.rb", "def balance", "total = 0"),
        ("Ledger.php", "function balance", "$total = 0;"),
        ("Ledger.kt", "fun balance", "var total = 0"),
        ("ledger.lua", "function Ledger:balance", "local total = 0"),
        ("Ledger.swift", "var balance", "var total = 0"),
        ("deploy.sh", "log()", 'echo "[$(date +%T)] $*"'),
    ],
)
def test_a_rewrite_streams_into_a_file_of_another_language(client, name, header, old):
    """The server goes by the file's name: the cursor's definition is found and rewritten in place, nothing else."""
    text = (ROOT / "samples" / name).read_text()
    uri = f"file:///work/{name}"
    client.editor.open(uri, text, language=name.rsplit(".", 1)[1])
    line = text[: text.index(header)].count("\n")
    assert text.index(old) > text.index(header)  # in that definition
    new = old.replace(" 0", " 1 - 1").replace("echo", "printf '%s\\n'")
    result = rewrite_result(client, client.rewrite(uri, line + 1, 2, scripted((old, new))))
    assert result["applied"] is True, result
    assert client.editor.text(uri) == text.replace(old, new, 1)


def streams_as(make_client, uri: str, text: str, old: str, new: str, final: str, line: int, **kw) -> None:
    """The scripted rewrite of `old` into `new` at `line` streams into `text` in several edits and leaves `final`;
    every line the document shows meanwhile is one of `text` or of `final`: nothing the result does not have, not
    even for a moment."""
    client = make_client(delay=0.002)
    client.initialize()
    client.editor.open(uri, text, language=kw.get("language", "python"))
    states: list[str] = []

    def record(params):
        reply = client.editor.apply_normally(params)
        states.append(client.editor.text(uri))
        return reply

    client.editor.hook = record
    result = rewrite_result(client, client.rewrite(uri, line, kw.get("character", 2), scripted((old, new))))
    assert result["applied"] is True, result
    assert client.editor.text(uri) == final
    assert len(states) >= kw.get("edits", 3)
    known = set(text.split("\n")) | set(final.split("\n"))
    for state in states:
        assert set(state.split("\n")) <= known, state


def test_an_answer_in_spaces_streams_into_a_tab_indented_file_in_tabs(make_client):
    """As `rewrite --apply` writes it (tests/test_cli_exact.py): the coder writes four spaces a level whatever it
    is shown; the streamed lines follow the file's tabs from the first one."""
    text = "class A:\n\tdef f(self, xs):\n\t\treturn sum(xs)\n"
    answer = "def f(self, xs):\n    if not xs:\n        return 0\n    for x in xs:\n        if x < 0:\n"
    answer += "            raise ValueError(x)\n    return sum(xs)"
    final = "class A:\n\tdef f(self, xs):\n\t\tif not xs:\n\t\t\treturn 0\n\t\tfor x in xs:\n\t\t\tif x < 0:\n"
    final += "\t\t\t\traise ValueError(x)\n\t\treturn sum(xs)\n"
    streams_as(make_client, "file:///work/tabs.py", text, "def f(self, xs):\n\treturn sum(xs)", answer, final, 1)


@pytest.mark.parametrize("brk", ODD_BREAKS)
def test_a_method_whose_string_holds_a_character_python_breaks_lines_at_streams_as_written(make_client, brk):
    """Inside a string such a character is data: the method's lines are indented as a whole, and no line streams
    with the method's indentation put after it (tests/test_cli_exact.py)."""
    text = f"class A:\n    def f(self):\n        s = 'a{brk}b'\n        return s\n"
    final = text.replace("return s", "if not s:\n            return ''\n        return s + s")
    new = "\n    if not s:\n        return ''\n    return s + s"
    streams_as(make_client, "file:///work/odd.py", text, "\n    return s", new, final, 1)


def test_a_docstring_streams_into_a_tab_indented_file_only_once_closed(make_client):
    """The lines after a docstring's opening quotes may be its own text or code: the parse of a partial answer cannot
    tell, so they wait for the closing quotes (a docstring's lines then follow the code into tabs, a string's keep
    their spaces)."""
    text = 'class A:\n\tdef f(self, xs):\n\t\t"""Sum.\n\t\t"""\n\t\treturn sum(xs)\n'
    shown = 'def f(self, xs):\n\t"""Sum.\n\t"""\n\treturn sum(xs)'
    answer = 'def f(self, xs):\n    """Sum.\n  two spaces: the docstring\'s own\n    more of it\n    """\n'
    answer += "    if not xs:\n        return 0\n    return sum(xs)"
    final = 'class A:\n\tdef f(self, xs):\n\t\t"""Sum.\n\t  two spaces: the docstring\'s own\n\t\tmore of it\n'
    final += '\t\t"""\n\t\tif not xs:\n\t\t\treturn 0\n\t\treturn sum(xs)\n'
    streams_as(make_client, "file:///work/tabs.py", text, shown, answer, final, 1)


def test_a_block_comment_streams_into_a_tab_indented_file_only_once_closed(make_client):
    """A block comment's lines are aligned to its opening (a tab, and the space before `*`); before `*/` they cannot
    be told from code."""
    text = "int f(void) {\n\treturn 1;\n}\n"
    answer = "int f(void) {\n    /* a\n     * b\n     * c */\n    if (g())\n        return 3;\n    return 2;\n}"
    final = "int f(void) {\n\t/* a\n\t * b\n\t * c */\n\tif (g())\n\t\treturn 3;\n\treturn 2;\n}\n"
    streams_as(make_client, "file:///work/tabs.c", text, text.rstrip("\n"), answer, final, 0, character=5, language="c")


def test_a_doc_comment_naming_code_streams_into_a_tab_indented_file_only_once_closed(make_client):
    """JSDoc that quotes a name in backticks: the partial parse reads `/**` as a regex and the backticks as a
    template, so the comment's lines went into tabs as code while it was open (` * ` under `/**` shown a tab in)."""
    text = "function total(xs) {\n\treturn xs.length;\n}\n"
    answer = "function total(xs) {\n    /**\n     * The count of `xs`.\n     * Never negative.\n     */\n"
    answer += "    if (!xs)\n        return 0;\n    return xs.length;\n}"
    final = "function total(xs) {\n\t/**\n\t * The count of `xs`.\n\t * Never negative.\n\t */\n"
    final += "\tif (!xs)\n\t\treturn 0;\n\treturn xs.length;\n}\n"
    streams_as(make_client, "file:///work/tabs.js", text, text.rstrip("\n"), answer, final, 0, character=10,
               language="javascript")  # fmt: skip


@pytest.mark.parametrize(
    ("name", "code", "row"),
    [
        ("x.py", 'def f(self, xs):\n    """Sum.\n  two\n', 1),
        ("x.py", 'def f(self, xs):\n    """Sum."""\n    if x:\n', None),  # closed
        ("x.py", "def f(self, xs):\n    return g(a,\n", None),  # no string
        ("x.py", 'def f(self, xs):\n    s = """a\n', None),  # on the last line: nothing after it yet
        ("x.js", "function total() {\n  return `a\nb\n", 1),
        ("x.js", 'function total() {\n  const s = "a";\n  return `b`;\n', None),
        ("x.ts", "function total(): number {\n  return `a\nb\n", 1),
        ("x.go", "func f() int {\n\ts := `a\nb\n", 1),
        ("x.go", 'func f() int {\n\ts := "a"\n\treturn 1\n', None),
        ("x.java", 'public int f() {\n    String s = """\n  hi\n', 1),
        ("x.kt", 'fun f(): Int {\n    val s = """a\nb\n', 1),
        ("x.lua", "function f()\n  local s = [[a\nb\n", 1),
        ("x.cpp", 'int f() {\n    auto s = R"(a\nb\n', 1),
        ("x.sh", "f() {\n  cat <<EOF\nhi\n", 1),
        ("x.rs", 'fn f() -> i32 {\n    let s = "a\nb\n', 1),
        # A block comment's lines are aligned to its opening, not indented: the same.
        ("x.c", "int f() {\n    /* a\n     * b\n", 1),
        ("x.c", "int f() {\n    /* a */\n    x = 1;\n", None),
        ("x.js", "function f() {\n  /* a\n   * b\n", 1),
        ("x.go", "func f() int {\n\t/* a\n\t * b\n", 1),
        ("x.java", "int f() {\n    /* a\n     * b\n", 1),
        ("x.rs", "fn f() {\n    /* a\n     * b\n", 1),
        ("x.c", "int f() {\n    x = a / *p;\n    y = 1;\n", None),
        # The other ways grammars show an open string or comment (see open_string_row).
        ("x.js", "function f() {\n  /**\n   * a `b` c\n   * d\n", 1),  # `/**` read as a regex
        ("x.ts", "/**\n * a\n */\nvar s = 1;\n/**\n * b `c` is d\n * e\n", 4),
        ("x.swift", 'func f() {\n  let s = """\n  ab\n  cd\n', 1),  # its closing quotes missing
        ("x.swift", 'func f() {\n  let s = """\n  ab\n  """\n  x\n', None),
        ("x.swift", "func f() {\n  /* ab\n  cd\n", 1),  # an operator `/*`
        ("x.kt", "fun f() {\n  /* ab\n  cd\n", 1),  # left out of the parse
        ("x.cs", 'int F() {\n  var s = @"ab\n  cd\n', 1),  # an error of its own
        ("x.cs", 'int F() {\n  var s = """\n  ab\n  cd\n', 1),
        ("x.sh", "f() {\n  s='ab\n  cd\n", 1),
        ("x.sh", "f() {\n\tcat >a <<-\\EOF &&\n\t\taaa\n\t\tbbb\n", 1),
        ("x.sh", "f() {\n  case $p in\n    */*) x=1 ;;\n  esac\n", None),  # no block comments in bash
        ("x.sh", "f() {\n  local l=`a | b`\n  c\n", None),  # closed on its line
        ("x.rs", 'fn f() {\n    let s = r#"<html>\n  <head>\n', 1),
        ("x.rs", 'fn f() {\n    let s = r#"<html>"#;\n  let t = 1;\n', None),
        ("x.rb", "def f\n=begin\nab\n  cd\n", 1),
        ("x.rb", "def f\n=begin\nab\n=end\n  cd\n", None),
        ("x.rb", "def f\n  s = <<~EOS\n    ab\n    cd\n", 1),  # the heredoc's end empty
        ("x.rb", "def f\n  s = <<~EOS\n    ab\n    EOS\n  x = 1\n", None),
        ("x.lua", "function f()\n  --[[ a\n  b\n", 1),
        ("x.lua", "function f()\n  local g = glob(d .. '/*.py')\n  x = 1\n", None),
    ],
)
def test_open_string_row(name, code, row):
    from editspec.locate import language_for
    from editspec.rewrite import open_string_row

    assert open_string_row(code, language_for(name)) == row


def test_an_answer_from_column_0_streams_in_at_the_header_s_indentation(make_client):
    """A member whose header is in spaces and body in tabs is shown with its header indented; an answer the model
    wrote from column 0 goes into the document at the header's column, from its first streamed line, a template
    literal's line as written."""
    text = "class Cart {\n  add(item) {\n\tthis.items.push(item);\n  }\n\n"
    text += "  total() {\n\tlet sum = 0;\n\treturn sum;\n  }\n}\n"
    body = "  total() {\n\tlet sum = 0;\n\treturn sum;\n  }"
    final = text.replace(body, "  total() {\n    return `a\nb`;\n  }")
    answer = "total() {\n  return `a\nb`;\n}"
    streams_as(
        make_client, "file:///work/cart.js", text, body, answer, final, 5, character=3, language="javascript", edits=2
    )
