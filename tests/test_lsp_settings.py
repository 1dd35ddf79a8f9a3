"""The language server's settings and documented behaviours, each observed from the client's side, on the
scripted model (tests/scripted.py) so that every edit is known."""

from __future__ import annotations

import json
import time

import pytest

from tests.raw_lsp import RawClient, scripted
from tests.test_lsp_hostile import SLOW, SLOW_EDIT, SUM, TOTAL, USE_SUM, code_action

URI = "file:///work/settings.py"
OTHER = "file:///work/other.py"
HEAD = "import math\nimport os\n\n\n"


@pytest.fixture
def make_client():
    clients = []

    def make(settings=None, delay=0.0, args=(), **kw) -> RawClient:
        c = RawClient(settings=settings, env={"EDITSPEC_SCRIPTED_DELAY": str(delay)}, args=args, **kw)
        clients.append(c)
        return c

    yield make
    for c in clients:
        c.close()


def start(make_client, settings=None, delay=0.0, **kw) -> RawClient:
    c = make_client(settings=dict({"editIntervalMs": 0}, **(settings or {})), delay=delay, **kw)
    c.initialize()
    c.editor.open(URI, HEAD + TOTAL)
    return c


def rewrite(c: RawClient, instruction: str, uri: str = URI, **extra) -> dict:
    reply = c.response(c.rewrite(uri, 4, 4, instruction, **extra))
    assert "result" in reply, reply
    return reply["result"]


def edits_of_rewrites(c: RawClient) -> int:
    return len([p for p in c.editor.applied if p.get("label") != "editspec: restore"])


def loader_calls(c: RawClient) -> list[dict]:
    prefix = "scripted open_decoder: "
    return [json.loads(line[len(prefix) :]) for line in c.stderr_text().splitlines() if line.startswith(prefix)]


def test_streaming_final_sends_one_edit_and_edits_stream_several(make_client):
    final = start(make_client, {"streaming": "final"}, delay=0.02)
    assert rewrite(final, SLOW_EDIT)["applied"] is True
    assert len(final.editor.applied) == 1 and final.editor.text(URI) == HEAD + SLOW
    streamed = start(make_client, {"streaming": "edits"}, delay=0.02)
    assert rewrite(streamed, SLOW_EDIT)["applied"] is True
    assert len(streamed.editor.applied) > 2 and streamed.editor.text(URI) == HEAD + SLOW


def test_edit_interval_spaces_the_streamed_edits(make_client):
    often = start(make_client, {"editIntervalMs": 0}, delay=0.05)
    rewrite(often, SLOW_EDIT)
    rarely = start(make_client, {"editIntervalMs": 60_000}, delay=0.05)
    rewrite(rarely, SLOW_EDIT)
    assert len(rarely.editor.applied) <= 2 < len(often.editor.applied)  # at most the first streamed one, the final
    assert rarely.editor.text(URI) == often.editor.text(URI) == HEAD + SLOW


def test_preload_loads_the_model_at_initialize_with_progress_and_can_be_switched_off(make_client):
    eager = start(make_client, {"preload": True})
    eager.wait_for(lambda m: m.get("method") == "window/workDoneProgress/create")
    time.sleep(0.5)
    assert len(loader_calls(eager)) == 1
    lazy = start(make_client, {"preload": False})
    time.sleep(1.0)
    assert loader_calls(lazy) == []
    assert not any(m.get("method") == "window/workDoneProgress/create" for m in lazy.received)
    assert rewrite(lazy, USE_SUM)["applied"] is True and len(loader_calls(lazy)) == 1


@pytest.mark.parametrize("read_ahead", [True, False])
def test_read_ahead_reads_the_prompt_while_the_instruction_is_typed(make_client, read_ahead):
    c = start(make_client, {"readAhead": read_ahead})
    assert rewrite(c, "unchanged")["applied"] is True  # the model is loaded and idle
    c.editor.change(URI, 0, 0, "import sys\n")  # a new version: a new prompt prefix
    assert code_action(c, URI, 5, 4)["result"]
    time.sleep(0.5)
    stats = c.response(c.rewrite(URI, 5, 4, USE_SUM))["result"]["stats"]
    # The scripted model's tokens are bytes. Read ahead, everything before the instruction is in the KV cache:
    # what is read after it is the instruction and the prompt's fixed tail ("Write the complete edited code of
    # `total`...", the chat template's end, the opened fence: under 150 bytes). Without it, only the system
    # prompt is still there from the last rewrite; the file context and the function are read again.
    unread = stats["prompt_tokens"] - stats["reused_prompt_tokens"]
    after_instruction = len(USE_SUM.encode()) + 150
    assert (unread <= after_instruction) if read_ahead else (unread > after_instruction + 100), stats


@pytest.mark.parametrize("second_look", [True, False])
def test_second_look_forks_an_unchanged_answer_and_can_be_switched_off(make_client, second_look):
    c = start(make_client, {"secondLook": second_look})
    near = "scripted-near: " + json.dumps([["    return s", "    return s + 0"]])  # written back, nearly not
    result = rewrite(c, near)
    assert result["applied"] is True and result["second_look"] is second_look
    if second_look:
        assert c.editor.text(URI) == HEAD + TOTAL.replace("return s", "return s + 0")
        # the user is told, as on the command line: the code may have done what was asked already
        shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
        assert shown["params"]["type"] == 3 and "first wrote total back unchanged" in shown["params"]["message"]
        assert "undo puts it back" in shown["params"]["message"]
    else:
        assert c.editor.text(URI) == HEAD + TOTAL and result["changed"] is False
        shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
        assert "back unchanged" in shown["params"]["message"]


def test_a_rewrite_whose_calls_no_longer_fit_is_applied_with_a_warning(make_client):
    c = start(make_client)
    c.editor.open(OTHER, HEAD + TOTAL + "\n\nprint(total([1]))\n")
    result = rewrite(c, scripted(("def total(values):", "def total(values, start):")), uri=OTHER)
    assert result["applied"] is True and result["bad_calls"] == ["line 12: total(...) gets no `start`"]
    assert result["parameter_changes"] == ["adds required `start`"] and result["renamed_to"] is None
    shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert shown["params"]["type"] == 2 and "calls its own functions" in shown["params"]["message"]
    assert rewrite(c, scripted(("values, start", "values, start=0")), uri=OTHER)["bad_calls"] == []
    renamed = rewrite(c, scripted(("def total(", "def sum_all(")), uri=OTHER)
    assert renamed["applied"] is True and renamed["renamed_to"] == "sum_all" and renamed["renamed_uses"] == [12]
    shown = c.wait_for(lambda m: m.get("method") == "window/showMessage" and "renames total" in m["params"]["message"])
    assert shown["params"]["type"] == 2


def test_a_rewrite_reading_a_name_nothing_defines_is_applied_with_a_warning(make_client):
    c = start(make_client)
    result = rewrite(c, scripted(("return s", "return clamp(s)")))
    assert result["applied"] is True and result["undefined_names"] == ["clamp"]
    assert c.editor.text(URI) == HEAD + TOTAL.replace("return s", "return clamp(s)")
    shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert shown["params"]["type"] == 2 and "uses `clamp`" in shown["params"]["message"]  # 2: a warning
    assert rewrite(c, scripted(("clamp(s)", "math.floor(s)")))["undefined_names"] == []  # math is imported


def test_context_tokens_bound_the_file_context(make_client):
    prompts = []
    for tokens in (0, 256):
        c = start(make_client, {"contextTokens": tokens})
        prompts.append(rewrite(c, USE_SUM)["stats"]["prompt_tokens"])
    assert prompts[0] + len("import math\nimport os\n") <= prompts[1]


def test_model_settings_reach_the_loader_and_only_model_changes_reload(make_client):
    c = start(make_client, {"prefixCacheMb": 7, "gpuLayers": 2, "threads": 1, "maxTokens": 99, "model": "tiny"})
    rewrite(c, "unchanged")
    first = loader_calls(c)[-1]
    assert (first["prefix_cache_mb"], first["gpu_layers"], first["threads"], first["max_tokens"], first["model"]) == (
        7,
        2,
        1,
        99,
        "tiny",
    )
    c.notify("workspace/didChangeConfiguration", {"settings": {"editspec": {"gpuLayers": 3}}})
    rewrite(c, "unchanged")
    assert len(loader_calls(c)) == 2 and loader_calls(c)[-1]["gpu_layers"] == 3
    # The decoding options are a rewrite's own: a change takes effect at the next rewrite and loads nothing.
    c.notify("workspace/didChangeConfiguration", {"settings": {"editspec": {"maxTokens": 2, "temperature": 0.5}}})
    cut = rewrite(c, USE_SUM)
    assert cut["applied"] is False and cut["reason"] == "refused"
    c.wait_for(lambda m: m.get("method") == "window/showMessage" and "cut off after 2 tokens" in str(m["params"]))
    c.notify("workspace/didChangeConfiguration", {"settings": {"editspec": {"maxTokens": 300, "temperature": 0}}})
    assert rewrite(c, USE_SUM)["applied"] is True
    assert len(loader_calls(c)) == 2


def test_nested_settings_and_their_validation(make_client):
    c = start(make_client)
    c.notify("workspace/didChangeConfiguration", {"settings": {"editspec": {"streaming": "sideways"}}})
    shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert "streaming" in shown["params"]["message"]
    c.notify("workspace/didChangeConfiguration", {"settings": {"editspec": {"streaming": "final"}}})
    assert rewrite(c, USE_SUM)["applied"] is True
    assert len(c.editor.applied) == 1  # the valid nested setting took effect; the bad one changed nothing
    bad = make_client(settings={"temperature": "hot"})
    bad.initialize()
    shown = bad.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert "temperature" in shown["params"]["message"] and "defaults" in shown["params"]["message"]


def test_a_refused_result_is_put_back_with_a_message(make_client):
    c = start(make_client, delay=0.02)
    # The answer writes the function twice: refused.
    twice = scripted(("def total(values):\n", "def total(values):\n    pass\n\n\ndef total(values):\n"))
    result = rewrite(c, twice)
    assert result["applied"] is False and result["reason"] == "refused"
    assert c.editor.text(URI) == HEAD + TOTAL
    shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert "not applied" in shown["params"]["message"]


def test_a_client_without_apply_edit_gets_an_error(make_client):
    c = make_client(capabilities={"window": {"workDoneProgress": True}})
    c.initialize()
    c.editor.open(URI, HEAD + TOTAL)
    reply = c.response(c.rewrite(URI, 4, 4, USE_SUM))
    assert reply["error"]["code"] == -32602 and "applyEdit" in reply["error"]["message"]


def test_the_range_argument(make_client):
    c = start(make_client)
    args = {"uri": URI, "range": {"start": {"line": 6, "character": 8}, "end": {"line": 6, "character": 12}}}
    reply = c.call(
        "workspace/executeCommand", {"command": "editspec.rewrite", "arguments": [dict(args, instruction=USE_SUM)]}
    )
    assert reply["result"]["applied"] is True and c.editor.text(URI) == HEAD + SUM


def test_cancel_without_an_argument_cancels_every_rewrite_and_documents_queue(make_client):
    c = start(make_client, delay=0.05)
    c.editor.open(OTHER, HEAD + TOTAL)
    first, second = c.rewrite(URI, 4, 4, SLOW_EDIT), c.rewrite(OTHER, 4, 4, SLOW_EDIT)
    c.wait_for(lambda m: m.get("method") == "workspace/applyEdit")
    cancelled = c.call("workspace/executeCommand", {"command": "editspec.cancel"})["result"]["cancelled"]
    assert sorted(cancelled) == sorted([URI, OTHER])
    assert {c.response(first)["result"]["reason"], c.response(second)["result"]["reason"]} == {"cancelled"}
    assert c.editor.text(URI) == c.editor.text(OTHER) == HEAD + TOTAL
    # Queued across documents: both run, one after the other, each to the end.
    first, second = c.rewrite(URI, 4, 4, SLOW_EDIT), c.rewrite(OTHER, 4, 4, USE_SUM)
    assert c.response(first)["result"]["applied"] and c.response(second)["result"]["applied"]
    assert c.editor.text(URI) == HEAD + SLOW and c.editor.text(OTHER) == HEAD + SUM


async def test_the_warm_start_says_when_it_measures_this_machine():
    """While the loading thread measures this machine's verify costs (a model file's first run), the warm start's
    progress says so instead of "loading the model"."""
    import asyncio
    import concurrent.futures

    from editspec import calibration
    from lsp.server import EditSpecServer

    ls = EditSpecServer()
    loading: concurrent.futures.Future = concurrent.futures.Future()
    reports = []
    watcher = asyncio.ensure_future(ls.loading_message(loading, lambda message, pct: reports.append(message)))
    await asyncio.sleep(0.3)
    ls._on_calibrate(30, 120)
    await asyncio.sleep(0.3)
    loading.set_result(None)
    await watcher
    assert reports == [f"{calibration.MEASURING}: 25%"] * len(reports) and reports


def test_the_memory_for_kept_prompts_changes_without_a_reload(make_client):
    c = start(make_client, {"prefixCacheMb": 0, "readAhead": False})
    c.editor.open(OTHER, "def mean(xs):\n    return sum(xs) / len(xs)\n")

    def back_to_total() -> int:
        """Rewrite `total`, then `mean` in the other file, then `total` again: its prompt tokens read again."""
        rewrite(c, "unchanged")
        c.response(c.rewrite(OTHER, 1, 4, "unchanged"))
        stats = rewrite(c, "unchanged")["stats"]
        return stats["prompt_tokens"] - stats["reused_prompt_tokens"]

    # Nothing kept: `total`'s prompt shares only the system prompt with `mean`'s, the rest is read again.
    assert back_to_total() > 100
    c.notify("workspace/didChangeConfiguration", {"settings": {"editspec": {"prefixCacheMb": 64}}})
    assert back_to_total() <= 1  # kept: only the prompt's last token is read, for its logits
    c.notify("workspace/didChangeConfiguration", {"settings": {"editspec": {"prefixCacheMb": 0}}})
    assert back_to_total() > 100
    assert len(loader_calls(c)) == 1


def test_a_null_setting_is_its_default_again_and_one_left_out_keeps_its_value():
    from lsp.settings import Settings, updated

    s = updated(Settings(), {"editspec": {"contextTokens": 5, "prefixCacheMb": 0, "maxTokens": 50, "model": "tiny"}})
    assert (s.context_tokens, s.prefix_cache_mb, s.max_tokens, s.model) == (5, 0, 50, "tiny")
    s = updated(s, {"editspec": {"contextTokens": None, "prefixCacheMb": None, "maxTokens": None}})
    assert (s.context_tokens, s.prefix_cache_mb, s.max_tokens, s.model) == (256, 256, None, "tiny")


def test_a_rewrite_that_would_delete_what_shares_the_target_s_line_is_put_back(make_client):
    """`price` inside `total`'s one line: the answer with `price` alone streams in and is refused, and the document
    ends as it was, `total` in it."""
    c = start(make_client, delay=0.02)
    uri = "file:///work/total.js"
    text = (
        "export function total(items) { const price = (it) => it.cost * it.qty; return items.map(price).length; }\n"
        "\nexport function count(items) {\n  return items.length;\n}\n"
    )
    c.editor.open(uri, text, "javascript")
    alone = scripted(("export function total(items) { ", ""), (" return items.map(price).length; }", ""))
    reply = c.response(c.rewrite(uri, 0, 40, alone))
    assert reply["result"]["applied"] is False and reply["result"]["reason"] == "refused", reply
    assert c.editor.text(uri) == text
    shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert "leaves out total" in shown["params"]["message"]


def test_a_function_made_async_is_applied_with_a_warning_naming_its_calls(make_client):
    c = start(make_client)
    c.editor.open(OTHER, HEAD + TOTAL + "\n\nprint(total([1]))\n")
    result = rewrite(c, scripted(("def total(values):", "async def total(values):")), uri=OTHER)
    assert result["applied"] is True and result["async_change"] == "async" and result["async_calls"] == [12]
    shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert shown["params"]["type"] == 2 and "is `async def`, and was not" in shown["params"]["message"]
    assert "(this file does at line 12)" in shown["params"]["message"]


def test_a_function_declaration_made_a_const_is_applied_with_a_warning_naming_the_uses_above_it(make_client):
    c = start(make_client)
    uri = "file:///work/report.js"
    text = "console.log(total([1]));\n\nfunction total(items) {\n  return items.length;\n}\n"
    c.editor.open(uri, text, "javascript")
    to_arrow = scripted(("function total(items) {", "const total = (items) => {"), ("length;\n}", "length;\n};"))
    reply = c.response(c.rewrite(uri, 3, 2, to_arrow))
    result = reply["result"]
    assert result["applied"] is True and result["unhoisted"] == "const" and result["early_uses"] == [1], reply
    assert result["arrow_misuses"] == []
    assert c.editor.text(uri) == (
        "console.log(total([1]));\n\nconst total = (items) => {\n  return items.length;\n};\n"
    )
    shown = c.wait_for(lambda m: m.get("method") == "window/showMessage")
    assert shown["params"]["type"] == 2 and "is a `const`, and was a function declaration" in shown["params"]["message"]
