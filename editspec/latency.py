"""`editspec bench --latency`: the wait a user feels, cold and warm, beside plain llama-cpp-python.

Per CanItEdit case: a cold rewrite (model loaded fresh, nothing cached) of the function the reference edit
changes most; two warm ones with the kept prompt prefix: the next function of the file with the same
instruction ("warm", as batch mode and several `--function`s do; only when the file has two), and a retry of
the first function with the short ("lazy") instruction ("retry"); the language server's first rewrite in
the file, with the prompt's shared prefix read ahead at the code action ("editor"), and then the next
function the same way ("editor_next": the file's part of the prompt is kept, the function read ahead);
then what a user of
plain llama-cpp-python would do: `create_chat_completion` with the whole file and the instruction. For each:
model load, prompt tokens (and how many were read, not reused), prefill, time to first token, time to the
first complete line (when the language server sends its first edit), decode, and total.
"""

from __future__ import annotations

import difflib
import json
import statistics
import time
from collections.abc import Callable

from .backend import LlamaBackend
from .batch import select_functions
from .bench import _llama_cpp_model_params_patched, find_data
from .decoding import DecodeOptions, Decoder
from .locate import Definition, definitions, language_for
from .prompts import render_chat, whole_file_messages
from .rewrite import Rewriter, RewriteResult, SourceFile


def changed_lines(before: str, after: str) -> set[int]:
    """1-based lines of `before` that the reference edit replaces or deletes."""
    changed = set()
    matcher = difflib.SequenceMatcher(a=before.splitlines(), b=after.splitlines(), autojunk=False)
    for tag, i1, i2, _, _ in matcher.get_opcodes():
        if tag != "equal":
            changed.update(range(i1 + 1, max(i2, i1 + 1) + 1))
    return changed


def pick_targets(before: str, after: str) -> list[Definition]:
    """The functions a user would point at: the most changed first."""
    defs = select_functions(definitions(before.encode(), language_for("case.py")), "*")
    changed = changed_lines(before, after)
    return sorted(defs, key=lambda d: -len(changed & set(range(d.line, d.end_line + 1))))


def timed_rewrite(
    rewriter: Rewriter, source: SourceFile, target: Definition, instruction: str, load_seconds: float
) -> dict:
    t0 = time.perf_counter()
    first_line = []

    def on_progress(p):
        if not first_line and "\n" in p.text:
            first_line.append(time.perf_counter() - t0)

    result: RewriteResult = rewriter.rewrite(source, language_for("case.py"), target, instruction, on_progress)
    total = time.perf_counter() - t0
    s = result.stats
    return {
        "function": target.name,
        "load_seconds": round(load_seconds, 3),
        "prompt_tokens": s.prompt_tokens,
        "read_prompt_tokens": s.prompt_tokens - s.reused_prompt_tokens,
        "prefill_seconds": round(s.prefill_seconds, 3),
        "first_token_seconds": round(s.prefill_seconds, 3),
        "first_line_seconds": round(first_line[0], 3) if first_line else round(total, 3),
        "decode_seconds": round(s.decode_seconds, 3),
        "generated_tokens": s.generated_tokens,
        "decode_rounds": s.target_passes - 1,
        "total_seconds": round(total, 3),
        "done_seconds": round(load_seconds + total, 3),
    }


def editor_rewrite(
    rewriter: Rewriter, source: SourceFile, target: Definition, instruction: str, fresh: bool = True
) -> dict:
    """A rewrite in the language server: the prompt's shared prefix was read ahead when the editor asked for
    code actions, while the user typed the instruction. `fresh`: the first in the file (nothing kept)."""
    backend = rewriter.backend
    if fresh:
        if backend.prefix_cache is not None:
            backend.prefix_cache.entries.clear()
        backend.truncate(0)
    t0 = time.perf_counter()
    read = rewriter.read_ahead(source, language_for("case.py"), target)
    ahead = time.perf_counter() - t0
    return {
        **timed_rewrite(rewriter, source, target, instruction, 0.0),
        "read_ahead_tokens": read,
        "read_ahead_seconds": round(ahead, 3),
    }


def plain_llama_cpp(model_path, threads: int, messages: list[dict], prompt_tokens: int, max_tokens: int) -> dict:
    """A plain llama-cpp-python user: the whole file and the instruction, create_chat_completion, streamed. Call it
    with no other copy of the model loaded in the process: loading a second copy took 9-10 s here, one alone 2 s
    (the second needs memory the machine had not handed out before, which a virtual machine may do slowly)."""
    from llama_cpp import Llama

    t0 = time.perf_counter()
    with _llama_cpp_model_params_patched():
        llm = Llama(str(model_path), n_ctx=4096, n_threads=threads, n_threads_batch=threads, verbose=False)
    load = time.perf_counter() - t0
    # llama-cpp-python renders the GGUF's own chat template, as editspec does.
    t1 = time.perf_counter()
    first_token = first_line = None
    text, n = "", 0
    for chunk in llm.create_chat_completion(messages, temperature=0.0, max_tokens=max_tokens, stream=True):
        delta = chunk["choices"][0]["delta"].get("content") or ""
        if not delta:
            continue
        now = time.perf_counter() - t1
        first_token = first_token if first_token is not None else now
        text += delta
        n += 1
        if first_line is None and "\n" in text:
            first_line = now
    total = time.perf_counter() - t1
    del llm
    return {
        "load_seconds": round(load, 3),
        "prompt_tokens": prompt_tokens,
        "first_token_seconds": round(first_token or total, 3),
        "first_line_seconds": round(first_line or total, 3),
        "total_seconds": round(total, 3),
        "done_seconds": round(load + total, 3),
        "chunks": n,
    }


def run_latency(
    *,
    model: str | None = None,
    data: str | None = None,
    limit: int = 10,
    threads: int | None = None,
    progress: Callable[[str], None] = lambda m: None,
) -> dict:
    rows = [json.loads(line) for line in find_data(data).read_text().splitlines() if line.strip()]
    cases = []
    for row in rows:
        if len(cases) >= limit:
            break
        targets = pick_targets(row["before"], row["after"])
        if not targets:
            continue
        progress(f"[{len(cases) + 1}/{limit}] {row['id']}-{row['name']}")
        source = SourceFile.from_bytes(row["before"].encode())
        t0 = time.perf_counter()
        backend = LlamaBackend(model, n_threads=threads, prefix_cache_bytes=256 << 20)
        load = time.perf_counter() - t0
        rewriter = Rewriter(Decoder(backend, DecodeOptions()))
        cold = timed_rewrite(rewriter, source, targets[0], row["instruction_descriptive"], load)
        warm = None
        if len(targets) > 1:
            warm = timed_rewrite(rewriter, source, targets[1], row["instruction_descriptive"], 0.0)
        retry = timed_rewrite(rewriter, source, targets[0], row["instruction_lazy"], 0.0)
        editor = editor_rewrite(rewriter, source, targets[0], row["instruction_descriptive"])
        editor_next = None
        if len(targets) > 1:  # then the next function, as the editor does it
            editor_next = editor_rewrite(rewriter, source, targets[1], row["instruction_descriptive"], fresh=False)
        messages = whole_file_messages(row["before"], row["instruction_descriptive"])
        prompt_tokens = len(backend.tokenize(render_chat(backend.chat_template(), messages)))
        max_tokens = min(1024, len(backend.tokenize(row["before"])) * 3 // 2 + 64)
        path, threads = backend.path, backend.n_threads
        backend.close()  # the whole file loads as in a user's own process: the only copy of the model
        plain = plain_llama_cpp(path, threads, messages, prompt_tokens, max_tokens)
        cases.append(
            {
                "case": f"{row['id']}-{row['name']}",
                "cold": cold,
                "warm": warm,
                "retry": retry,
                "editor": editor,
                "editor_next": editor_next,
                "llama_cpp_whole_file": plain,
                # One decoding round (a target pass) of the cold request, on average.
                "round_seconds": round(cold["decode_seconds"] / max(cold["decode_rounds"], 1), 4),
            }
        )
        progress(
            f"    cold {cold['total_seconds']}s (prefill {cold['prefill_seconds']}s, {cold['read_prompt_tokens']} "
            f"tokens) · next function read {warm['read_prompt_tokens'] if warm else '-'} · retry read "
            f"{retry['read_prompt_tokens']} · editor read "
            f"{editor['read_prompt_tokens']} after {editor['read_ahead_tokens']} ahead · llama-cpp whole file "
            f"{plain['total_seconds']}s"
        )

    def med(values):
        values = [v for v in values if v is not None]
        return round(statistics.median(values), 3) if values else None

    summary = {
        "warm_read_over_cold_read": med(
            c["warm"]["read_prompt_tokens"] / max(c["cold"]["read_prompt_tokens"], 1) for c in cases if c["warm"]
        ),
        "retry_read_over_cold_read": med(
            c["retry"]["read_prompt_tokens"] / max(c["cold"]["read_prompt_tokens"], 1) for c in cases
        ),
        "editor_next_read_over_cold_read": med(
            c["editor_next"]["read_prompt_tokens"] / max(c["cold"]["read_prompt_tokens"], 1)
            for c in cases
            if c["editor_next"]
        ),
        "editor_read_over_cold_read": med(
            c["editor"]["read_prompt_tokens"] / max(c["cold"]["read_prompt_tokens"], 1) for c in cases
        ),
        "editor_first_edit_over_cold_first_edit": med(
            c["editor"]["first_line_seconds"] / c["cold"]["first_line_seconds"] for c in cases
        ),
        "cold_done_over_llama_cpp_done": med(
            c["cold"]["total_seconds"] / c["llama_cpp_whole_file"]["total_seconds"] for c in cases
        ),
        "first_edit_over_prefill_plus_round": med(
            c["cold"]["first_line_seconds"] / (c["cold"]["prefill_seconds"] + c["round_seconds"]) for c in cases
        ),
    }
    for kind in ("cold", "warm", "retry", "editor", "editor_next", "llama_cpp_whole_file"):
        for field in ("load_seconds", "first_token_seconds", "first_line_seconds", "total_seconds"):
            summary[f"{kind}_{field}"] = med(c[kind][field] for c in cases if c[kind])
    for kind in ("cold", "warm", "retry", "editor", "editor_next"):
        summary[f"{kind}_prefill_seconds"] = med(c[kind]["prefill_seconds"] for c in cases if c[kind])
        summary[f"{kind}_read_prompt_tokens"] = med(c[kind]["read_prompt_tokens"] for c in cases if c[kind])
    summary["warm_cases"] = sum(1 for c in cases if c["warm"])
    summary["llama_cpp_whole_file_read_prompt_tokens"] = med(c["llama_cpp_whole_file"]["prompt_tokens"] for c in cases)
    return {"cases": cases, "summary": summary}
