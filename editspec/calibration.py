"""How long one target pass over m tokens takes on this machine: the cost side of the draft length.

Measured once per model file and thread count, then cached under ~/.cache/editspec (or $XDG_CACHE_HOME).
"""

from __future__ import annotations

import json
import os
import statistics
import time
from pathlib import Path

MEASURED_LENGTHS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 28, 33)
MAX_PASS = 33  # the pending token plus up to 32 drafted tokens
CONTEXT_TOKENS = 600  # roughly an edit prompt; attention cost grows with it


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "editspec" / "verify-costs.json"


def measure_verify_seconds(backend, repeats: int = 5) -> list[float]:
    """Median seconds of `evaluate` over m tokens, m = 0..MAX_PASS (index 0 unused), interpolated."""
    filler = [t % (backend.n_vocab - 10) + 10 for t in range(CONTEXT_TOKENS)]
    backend.truncate(0)
    backend.prefill(filler)
    measured = {}
    for m in MEASURED_LENGTHS:
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            backend.evaluate(filler[:m])
            times.append(time.perf_counter() - t0)
            backend.truncate(CONTEXT_TOKENS)
        measured[m] = statistics.median(times)
    backend.truncate(0)
    costs = [0.0]
    lengths = sorted(measured)
    for m in range(1, MAX_PASS + 1):
        hi = next(x for x in lengths if x >= m)
        lo = max(x for x in lengths if x <= m)
        frac = 0.0 if hi == lo else (m - lo) / (hi - lo)
        costs.append(measured[lo] + frac * (measured[hi] - measured[lo]))
    # A longer pass never costs less than a shorter one; noise can say otherwise.
    for m in range(2, len(costs)):
        costs[m] = max(costs[m], costs[m - 1])
    return costs


def verify_seconds(backend, refresh: bool = False) -> list[float]:
    """The cached calibration for this backend, measuring it first if needed."""
    key = json.dumps(backend.identity(), sort_keys=True)
    path = cache_file()
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if not refresh and isinstance(cached.get(key), list) and len(cached[key]) == MAX_PASS + 1:
        return cached[key]
    costs = measure_verify_seconds(backend)
    cached[key] = costs
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cached, indent=1))
        tmp.replace(path)
    except OSError:
        pass  # a read-only home only costs a re-measurement next time
    return costs


def speedup_limit(costs: list[float]) -> float:
    """One decode step's time over the best per-token time of a verify pass: the most a perfect copy gains."""
    return costs[1] / min(costs[m] / m for m in range(1, len(costs)))
