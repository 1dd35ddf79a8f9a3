"""Which of llama.cpp's CPU matrix kernels runs a model file faster on this machine: measured, not assumed.

llama.cpp hands matrix products of 8 or more rows against K-quant weights to a tiled kernel, unless
`GGML_CPU_TILED_MM=0`; it reads the variable once per process, at its first product. Whether the kernel pays
depends on the CPU. On the 2-core AVX2 machines editspec was first tuned on it made verify passes of 8 to 16
tokens 20-40% dearer and read prompts about 7% faster; on a 2-core AVX-512 EPYC it read prompts 25% faster,
passes of up to 8 tokens cost the same and passes of 16 to 32 a quarter less. So neither setting is right for
every machine, and editspec measures both, once per model file, CPU and thread count: the calibration measures
verify costs under the process's setting, a child process measures them under the other, and prompt reading is
timed in both. Every later process starts with the faster one (the measurement's own process keeps the one it
started with). A `GGML_CPU_TILED_MM` the user set always wins, and nothing is measured then.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import llama_cpp

from . import calibration
from .models import cpu_identity

ENV = "GGML_CPU_TILED_MM"
USER_SETTING = os.environ.get(ENV)  # as the user started the process, before editspec sets it
UNMEASURED = "0"  # the setting until this machine has been measured: the one editspec was tuned with
# What "faster" means: a typical rewrite, PROMPT_TOKENS read, then ANSWER_TOKENS verified in passes of every
# length from 1 to LONGEST_PASS alike (the policy's passes range that widely within one answer).
PROMPT_TOKENS = 300
ANSWER_TOKENS = 150
LONGEST_PASS = 16
PREFILL_TOKENS = 256  # timed twice, the faster kept
MARGIN = 0.03  # the tiled kernel is chosen only when it makes that rewrite at least this much shorter
_process_setting: str | None = USER_SETTING  # fixed once a model is loaded in this process


def choices_file() -> Path:
    return calibration.cache_file().with_name("kernels.json")


def choice_key(model_path: str | os.PathLike, n_threads: int) -> str:
    stat = Path(model_path).stat()
    ident = {
        "model": str(model_path),
        "size": stat.st_size,
        "mtime": int(stat.st_mtime),
        "threads": n_threads,
        "cpu": cpu_identity(),
        "llama_cpp": getattr(llama_cpp, "__version__", "?"),
    }
    return json.dumps(ident, sort_keys=True)


def stored_choice(model_path: str | os.PathLike, n_threads: int) -> dict | None:
    try:
        entry = json.loads(choices_file().read_text()).get(choice_key(model_path, n_threads))
    except (OSError, ValueError, AttributeError):
        return None
    return entry if isinstance(entry, dict) and entry.get("setting") in ("0", "1") else None


def setting_for(model_path: str | os.PathLike, n_threads: int) -> str:
    """The kernel setting a model loaded now runs with, set in the environment before llama.cpp's first product:
    the user's; else the one this process already runs with; else what this machine measured for the model file;
    else UNMEASURED."""
    global _process_setting
    if _process_setting is None:
        chosen = stored_choice(model_path, n_threads)
        _process_setting = chosen["setting"] if chosen else UNMEASURED
        os.environ[ENV] = _process_setting
    return _process_setting


def modelled_seconds(prefill_per_token: float, verify_seconds: list[float]) -> float:
    """A typical rewrite's time under one kernel setting (see PROMPT_TOKENS)."""
    lengths = range(1, LONGEST_PASS + 1)
    per_token = sum(verify_seconds[m] for m in lengths) / sum(lengths)
    return PROMPT_TOKENS * prefill_per_token + ANSWER_TOKENS * per_token


def prefill_seconds_per_token(backend) -> float:
    """Seconds per token of reading a prompt, read whole: no kept prefix of it reused."""
    filler = calibration.filler_tokens(backend, PREFILL_TOKENS)
    kept, backend.prefix_cache = getattr(backend, "prefix_cache", None), None
    try:
        backend.truncate(0)
        backend.prefill(filler[:16])  # first products: buffers allocated, pages touched
        best = float("inf")
        for _ in range(2):
            backend.truncate(0)
            t0 = time.perf_counter()
            backend.prefill(filler)
            best = min(best, time.perf_counter() - t0)
        backend.truncate(0)
    finally:
        backend.prefix_cache = kept
    return best / PREFILL_TOKENS


def measure_other(backend, verify_seconds: list[float], on_progress=None) -> dict | None:
    """Once per model file, CPU and thread count, unless the user chose the setting (or layers run on a GPU):
    time this process's kernels (their verify costs are `verify_seconds`) against the other setting's in a child
    process, and keep the faster for later processes. Returns the stored choice (None when nothing was
    measured). `on_progress(done, total)` while the child calibrates."""
    if USER_SETTING is not None or getattr(backend, "n_gpu_layers", 0) != 0:
        return None
    if stored_choice(backend.path, backend.n_threads) is not None:
        return None
    mine = os.environ.get(ENV, UNMEASURED)
    other = "1" if mine == "0" else "0"
    own = {"prefill_per_token": prefill_seconds_per_token(backend), "verify_seconds": list(verify_seconds)}
    env = dict(os.environ, **{ENV: other})
    result = None
    with tempfile.TemporaryFile("w+") as errors:  # a file, not a pipe: a chatty child cannot block on it
        child = subprocess.Popen(
            [sys.executable, "-m", "editspec.kernels", str(backend.path), str(backend.n_threads)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=errors,
            text=True,
        )
        for line in child.stdout:
            try:
                message = json.loads(line)
            except ValueError:
                continue  # not one of ours
            if not isinstance(message, dict):
                continue
            if "progress" in message and on_progress is not None:
                on_progress(*message["progress"])
            result = message.get("result", result)
        child.wait()
        errors.seek(0)
        error = errors.read().strip()
    if child.returncode == 0 and result is not None:
        entry = decide({mine: own, other: result})
    else:  # the other kernels failed (a CPU that faults on them): keep these, and do not try again
        last = error.splitlines()[-1] if error else f"exit code {child.returncode}"
        entry = {**decide({mine: own}), "other_failed": last[:200]}
    calibration.atomic_update(choices_file(), choice_key(backend.path, backend.n_threads), entry)
    return entry


def decide(measured: dict[str, dict]) -> dict:
    """The choice, from each setting's measurement (`prefill_per_token`, `verify_seconds`), with the numbers it
    rests on. With one setting measured (the other failed), that one."""
    timed = {s: modelled_seconds(m["prefill_per_token"], m["verify_seconds"]) for s, m in measured.items()}
    if len(timed) == 1:
        setting = next(iter(timed))
    else:  # within MARGIN: the setting editspec was tuned with
        setting = "1" if timed["1"] < (1 - MARGIN) * timed["0"] else "0"
    return {
        "setting": setting,
        "modelled_seconds": {s: round(t, 4) for s, t in timed.items()},
        "prefill_tokens_per_second": {s: round(1 / m["prefill_per_token"], 1) for s, m in measured.items()},
        "pass_seconds": {s: [round(x, 5) for x in m["verify_seconds"][1:]] for s, m in measured.items()},
    }


def _child(model_path: str, n_threads: int) -> None:
    """The other setting's measurement (`python -m editspec.kernels MODEL THREADS`, the setting in the
    environment): its calibration, kept for later processes with this setting, and its prompt reading; JSON lines
    on stdout."""
    from .backend import LlamaBackend

    def report(done, total):
        print(json.dumps({"progress": [done, total]}), flush=True)

    backend = LlamaBackend(model_path, n_threads=n_threads, n_ctx=2048)
    costs = calibration.verify_seconds(backend, on_measure=report)
    result = {"prefill_per_token": prefill_seconds_per_token(backend), "verify_seconds": costs}
    print(json.dumps({"result": result}), flush=True)
    backend.close()


if __name__ == "__main__":
    _child(sys.argv[1], int(sys.argv[2]))
