"""`editspec bench` on one small case: it runs, and its JSON has the documented shape."""

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from editspec.cli import EXIT_INPUT, main

CASE = {
    "id": 1,
    "name": "toy",
    "before": "def add(a, b):\n    return a + b\n\n\ndef sub(a, b):\n    return a - b\n",
    "instruction_descriptive": "Add type hints for int arguments and results.",
}


def test_bench_writes_the_documented_json(tmp_path, monkeypatch):
    monkeypatch.setattr("editspec.bench.STORY_ROUNDS", 1)  # the story's rounds are counted in the llama-server test
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(CASE) + "\n")
    out = tmp_path / "bench.json"
    result = CliRunner().invoke(
        main,
        [
            "bench",
            "--data",
            str(data),
            "--limit",
            "1",
            "--methods",
            "plain,editspec_plain,editspec_lookup",
            "--json",
            str(out),
            "--repeat",
            "2",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert set(report) >= {"cases", "summary", "story", "limit"}
    assert set(report["summary"]) == {"plain", "editspec_plain", "editspec_lookup"}
    for entry in report["summary"].values():
        assert entry["median_speedup_vs_plain"] > 0 and entry["median_tokens_per_s"] > 0
    case = report["cases"][0]["methods"]
    for m in case.values():
        assert {
            "tokens",
            "seconds",
            "tokens_per_s",
            "target_passes",
            "accepted",
            "drafted",
            "same_as_plain",
        } <= set(m)
    # Each ratio is that method's decode rate over plain's, as the records say (not a constant).
    plain_rate = case["plain"]["tokens_per_s"]
    for m in case.values():
        assert m["speedup_vs_plain"] == pytest.approx(m["tokens_per_s"] / plain_rate, rel=0.02)
    # The oracle replay of the lookup run: never below plain (it may always choose plain steps), and live/oracle
    # is the live ratio over it.
    oracle = report["cases"][0]["oracle"]
    assert oracle["speedup"] >= 1.0 and oracle["decoded"] > 0
    live = case["editspec_lookup"]["speedup_vs_plain"]
    assert oracle["live_over_oracle"] == pytest.approx(live / oracle["speedup"], rel=0.01)
    assert report["oracle"]["median_speedup"] == oracle["speedup"]
    # Between the live run by the cost model and the oracle: its passes with breaks foreseen, said in the output.
    assert oracle["live_modelled_speedup"] <= oracle["foresight_speedup"] <= oracle["speedup"] + 1e-3
    assert report["oracle"]["median_foresight_speedup"] == oracle["foresight_speedup"]
    assert "breaks foreseen" in result.output
    # Our plain decoding is llama-cpp-python's plain decoding, token for token.
    assert case["editspec_plain"]["same_as_plain"] is True
    assert case["editspec_lookup"]["accepted"] <= case["editspec_lookup"]["drafted"]
    # Verifying 33 tokens in one pass costs far less than 33 passes on any CPU: the limit is well above 1.
    assert report["limit"] > 1.5
    assert report["repeat"] == 2
    assert "editspec_lookup" in result.output
    # The machine's drift between lookup's run and plain's: always measured on the story (nothing to copy: nearly
    # every round a plain step), and on a case where lookup's run had plain steps enough.
    story_drift = report["story_case"]["machine_drift"]
    assert story_drift > 0 and f"{story_drift:.2f}x in the story" in " ".join(result.output.split())
    drift = report["cases"][0].get("machine_drift")
    assert report["machine_drift"] == (
        None if drift is None else {"median": drift, "lowest": drift, "highest": drift, "cases": 1}
    )


def test_llama_server_joins_the_benchmark_when_named(tmp_path, monkeypatch):
    """$LLAMA_SERVER adds llama.cpp's server, plain and ngram-mod, on loopback, with the same model, threads and
    prompt tokens; speeds come from its timings (here a stand-in that says 50 and 100 tokens/s)."""
    from editspec.bench import SHORT_ANSWER, SHORT_ROUNDS

    STORY_ROUNDS = 2  # fewer than the shipped number, for time; the count below is the constant's
    monkeypatch.setattr("editspec.bench.STORY_ROUNDS", STORY_ROUNDS)
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(CASE) + "\n")
    log = tmp_path / "server.log"
    monkeypatch.setenv("LLAMA_SERVER", str(Path(__file__).with_name("fake_llama_server.py")))
    monkeypatch.setenv("FAKE_LLAMA_SERVER_LOG", str(log))
    out = tmp_path / "bench.json"
    methods = "editspec_lookup,llama_server_plain,llama_server_ngram_mod"
    args = ["bench", "--data", str(data), "--limit", "1", "--threads", "2", "--methods", methods, "--json", str(out)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    case = report["cases"][0]["methods"]
    assert case["llama_server_plain"]["tokens_per_s"] == pytest.approx(50.0)
    assert case["llama_server_ngram_mod"]["tokens_per_s"] == pytest.approx(100.0)
    assert report["peers"]["llama_server_ngram_mod_over_its_plain"] == pytest.approx(2.0)
    lookup = case["editspec_lookup"]["tokens_per_s"]
    assert report["peers"]["over_llama_server_ngram_mod"] == pytest.approx(lookup / 100.0, rel=0.01)
    assert "llama-server ngram-mod" in result.output
    entries = [json.loads(line) for line in log.read_text().splitlines()]
    started = [e["args"] for e in entries if "args" in e]
    assert all(a[a.index("--host") + 1] == "127.0.0.1" for a in started)
    assert all(a[a.index("-m") + 1] == report["machine"]["model"] and a[a.index("-t") + 1] == "2" for a in started)
    requests = [e for e in entries if "request" in e]
    assert all(r["request"]["temperature"] == 0 and r["request"]["cache_prompt"] is False for r in requests)
    # No memory between requests (ngram-mod would draft an earlier run's answer): every process serves one
    # warm-up too short to leave an n-gram (fewer than ngram-mod's 24 tokens, written ones too) and then one
    # measured request.
    served = {}
    for r in requests:
        served.setdefault(r["pid"], []).append(r)
    assert len(served) == len(started) and all(len(rs) == 2 for rs in served.values())
    assert all(rs[0]["prompt_tokens"] + rs[0]["request"]["n_predict"] < 24 for rs in served.values())
    measured = [rs[1] for rs in served.values()]
    fenced = [r for r in measured if r["request"].get("stop") == ["\n```"]]  # the case (not the warm-up, the story)
    short = max(m["tokens"] for m in case.values()) < SHORT_ANSWER  # a short answer is run SHORT_ROUNDS rounds
    assert len(fenced) == 2 * (SHORT_ROUNDS if short else 1)
    assert all(r["prompt_tokens"] == report["cases"][0]["prompt_tokens"] for r in fenced)
    # The bench's warm-up, the case's rounds and the story's, each method alike: plain and ngram-mod.
    assert len(started) == 2 * (1 + len(fenced) // 2 + STORY_ROUNDS)
    assert sum("--spec-type" in a for a in started) == len(started) // 2
    # Loaded as editspec loads the model: without extra buffer types where they are off (a CPU advertising AMX)
    from editspec.models import extra_buffers_allowed

    assert all(("--no-repack" in a) != extra_buffers_allowed() for a in started)


@pytest.mark.parametrize(("extra_buffers", "no_repack"), [("0", True), ("1", False)])
def test_llama_server_runs_without_extra_buffers_where_editspec_does(tmp_path, monkeypatch, extra_buffers, no_repack):
    from editspec.peer import LlamaServer

    log = tmp_path / "server.log"
    monkeypatch.setenv("FAKE_LLAMA_SERVER_LOG", str(log))
    monkeypatch.setenv("EDITSPEC_EXTRA_BUFFERS", extra_buffers)
    with LlamaServer(
        Path(__file__).with_name("fake_llama_server.py"), tmp_path / "m.gguf", threads=2, n_ctx=512, extra=[]
    ):
        pass
    (started,) = [json.loads(line)["args"] for line in log.read_text().splitlines()]
    assert ("--no-repack" in started) == no_repack


def test_a_llama_server_that_crashes_is_a_clear_error(tmp_path, monkeypatch):
    """A server killed by SIGILL (this machine's VM advertises AMX and forbids it) ends the benchmark with what
    happened and what to do, not a traceback."""
    crashing = tmp_path / "llama-server"
    crashing.write_text("#!/bin/sh\necho 'init: llama threadpool init'\nkill -ILL $$\n")
    crashing.chmod(0o755)
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(CASE) + "\n")
    monkeypatch.setenv("LLAMA_SERVER", str(crashing))
    args = ["bench", "--model", "tiny", "--data", str(data), "--limit", "1", "--methods", "plain,llama_server_plain"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == EXIT_INPUT, result.output
    assert "was killed by SIGILL (an instruction this CPU refuses" in result.output
    assert "threadpool init" in result.output and "Traceback" not in result.output


def test_a_llama_server_that_is_not_there_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setenv("LLAMA_SERVER", str(tmp_path / "llama-server"))
    result = CliRunner().invoke(main, ["bench", "--data", str(tmp_path / "none.jsonl")])
    assert result.exit_code == EXIT_INPUT
    assert "LLAMA_SERVER" in result.output and "not an executable" in result.output


def test_bench_without_data_says_where_to_look(tmp_path):
    result = CliRunner().invoke(main, ["bench", "--data", str(tmp_path / "none.jsonl")])
    assert result.exit_code == EXIT_INPUT
    assert "--data" in result.output


def test_latency_reports_cold_warm_and_plain(tmp_path):
    case = {
        **CASE,
        "after": CASE["before"].replace("def add(a, b):", "def add(a: int, b: int) -> int:"),
        "instruction_lazy": "Type hints.",
    }
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(case) + "\n")
    out = tmp_path / "latency.json"
    result = CliRunner().invoke(main, ["bench", "--latency", "--data", str(data), "--limit", "1", "--json", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    (c,) = report["cases"]
    cold, warm, retry, editor = c["cold"], c["warm"], c["retry"], c["editor"]
    plain = c["llama_cpp_whole_file"]
    assert cold["function"] == retry["function"] == "add" and warm["function"] == "sub"
    # The warm requests reuse the kept prefix. The next function's file context lists `add` where the first
    # one's listed `sub`, so it re-reads from there on (the context, itself, the instruction), not the system
    # prompt and the context's heading (130 tokens cold, 71 then, with the tiny model).
    assert cold["read_prompt_tokens"] == cold["prompt_tokens"] > 0
    assert 0 < warm["read_prompt_tokens"] < 0.6 * cold["read_prompt_tokens"]
    assert 0 < retry["read_prompt_tokens"] < cold["read_prompt_tokens"] // 2  # the new instruction, and on
    # Read ahead at the code action: the rewrite reads the instruction and the prompt's last few tokens.
    assert editor["read_ahead_tokens"] + editor["read_prompt_tokens"] == editor["prompt_tokens"]
    assert editor["read_prompt_tokens"] < cold["read_prompt_tokens"] // 3
    nxt = c["editor_next"]  # the next function, read ahead: only the function is read ahead, not the file
    assert nxt["function"] == "sub" and 0 < nxt["read_ahead_tokens"] < editor["read_ahead_tokens"]
    assert nxt["read_prompt_tokens"] < cold["read_prompt_tokens"] // 3
    for r in (cold, warm, retry, editor):
        assert r["prefill_seconds"] <= r["first_line_seconds"] <= r["total_seconds"]
    assert warm["load_seconds"] == 0 and cold["load_seconds"] > 0
    assert plain["prompt_tokens"] > 0 and plain["total_seconds"] > 0
    assert {"warm_read_over_cold_read", "cold_done_over_llama_cpp_done", "first_edit_over_prefill_plus_round"} <= set(
        report["summary"]
    )
    assert "next function" in result.output


def test_the_opening_copy_counts_as_decoded_at_the_cost_of_a_pass_of_its_own():
    """editspec verifies its opening copy within the prefill. Decode-only speed counts every token after the
    first: the opening's tokens too, charged as a verify pass over as many tokens as it drafted; the oracle
    replays from the first token, and the live run by the cost model includes that pass."""
    import numpy as np

    from editspec.bench import Case, Run, oracle_record, run_editspec
    from editspec.decoding import DecodeOptions, Decoder
    from tests.fakes import FakeBackend

    source = [int(t) for t in np.random.default_rng(1).permutation(np.arange(3, 30))]
    prompt = [1, 2, 31, 32, 33, *source, 9, 31, 32, 33]
    backend = FakeBackend(seed=0, source=prompt[2:-4], copy_bias=50.0)  # the target copies the source
    backend.n_ctx = 4096
    costs = [0.0] + [0.01 * (1 + 0.3 * (m - 1)) for m in range(1, 34)]
    run = run_editspec(Decoder(backend, DecodeOptions(opening_draft=16), verify_seconds=costs), prompt, 30, None)
    assert run.opening_drafted == 16 and run.prefill_output_tokens == 17
    assert run.opening_seconds == costs[16]
    n = len(run.tokens)
    assert run.decode_tokens_per_second == pytest.approx((n - 1) / (run.decode_seconds + costs[16]))
    assert run.decode_phase_tokens_per_second == pytest.approx((n - 17) / run.decode_seconds)
    record = {"methods": {"editspec_lookup": {"speedup_vs_plain": 1.2}}}
    o = oracle_record(Case("c", prompt, 30, False), run, costs, record)
    assert o["decoded"] == n - 1
    modelled = costs[16] + sum(costs[k + 1] for k in run.drafted_lengths)
    assert o["live_modelled_speedup"] == pytest.approx((n - 1) * costs[1] / modelled, rel=1e-3)
    # With breaks foreseen: the opening's pass over the drafts that held (its first token and those after it),
    # each decoding pass over its accepted drafts.
    held = costs[run.prefill_output_tokens - 1] + sum(costs[a + 1] for a in run.accepted_lengths)
    assert o["foresight_speedup"] == pytest.approx((n - 1) * costs[1] / held, rel=1e-3)
    assert o["live_modelled_speedup"] <= o["foresight_speedup"] <= o["speedup"] + 1e-3
    # Without an opening (every other method) the first token alone comes with the prompt.
    plain = Run(list(range(10)), 1.0, 0.9)
    assert plain.decode_tokens_per_second == pytest.approx(10.0) == plain.decode_phase_tokens_per_second


def test_the_rewrite_summary_counts_the_opening_as_the_benchmark_does():
    from editspec.display import summary_line
    from editspec.engine import Round, Stats

    costs = [0.0] + [0.1 * (1 + 0.3 * (m - 1)) for m in range(1, 34)]
    opening = Round(list(range(16)), 16, "lookup", 0, 5, 2.0, opening=True)
    rounds = [opening, *[Round(list(range(7)), 7, "lookup", 0, 5, costs[8]) for _ in range(3)]]
    stats = Stats(
        generated_tokens=17 + 24,
        prefill_output_tokens=17,
        decode_seconds=3 * costs[8],
        rounds=rounds,
        verify_seconds=costs,
    )
    assert stats.opening_drafted == 16
    # 40 tokens after the first, at one step each, over three passes of 8 and the opening's pass of 16.
    expected = 40 * costs[1] / (3 * costs[8] + costs[16])
    assert f"speed-up {expected:.2f}x over plain" in summary_line(stats)


def test_the_summarys_prediction_is_for_the_passes_the_request_ran():
    """An adaptive request mixes plain steps with long drafts: when every draft is accepted and each pass took its
    planned cost, the prediction is the measured speed-up (the mean draft length in one formula would say 1x)."""
    from editspec.display import summary_line
    from editspec.engine import Round, Stats

    costs = [0.0] + [0.1 * (1 + 0.5 * (m - 1)) for m in range(1, 34)]
    plain = [Round([], 0, None, None, 5, costs[1]) for _ in range(60)]
    drafts = [Round(list(range(16)), 16, "lookup", 0, 5, costs[17]) for _ in range(2)]
    stats = Stats(generated_tokens=1 + 60 + 2 * 17, prefill_output_tokens=1, rounds=[*plain, *drafts])
    stats.drafted_tokens = stats.accepted_tokens = 32
    stats.decode_seconds, stats.verify_seconds = 60 * costs[1] + 2 * costs[17], costs
    measured = (60 + 34) * costs[1] / stats.decode_seconds
    assert measured > 1.2
    assert f"speed-up {measured:.2f}x over plain (α predicts {measured:.2f}x for these draft lengths)" in summary_line(
        stats
    )
    # Half the drafted tokens accepted: the prediction falls with α, the same passes costing the same.
    half = [Round(list(range(16)), 8, "lookup", 0, 5, costs[17]) for _ in range(2)]
    stats.rounds, stats.accepted_tokens = [*plain, *half], 16
    alpha = 0.5
    predicted = (60 + 2 * (1 - alpha**17) / (1 - alpha)) * costs[1] / stats.decode_seconds
    assert f"(α predicts {predicted:.2f}x for these draft lengths)" in summary_line(stats)


def test_the_summary_sets_the_decoding_beside_the_plain_steps_the_request_took():
    """The machine runs slower (or faster) than it was calibrated: a request of plain steps alone, each 1.5 times
    its planned cost, is as fast as plain decoding, not 0.67x, and so it is with a slow spell among them (plain
    decoding would have had it too); with too few plain steps to measure, the planned step stands in."""
    from editspec.display import summary_line
    from editspec.engine import PLAIN_STEPS_TO_MEASURE, Round, Stats

    costs = [0.0] + [0.1 * (1 + 0.5 * (m - 1)) for m in range(1, 34)]
    plain = [Round([], 0, None, None, 5, 1.5 * costs[1]) for _ in range(40)]
    stats = Stats(generated_tokens=41, prefill_output_tokens=1, rounds=plain, verify_seconds=costs)
    stats.decode_seconds = sum(r.seconds for r in plain)
    assert stats.plain_step_seconds == pytest.approx(1.5 * costs[1])
    assert "speed-up 1.00x over plain" in summary_line(stats)
    spell = [*plain[:-4], *[Round([], 0, None, None, 5, 6 * costs[1]) for _ in range(4)]]
    stats.rounds, stats.decode_seconds = spell, sum(r.seconds for r in spell)
    assert "speed-up 1.00x over plain" in summary_line(stats)
    stats.rounds, stats.decode_seconds = plain, sum(r.seconds for r in plain)
    # Two long drafts among them, all accepted, at their planned cost times 1.5: what they saved, at that pace.
    drafts = [Round(list(range(16)), 16, "lookup", 0, 5, 1.5 * costs[17]) for _ in range(2)]
    stats.rounds, stats.generated_tokens = [*plain, *drafts], 41 + 34
    stats.drafted_tokens = stats.accepted_tokens = 32
    stats.decode_seconds = sum(r.seconds for r in stats.rounds)
    expected = 74 * costs[1] / (40 * costs[1] + 2 * costs[17])
    assert f"speed-up {expected:.2f}x over plain" in summary_line(stats)
    # Too few plain steps to measure: the planned step.
    few = plain[: PLAIN_STEPS_TO_MEASURE - 1]
    stats.rounds, stats.generated_tokens = [*few, *drafts], 1 + len(few) + 34
    stats.decode_seconds = sum(r.seconds for r in stats.rounds)
    assert stats.plain_step_seconds == costs[1]
    assert f"speed-up {(len(few) + 34) * costs[1] / stats.decode_seconds:.2f}x over plain" in summary_line(stats)


def test_a_request_keeps_the_costs_it_planned_with_and_its_statistics_use_them(backend):
    """Learning moves the decoder's verify costs after every request; the request's own statistics (the line
    `editspec rewrite` prints, the benchmark's opening charge) take the costs its drafts were planned with."""
    from editspec.decoding import DecodeOptions, Decoder
    from editspec.display import summary_line
    from editspec.policy import opening_pass_seconds

    code = "```python\ndef add(a, b):\n    return a + b\n```\n"
    prompt = backend.tokenize(f"{code}The same code again:\n{code[:10]}")  # the opening copies its first line
    decoder = Decoder(backend, DecodeOptions(max_tokens=40, opening_draft=16))
    planned = list(decoder.verify_seconds)
    decoder.costs.costs = lambda: [2 * x for x in planned]  # what learning makes of them: twice as dear
    stats = decoder.decode(prompt).stats
    assert decoder.verify_seconds == [2 * x for x in planned]  # for the next request
    assert stats.verify_seconds == planned and stats.opening_drafted > 0
    decoded, step = stats.generated_tokens - 1, stats.plain_step_seconds
    seconds = stats.decode_seconds + step / planned[1] * opening_pass_seconds(stats.opening_drafted, planned)
    assert f"speed-up {decoded * step / seconds:.2f}x over plain" in summary_line(stats)


def test_repeats_take_turns_and_the_fastest_run_of_each_method_counts():
    from editspec.bench import Run, fastest_interleaved

    calls, seconds = [], iter([5.0, 4.0, 3.0, 6.0, 1.0, 2.0])

    def run(name):
        calls.append(name)
        return Run(tokens=[1], prefill_seconds=0.0, decode_seconds=next(seconds))

    runs = fastest_interleaved(["plain", "editspec_lookup"], 3, run)
    assert calls == ["plain", "editspec_lookup"] * 3  # not three of one method, then three of the other
    assert runs["plain"].decode_seconds == 1.0 and runs["editspec_lookup"].decode_seconds == 2.0


def test_the_machine_drift_sets_lookups_plain_steps_beside_plains_own():
    """How fast the machine ran during each method's run of a case: editspec's passes that verified no draft are
    plain steps, set beside plain's steps (its decode time per token); too few of them say nothing."""
    from editspec.bench import Run, machine_drift
    from editspec.engine import PLAIN_STEPS_TO_MEASURE, Round, median_step_seconds

    plain = Run(tokens=[1] * 11, prefill_seconds=0.5, decode_seconds=1.0, step_seconds=0.1)  # 10 steps of 0.1 s
    rounds = [Round([], 0, None, None, 1, 0.4, opening=True)]  # the prefill: not a step
    rounds += [Round([], 0, None, None, 1, s) for s in (0.12, 0.11, 0.13, 0.12, 0.5)]  # one slow spell
    rounds += [Round([5, 6, 7], 3, "lookup", 0, 8, 0.2)]  # a verify pass: not a step
    lookup = Run(
        tokens=[1] * 12,
        prefill_seconds=0.5,
        decode_seconds=1.2,
        drafted_lengths=[0] * 5 + [3],
        step_seconds=median_step_seconds(rounds),
    )
    assert lookup.step_seconds == 0.12  # the median of the five steps
    assert machine_drift(lookup, plain) == 1.2
    assert machine_drift(lookup, None) is None
    few = median_step_seconds(rounds[:PLAIN_STEPS_TO_MEASURE])  # the prefill and four steps
    assert few is None
    no_steps = Run(tokens=[1] * 12, prefill_seconds=0.5, decode_seconds=1.2, drafted_lengths=[3])
    assert machine_drift(no_steps, plain) is None


def test_plains_step_is_the_median_time_between_its_tokens():
    """llama-cpp-python's run times each token's arrival: after the first (which comes with the prompt) they come one
    step apart, and the median of those is set beside editspec's median step; its mean, which a slow step pulls up,
    would read as drift where there is none."""
    from editspec import bench

    class Llm:
        def reset(self):
            pass

        def generate(self, prompt, **kwargs):
            yield from range(10, 17)

    # t0, then the seven tokens' arrivals (the fifth step slow), then the end
    times = iter([0.0, 1.0, 1.1, 1.2, 1.3, 1.9, 2.0, 2.1, 2.1])
    plain = bench.run_llama_cpp(Llm(), [1, 2], 16, lambda out: False, lambda tok: False, clock=lambda: next(times))
    assert plain.prefill_seconds == 1.0 and plain.decode_seconds == pytest.approx(1.1)
    assert plain.step_seconds == pytest.approx(0.1)
    lookup = bench.Run(tokens=[1] * 7, prefill_seconds=1.0, decode_seconds=0.6, step_seconds=0.1)
    assert bench.machine_drift(lookup, plain) == 1.0


def test_a_short_answer_gets_the_rounds_the_story_gets():
    """An answer of a few dozen tokens is a second's work per run, within the machine's spread: it is run at least
    three rounds (the fastest counts), while a long one is run the rounds asked for."""
    from editspec.bench import SHORT_ANSWER, SHORT_ROUNDS, Run, fastest_interleaved

    for length, rounds in ((SHORT_ANSWER - 1, SHORT_ROUNDS), (SHORT_ANSWER, 1)):
        calls = []

        def run(name, length=length, calls=calls):
            calls.append(name)
            return Run(tokens=[1] * length, prefill_seconds=0.0, decode_seconds=1.0 / len(calls))

        runs = fastest_interleaved(["plain", "editspec_lookup"], 1, run)
        assert calls == ["plain", "editspec_lookup"] * rounds
        assert runs["plain"].decode_seconds == 1.0 / (2 * rounds - 1)  # the last, fastest round


def test_each_case_verifies_the_opening_a_rewrite_of_its_code_would(backend, tmp_path):
    """The benchmark measures what `editspec rewrite` does: its opening copy is the code's first line and the
    token after it, at least 16 tokens (not the decoder's default of 16 flat, which stops inside a long
    signature)."""
    from editspec import prompts
    from editspec.bench import canitedit_cases, run_editspec
    from editspec.decoding import DecodeOptions, Decoder

    signature = "def add(first_number: int, second_number: int, third_number: int) -> int:\n"
    long_first_line = dict(CASE, before=signature + "    return first_number + second_number + third_number\n")
    data = tmp_path / "cases.jsonl"
    data.write_text(json.dumps(CASE) + "\n" + json.dumps(long_first_line) + "\n")
    short, long = canitedit_cases(backend, data, None)
    assert short.opening == prompts.LEAST_OPENING
    first_line = len(backend.tokenize(signature)) + 1
    assert long.opening == first_line > DecodeOptions().opening_draft
    costs = [0.0] + [0.01 * (1 + 0.3 * (m - 1)) for m in range(1, 34)]
    decoder = Decoder(backend, DecodeOptions(), verify_seconds=costs)
    run = run_editspec(decoder, long.prompt, long.max_tokens, prompts.FenceStop(backend), long.opening)
    assert run.opening_drafted == first_line


def test_the_lowest_case_is_also_given_over_answers_that_are_plain_s():
    # A case whose answer left plain's at a near-tie is timed over another text: the lowest like-for-like case
    # is given apart (and the printout names it when they differ).
    from editspec.bench import method_summary

    def record(speedup, same):
        m = {"tokens_per_s": 30.0 * speedup, "speedup_vs_plain": speedup, "same_as_plain": same}
        return {"methods": {"editspec_lookup": {**m, "prefill_seconds": 1.0}}}

    results = [record(1.8, True), record(0.93, True), record(1.64, False), record(2.1, True)]
    summary = method_summary(results, "editspec_lookup")
    assert summary["lowest_speedup_vs_plain"] == 0.93 and summary["lowest_speedup_same_text"] == 0.93
    results[1] = record(0.93, False)  # the slow case's text is not plain's
    summary = method_summary(results, "editspec_lookup")
    assert summary["lowest_speedup_vs_plain"] == 0.93 and summary["lowest_speedup_same_text"] == 1.8
    assert summary["same_as_plain"] == 2 and summary["cases"] == 4
