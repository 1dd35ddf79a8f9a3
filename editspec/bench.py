"""`editspec bench`: decoding methods side by side on CanItEdit edits and on a prompt with nothing to copy.

Every method gets the same prompt tokens, the same stop (the closing code fence, or end of generation) and
the same token cap; methods are interleaved per case, in a rotating order, so that machine noise hits all
of them alike. Prefill (reading the prompt, up to the first token) and decode (the rest) are timed
separately: speculation only shortens decoding, so speed-ups are decode-only tokens per second.
"""

from __future__ import annotations

import contextlib
import json
import os
import statistics
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from . import calibration, oracle, peer, prompts
from .backend import LlamaBackend
from .decoding import DecodeOptions, Decoder
from .engine import median_step, median_step_seconds
from .models import extra_buffers_allowed
from .policy import opening_pass_seconds

METHODS = (
    "plain",
    "llama_cpp_pld10",
    "llama_cpp_pld2",
    "editspec_plain",
    "editspec_lookup",
    "editspec_draft_model",
)
SERVER_METHODS = tuple(peer.SPEC_ARGS)  # added when $LLAMA_SERVER names a llama-server binary
STORY = "Write a short story about a lighthouse keeper who finds a message in a bottle."
DATA_ENV = "EDITSPEC_BENCH_DATA"


def find_data(path: str | None) -> Path:
    candidates = (
        [path]
        if path
        else [
            os.environ.get(DATA_ENV),
            "../shared/bench/canitedit.jsonl",
            Path(__file__).resolve().parents[2] / "shared/bench/canitedit.jsonl",
        ]
    )
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    raise FileNotFoundError(
        f"CanItEdit data not found (looked at {', '.join(str(c) for c in candidates if c)}): "
        f"pass --data PATH or set ${DATA_ENV}"
    )


@dataclass
class Run:
    tokens: list[int]
    prefill_seconds: float
    decode_seconds: float
    target_passes: int | None = None
    drafted: int | None = None
    accepted: int | None = None
    prefill_output_tokens: int = 1  # editspec's opening copy may add some to the prefill's first token
    drafted_lengths: list[int] | None = None  # per decoding pass, how many drafted tokens it verified
    accepted_lengths: list[int] | None = None  # per decoding pass, how many of those were accepted
    opening_drafted: int = 0  # editspec: tokens of the opening copy verified within the prefill
    opening_seconds: float = 0.0  # what verifying those as a pass of their own costs (the calibrated cost)
    # The median seconds of a plain step: editspec's passes that verified no draft, llama-cpp-python's time between
    # two tokens; editspec lookup's beside plain's in the same case is the machine's speed while each ran (None:
    # fewer than engine.PLAIN_STEPS_TO_MEASURE steps)
    step_seconds: float | None = None

    @property
    def decode_tokens_per_second(self) -> float:
        """Decode-only speed: every token after the first (the first comes with the prompt, for every method)
        over the time spent making them. editspec verifies its opening copy within the prefill, so its tokens
        would otherwise count for nothing and their cost hide in the prefill: they count as decoded, charged
        as a verify pass of their own (`opening_seconds`, more than they cost inside the prefill)."""
        n = len(self.tokens) - 1
        seconds = self.decode_seconds + self.opening_seconds
        return n / seconds if n > 0 and seconds > 0 else 0.0

    @property
    def decode_phase_tokens_per_second(self) -> float:
        """The tokens the decoding phase made (after the prefill's, opening included) over its seconds."""
        n = len(self.tokens) - self.prefill_output_tokens
        return n / self.decode_seconds if n > 0 and self.decode_seconds > 0 else 0.0

    def record(self, plain_tokens: list[int] | None) -> dict:
        return {
            "tokens": len(self.tokens),
            "prefill_seconds": round(self.prefill_seconds, 4),
            "decode_seconds": round(self.decode_seconds, 4),
            "seconds": round(self.prefill_seconds + self.decode_seconds, 4),
            "tokens_per_s": round(self.decode_tokens_per_second, 2),
            "decode_phase_tokens_per_s": round(self.decode_phase_tokens_per_second, 2),
            "opening_drafted": self.opening_drafted,
            "target_passes": self.target_passes,
            "drafted": self.drafted,
            "accepted": self.accepted,
            "same_as_plain": None if plain_tokens is None else self.tokens == plain_tokens,
        }


@contextlib.contextmanager
def _llama_cpp_model_params_patched() -> Iterator[None]:
    """`Llama` does not expose use_extra_bufts; switch it off while loading on CPUs where it crashes."""
    import llama_cpp.llama_cpp as L

    if extra_buffers_allowed():
        yield
        return
    original = L.llama_model_default_params

    def patched():
        params = original()
        params.use_extra_bufts = False
        return params

    L.llama_model_default_params = patched
    try:
        yield
    finally:
        L.llama_model_default_params = original


def load_llama_cpp(model_path: Path, n_ctx: int, threads: int, pld_tokens: int | None):
    from llama_cpp import Llama
    from llama_cpp.llama_speculative import LlamaPromptLookupDecoding

    draft = LlamaPromptLookupDecoding(num_pred_tokens=pld_tokens) if pld_tokens else None
    with _llama_cpp_model_params_patched():
        # With a draft model Llama forces logits for every token but sizes its score buffer from the
        # logits_all argument (a prompt longer than n_batch then fails), so say it explicitly.
        return Llama(
            str(model_path),
            n_ctx=n_ctx,
            n_threads=threads,
            n_threads_batch=threads,
            n_batch=512,
            draft_model=draft,
            logits_all=draft is not None,
            verbose=False,
        )


def run_llama_cpp(
    llm,
    prompt: list[int],
    max_tokens: int,
    stop: Callable[[list[int]], bool],
    is_end: Callable[[int], bool],
    clock: Callable[[], float] = time.perf_counter,
) -> Run:
    """llama-cpp-python's own loop (`Llama.generate`, what create_completion streams from), greedy."""
    llm.reset()  # a cold prefill, like every other method
    out: list[int] = []
    t0 = clock()
    arrivals: list[float] = []  # when each token came: after the first, one decoding step apart
    for tok in llm.generate(prompt, temp=0.0, repeat_penalty=1.0, reset=True):
        arrivals.append(clock())
        if is_end(tok):
            break
        out.append(tok)
        if stop(out) or len(out) >= max_tokens:
            break
    t_end = clock()
    t_first = arrivals[0] if arrivals else t_end
    step = median_step([b - a for a, b in zip(arrivals, arrivals[1:], strict=False)])
    return Run(out, t_first - t0, t_end - t_first, target_passes=None, step_seconds=step)


def run_editspec(decoder: Decoder, prompt: list[int], max_tokens: int, stop, opening: int | None = None) -> Run:
    """`opening`: tokens of the opening copy to verify within the prefill (None: the decoder's option)."""
    decoder.backend.truncate(0)  # a cold prefill, like every other method
    g = decoder.decode(prompt, stop=stop, max_tokens=max_tokens, opening_draft=opening)
    s = g.stats
    return Run(
        g.tokens,
        s.prefill_seconds,
        s.decode_seconds,
        s.target_passes,
        s.drafted_tokens,
        s.accepted_tokens,
        s.prefill_output_tokens,
        [len(r.drafted) for r in s.rounds if not r.opening],
        [r.accepted for r in s.rounds if not r.opening],
        opening_drafted=s.opening_drafted,
        opening_seconds=opening_pass_seconds(s.opening_drafted, s.verify_seconds),
        step_seconds=median_step_seconds(s.rounds),
    )


def run_server(server: peer.FreshServer, case: Case) -> Run:
    """llama.cpp's server (a process of its own) on the same prompt tokens; prefill and decode times from its own
    timings."""
    answer = server.complete(case.prompt, case.max_tokens, case.fenced)
    t = answer["timings"]
    tokens = answer.get("tokens") or []
    return Run(
        list(tokens),
        t["prompt_ms"] / 1000,
        t["predicted_ms"] / 1000,
        drafted=t.get("draft_n"),
        accepted=t.get("draft_n_accepted"),
        # Like its own predicted_per_second: the first token comes with the prompt, predicted_ms makes the rest.
        prefill_output_tokens=1,
    )


@dataclass
class Case:
    name: str
    prompt: list[int]
    max_tokens: int
    fenced: bool  # stop at the closing code fence
    opening: int | None = None  # editspec's opening copy, as a rewrite of this code verifies it (None: the default)


# An answer this short decodes in a second or two, within this machine's spread between runs: like the story, it
# gets at least SHORT_ROUNDS rounds (cheap, for so few tokens), so one slow spell does not decide its ratio.
SHORT_ANSWER = 64  # tokens
SHORT_ROUNDS = 3
# The fewest rounds the story gets (see run_case): its ratio is the method's overhead, 1-2% (a few drafts that fail),
# under this machine's spread between runs, 5-10%, so its fastest of five counts, not of three.
STORY_ROUNDS = 5


def fastest_interleaved(order: Sequence[str], repeats: int, run: Callable[[str], Run]) -> dict[str, Run]:
    """Each method's fastest of `repeats` runs, the methods taking turns (one run each per round, in `order`):
    a slow spell of the machine then falls on every method alike, not on one method's block of repeats. When
    every method's answer is shorter than SHORT_ANSWER tokens, at least SHORT_ROUNDS rounds."""
    runs: dict[str, list[Run]] = {name: [] for name in order}
    rounds = 0
    while rounds < repeats or (rounds < SHORT_ROUNDS and _short(runs)):
        for name in order:
            runs[name].append(run(name))
        rounds += 1
    return {name: min(done, key=lambda r: r.decode_seconds) for name, done in runs.items()}


def _short(runs: dict[str, list[Run]]) -> bool:
    return max(len(done[-1].tokens) for done in runs.values()) < SHORT_ANSWER


def canitedit_cases(backend: LlamaBackend, data: Path, limit: int | None) -> list[Case]:
    cases = []
    for line in data.read_text().splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        prompt = prompts.edit_prompt_tokens(backend, row["before"], row["instruction_descriptive"], fence=prompts.FENCE)
        before_tokens = len(backend.tokenize(row["before"]))
        max_tokens = min(768, int(before_tokens * 1.5) + 64)
        if len(prompt) + max_tokens + 40 > backend.n_ctx:
            continue
        opening = prompts.opening_length(backend, row["before"])
        cases.append(Case(f"canitedit/{row['id']}-{row['name']}", prompt, max_tokens, fenced=True, opening=opening))
        if limit is not None and len(cases) >= limit:
            break
    return cases


def run_benchmark(
    *,
    model: str | None = None,
    draft_model: str | None = None,
    data: str | None = None,
    limit: int | None = 12,
    threads: int | None = None,
    methods=METHODS,
    n_ctx: int = 4096,
    repeat: int = 1,
    progress: Callable[[str], None] = lambda msg: None,
) -> dict:
    server = peer.server_binary()
    if server is not None and tuple(methods) == METHODS:
        methods = (*METHODS, *SERVER_METHODS)
    unknown = set(methods) - set(METHODS) - set(SERVER_METHODS)
    if unknown:
        raise ValueError(f"unknown methods {sorted(unknown)}; choose from {', '.join(METHODS + SERVER_METHODS)}")
    if server is None and set(methods) & set(SERVER_METHODS):
        raise ValueError(f"the llama-server methods need ${peer.SERVER_ENV}: the path of a llama-server binary")
    methods = tuple(methods)
    data_path = find_data(data)
    backend = LlamaBackend(model, n_ctx=n_ctx, n_threads=threads)
    threads = backend.n_threads
    runners: dict[str, Callable[[Case, Callable], Run]] = {}
    measuring = lambda done, total: progress(calibration.MEASURING) if done == 0 else None  # noqa: E731
    lookup = Decoder(backend, DecodeOptions(), on_calibrate=measuring)
    plain_engine = Decoder(backend, DecodeOptions(speculate=False))
    is_end = backend.is_end_of_generation
    for name in methods:
        if name == "plain":
            llm = load_llama_cpp(backend.path, n_ctx, threads, None)
            runners[name] = lambda c, stop, llm=llm: run_llama_cpp(llm, c.prompt, c.max_tokens, stop, is_end)
        elif name.startswith("llama_cpp_pld"):
            llm = load_llama_cpp(backend.path, n_ctx, threads, int(name.removeprefix("llama_cpp_pld")))
            runners[name] = lambda c, stop, llm=llm: run_llama_cpp(llm, c.prompt, c.max_tokens, stop, is_end)
        elif name == "editspec_plain":
            runners[name] = lambda c, stop: run_editspec(plain_engine, c.prompt, c.max_tokens, stop, c.opening)
        elif name == "editspec_lookup":
            runners[name] = lambda c, stop: run_editspec(lookup, c.prompt, c.max_tokens, stop, c.opening)
        elif name in SERVER_METHODS:
            srv = peer.FreshServer(server, backend.path, threads=threads, n_ctx=n_ctx, extra=peer.SPEC_ARGS[name])
            runners[name] = lambda c, stop, srv=srv: run_server(srv, c)
        elif name == "editspec_draft_model":
            # Without --draft-model the bundled model drafts for itself: correct, but it cannot be faster.
            draft_backend = LlamaBackend(draft_model or backend.path, n_ctx=n_ctx, n_threads=threads)
            with_model = Decoder(backend, DecodeOptions(), draft_backend=draft_backend)
            runners[name] = lambda c, stop, d=with_model: run_editspec(d, c.prompt, c.max_tokens, stop, c.opening)

    def stop_for(case: Case):
        if case.fenced:
            return prompts.FenceStop(backend)
        return lambda out: False

    def run_case(case: Case, index: int) -> dict:
        order = list(methods[index % len(methods) :]) + list(methods[: index % len(methods)])
        # The story is one short run per method (of 256 tokens, more than SHORT_ANSWER, but with nothing to
        # copy its ratio is all overhead and noise): more repeats keep it from being noise.
        runs = fastest_interleaved(
            order,
            repeat if case.fenced else max(STORY_ROUNDS, repeat),
            lambda name: runners[name](case, stop_for(case)),
        )
        reference = runs["plain"].tokens if "plain" in runs else None
        record = {
            "case": case.name,
            "prompt_tokens": len(case.prompt),
            "max_tokens": case.max_tokens,
            "methods": {name: runs[name].record(reference) for name in methods},
        }
        if reference is not None:
            base = runs["plain"].decode_tokens_per_second
            for name in methods:
                rate = runs[name].decode_tokens_per_second
                record["methods"][name]["speedup_vs_plain"] = round(rate / base, 3) if base else None
                phase = runs[name].decode_phase_tokens_per_second
                record["methods"][name]["decode_phase_speedup_vs_plain"] = round(phase / base, 3) if base else None
        if "editspec_lookup" in runs:
            record["oracle"] = oracle_record(case, runs["editspec_lookup"], lookup.verify_seconds, record)
            record["machine_drift"] = machine_drift(runs["editspec_lookup"], runs.get("plain"))
        return record

    story_prompt = backend.tokenize(prompts.chat_prompt(backend, STORY))
    progress("warming up every method (first runs are slow: page faults, allocations)")
    for name in methods:
        runners[name](Case("warm-up", story_prompt, 16, fenced=False), lambda out: False)

    cases = canitedit_cases(backend, data_path, limit)
    results = []
    for i, case in enumerate(cases):
        progress(f"[{i + 1}/{len(cases)}] {case.name} ({len(case.prompt)} prompt tokens)")
        results.append(run_case(case, i))
        progress(_case_line(results[-1], methods))
    progress("story prompt (nothing to copy)")
    story = run_case(Case("story", story_prompt, 256, fenced=False), 0)

    summary = {name: method_summary(results, name) for name in methods}
    replays = [r["oracle"] for r in results if "oracle" in r]
    oracle_summary = None
    if replays:
        oracle_summary = {
            "median_speedup": round(statistics.median(o["speedup"] for o in replays), 3),
            "median_live_over_oracle": _median([o["live_over_oracle"] for o in replays]),
            "median_live_modelled_speedup": _median([o["live_modelled_speedup"] for o in replays]),
            "median_foresight_speedup": _median([o.get("foresight_speedup") for o in replays]),
            "median_foresight_over_oracle": _median(
                [o["foresight_speedup"] / o["speedup"] for o in replays if o.get("foresight_speedup")]
            ),
        }
    drifts = [r["machine_drift"] for r in results if r.get("machine_drift") is not None]
    drift_summary = None
    if drifts:
        drift_summary = {"median": _median(drifts), "lowest": min(drifts), "highest": max(drifts), "cases": len(drifts)}
    return {
        "methods": list(methods),
        "machine": {
            "threads": threads,
            "model": str(backend.path),
            "cpu_count": os.cpu_count(),
            "tiled_matmul": backend.tiled_matmul,
        },
        "peers": peer_ratios(results, methods),
        "cases": results,
        "summary": summary,
        "oracle": oracle_summary,
        "machine_drift": drift_summary,
        "story": {name: story["methods"][name].get("speedup_vs_plain") for name in methods},
        "story_case": story,
        "limit": round(lookup.limit(), 3),
        "repeat": repeat,
        "verify_seconds": [round(x, 5) for x in lookup.verify_seconds],
    }


def method_summary(results: list[dict], name: str) -> dict:
    """One method's figures over the cases' records."""
    runs = [r["methods"][name] for r in results]
    rates = [m["tokens_per_s"] for m in runs]
    timed = [m for m in runs if m.get("speedup_vs_plain") is not None]
    speedups = [m["speedup_vs_plain"] for m in timed]
    # A case whose text left plain's at a near-tie is timed over another answer (longer or shorter, more or less
    # to copy): its speed-up is not a like-for-like comparison, so the lowest is also given without such cases.
    like_for_like = [m["speedup_vs_plain"] for m in timed if m["same_as_plain"]]
    return {
        "median_speedup_vs_plain": round(statistics.median(speedups), 3) if speedups else None,
        "lowest_speedup_vs_plain": round(min(speedups), 3) if speedups else None,
        "lowest_speedup_same_text": round(min(like_for_like), 3) if like_for_like else None,
        "median_decode_phase_speedup_vs_plain": _median([m.get("decode_phase_speedup_vs_plain") for m in runs]),
        "median_tokens_per_s": round(statistics.median(rates), 2) if rates else None,
        "median_prefill_seconds": round(statistics.median(m["prefill_seconds"] for m in runs), 4) if runs else None,
        "same_as_plain": sum(1 for m in runs if m["same_as_plain"]),
        "cases": len(results),
    }


def peer_ratios(results: list[dict], methods) -> dict:
    """editspec lookup's decode speed over each peer's, per case, in the median."""

    def rate(r, name):
        return r["methods"][name]["tokens_per_s"] if name in r["methods"] else None

    ratios = {}
    if "editspec_lookup" not in methods:
        return ratios
    pld = [m for m in ("llama_cpp_pld10", "llama_cpp_pld2") if m in methods]
    if pld:
        ratios["over_better_llama_cpp_pld"] = _median(
            [rate(r, "editspec_lookup") / max(rate(r, m) for m in pld) for r in results if max(rate(r, m) for m in pld)]
        )
    for m in SERVER_METHODS:
        if m in methods:
            ratios[f"over_{m}"] = _median([rate(r, "editspec_lookup") / rate(r, m) for r in results if rate(r, m)])
    if "llama_server_ngram_mod" in methods and "llama_server_plain" in methods:
        ratios["llama_server_ngram_mod_over_its_plain"] = _median(
            [
                rate(r, "llama_server_ngram_mod") / rate(r, "llama_server_plain")
                for r in results
                if rate(r, "llama_server_plain")
            ]
        )
    return ratios


def machine_drift(lookup: Run, plain: Run | None) -> float | None:
    """The median decoding step in editspec lookup's run over the median in plain's run of the same case (both a
    pass over one token): 1 when the machine ran as fast for both; 1.2 when it was 20% slower while lookup ran,
    which then understates lookup's speed-up in that case by about as much. Medians of both: step times have a
    tail of slow ones, so one run's median against the other's mean would read as drift when there is none."""
    if plain is None or not lookup.step_seconds or not plain.step_seconds:
        return None
    return round(lookup.step_seconds / plain.step_seconds, 3)


def _median(values) -> float | None:
    values = [v for v in values if v is not None]
    return round(statistics.median(values), 3) if values else None


def oracle_record(case: Case, run: Run, verify_seconds, record: dict) -> dict:
    """The oracle replay of editspec's lookup run: the best draft lengths with the same drafts and these costs,
    beside the live run (measured, and by the same cost model)."""
    # From the first token on, as the decode-only speed counts: the opening is one of the oracle's choices too
    # (its pass verified opening_drafted - 1 drafts after the first token).
    # Per pass, (drafts verified, drafts accepted); the opening's are those after the first token (accepted -1: its
    # first token was not the answer's).
    opening = [(run.opening_drafted - 1, run.prefill_output_tokens - 2)] if run.opening_drafted else []
    passes = opening + list(zip(run.drafted_lengths or [], run.accepted_lengths or [], strict=True))
    r = oracle.replay(case.prompt, run.tokens, 1, verify_seconds)
    modelled = oracle.live_model_seconds([k for k, _ in passes], verify_seconds)
    foresight = oracle.foresight_seconds(passes, verify_seconds)  # the same passes stopped where each copy broke
    live = record["methods"]["editspec_lookup"].get("speedup_vs_plain")
    return {
        "decoded": r.decoded,
        "speedup": round(r.speedup, 3),
        "live_modelled_speedup": round(r.plain_seconds / modelled, 3) if modelled else None,
        "foresight_speedup": round(r.plain_seconds / foresight, 3) if foresight else None,
        "live_over_oracle": round(live / r.speedup, 3) if live else None,
        "copyable": round(sum(1 for a in r.agreement if a > 0) / len(r.agreement), 3) if r.agreement else None,
    }


def _case_line(record: dict, methods) -> str:
    parts = [f"{n}={record['methods'][n]['tokens_per_s']:.0f}t/s" for n in methods]
    if "oracle" in record:
        o = record["oracle"]
        parts.append(f"oracle={o['speedup']:.2f}x live/oracle={o['live_over_oracle']}")
    return "    " + "  ".join(parts)
