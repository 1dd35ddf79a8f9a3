"""How long one target pass over m tokens takes on this machine: the cost side of the draft length.

Measured once per model file, CPU and thread count, then cached under ~/.cache/editspec (or $XDG_CACHE_HOME).
"""

from __future__ import annotations

import json
import math
import os
import random
import statistics
import time
from pathlib import Path

MAX_PASS = 33  # the pending token plus up to 32 drafted tokens
CONTEXT_TOKENS = 600  # roughly an edit prompt; attention cost grows with it
SWEEPS = 5


def cache_file() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache"
    return Path(base) / "editspec" / "verify-costs.json"


def measure_verify_seconds(
    backend, sweeps: int | None = None, seed: int = 0, clock=time.perf_counter, on_progress=None
) -> list[float]:
    """Seconds of `evaluate` over m tokens, m = 0..MAX_PASS (index 0 unused), each length measured.

    The curve is not smooth: the CPU kernels work in tiles of rows, so on the coder model here a pass over 16
    tokens costs less than one over 13-15, and one over 32 less than one over 31. So every length is measured,
    none interpolated, and a longer pass may cost less than a shorter one. The lengths are measured in `sweeps`
    (SWEEPS unless given) sweeps, each in its own shuffled order (so that a slow spell of the machine falls on a
    few lengths of one sweep, not on the long ones of every sweep), and each length keeps its median: robust to a
    busy spell, and to the odd fast outlier that a fastest-of-sweeps takes for the truth. `on_progress(done,
    total)` before the first pass and after each, counting m + 1 for a pass over m tokens (about how its time
    grows)."""
    sweeps = SWEEPS if sweeps is None else sweeps
    filler = filler_tokens(backend, CONTEXT_TOKENS)
    backend.truncate(0)
    backend.prefill(filler)
    lengths = list(range(1, MAX_PASS + 1))
    times: dict[int, list[float]] = {m: [] for m in lengths}
    order = random.Random(seed)
    done, total = 0, sweeps * sum(m + 1 for m in lengths)
    if on_progress is not None:
        on_progress(done, total)
    for _ in range(sweeps):
        order.shuffle(lengths)
        for m in lengths:
            t0 = clock()
            backend.evaluate(filler[:m])
            times[m].append(clock() - t0)
            backend.truncate(CONTEXT_TOKENS)
            done += m + 1
            if on_progress is not None:
                on_progress(done, total)
    backend.truncate(0)
    return [0.0] + [statistics.median(times[m]) for m in range(1, MAX_PASS + 1)]


def filler_tokens(backend, n: int) -> list[int]:
    """n ordinary tokens (past the first ten ids, where the special ones are) to time passes and prompts with."""
    return [t % (backend.n_vocab - 10) + 10 for t in range(n)]


MEASURING = "measuring what a verify pass costs on this machine (once per model file, CPU and thread count)"


def identity_key(backend) -> str:
    """What a calibration (and what rewrites taught) is kept under: the backend's identity."""
    return json.dumps(backend.identity(), sort_keys=True)


def verify_seconds(backend, refresh: bool = False, on_measure=None) -> list[float]:
    """The cached calibration for this backend, measuring it first if needed (about two minutes for the coder
    model on 2 cores; `on_measure(done, total)` meanwhile, as `measure_verify_seconds`'s `on_progress`)."""
    key = identity_key(backend)
    try:
        cached = json.loads(cache_file().read_text()).get(key)
    except (OSError, ValueError, AttributeError):
        cached = None
    if not refresh and isinstance(cached, list) and len(cached) == MAX_PASS + 1:
        return cached
    costs = measure_verify_seconds(backend, on_progress=on_measure)
    atomic_update(cache_file(), key, costs)  # a read-only home only costs a re-measurement next time
    return costs


def atomic_update(path: Path, key: str, value) -> None:
    """Set path's JSON object's `key` to `value`, replacing the file atomically (a read-only cache is no error)."""
    try:
        cached = json.loads(path.read_text())
    except (OSError, ValueError):
        cached = {}
    if not isinstance(cached, dict):
        cached = {}
    cached[key] = value
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(cached, indent=1))
        tmp.replace(path)
    except OSError:
        pass


def learned_file() -> Path:
    return cache_file().with_name("learned.json")


class LearnedState:
    """What rewrites taught about one model file on this machine (its calibration's identity): the draft-length
    policy's acceptance estimates and the verify costs the rounds actually took. Loaded when a decoder starts,
    saved after every request, so that a short answer does not pay for learning again."""

    def __init__(self, backend):
        self.key = identity_key(backend)

    def load(self) -> dict:
        try:
            entry = json.loads(learned_file().read_text()).get(self.key)
        except (OSError, ValueError, AttributeError):
            return {}
        return entry if isinstance(entry, dict) else {}

    def save(self, state: dict) -> None:
        atomic_update(learned_file(), self.key, state)


# Online costs, in two parts. The calibration is a prior worth PRIOR_ROUNDS rounds at every length; each observed
# round (m tokens, s seconds) is evidence of log(s / calibrated[m]).
# - What a busy or a faster machine changes is every length alike: a smooth ratio, the evidence shared with nearby
#   lengths by a kernel in log m (KERNEL_WIDTH), and lengths beyond those observed take the ratio of the longest
#   observed, so rounds of 4 to 8 tokens also correct a calibration of 16 or 33 (a policy that believes long
#   passes are dear never runs them, so they must be corrected from the ones it does run).
# - What the calibration got wrong at one length (five sweeps of a noisy machine can show a dip that is not
#   there, and the policy then favours that length) is corrected at that length alone, by what the rounds of
#   that length left over from the smooth ratio, the calibration worth LOCAL_PRIOR_ROUNDS rounds there.
# Ratios are clipped (a round that waited on another process says little about the machine) and older rounds
# slowly forgotten.
PRIOR_ROUNDS = 8.0
KERNEL_WIDTH = 0.35
LOCAL_PRIOR_ROUNDS = 4.0
COST_FORGETTING = 0.998
MAX_LOG_RATIO = math.log(3.0)


class OnlineCosts:
    def __init__(self, calibrated, state: dict | None = None):
        self.calibrated = list(calibrated)
        # per pass length m: [weighted sum of log ratios, weight]
        self.evidence = [[0.0, 0.0] for _ in self.calibrated]
        # Evidence is relative to the calibration it was gathered against: a new calibration starts afresh.
        same = state and state.get("calibration_total") == round(sum(self.calibrated), 6)
        if same and isinstance(state.get("evidence"), list) and len(state["evidence"]) == len(self.calibrated):
            with_numbers = all(isinstance(e, list) and len(e) == 2 for e in state["evidence"])
            if with_numbers:
                self.evidence = [[float(a), float(b)] for a, b in state["evidence"]]

    def observe(self, m: int, seconds: float) -> None:
        if not 1 <= m < len(self.calibrated) or seconds <= 0:
            return
        ratio = max(-MAX_LOG_RATIO, min(MAX_LOG_RATIO, math.log(seconds / self.calibrated[m])))
        for e in self.evidence:
            e[0] *= COST_FORGETTING
            e[1] *= COST_FORGETTING
        self.evidence[m][0] += ratio
        self.evidence[m][1] += 1.0

    def costs(self) -> list[float]:
        """The calibration corrected by the evidence: a smooth ratio, which keeps the calibration's dips where it
        measured them, and at each length what that length's own rounds say beyond it."""
        observed = [(j, s, w) for j, (s, w) in enumerate(self.evidence) if w > 1e-6]
        shortest = min((j for j, _, _ in observed), default=1)
        longest = max((j for j, _, _ in observed), default=1)
        costs = [0.0]
        for m in range(1, len(self.calibrated)):
            total, weight = 0.0, PRIOR_ROUNDS
            at = min(max(m, shortest), longest)  # beyond the lengths observed, the nearest ones speak for it
            for j, s, w in observed:
                k = math.exp(-abs(math.log(j / at)) / KERNEL_WIDTH)
                total += k * s
                weight += k * w
            smooth = total / weight
            own, rounds = self.evidence[m]  # this length's own log ratios, less what the smooth ratio explains
            local = (own - rounds * smooth) / (rounds + LOCAL_PRIOR_ROUNDS)
            costs.append(self.calibrated[m] * math.exp(smooth + local))
        return costs

    def state(self) -> dict:
        return {
            "calibration_total": round(sum(self.calibrated), 6),
            "evidence": [[round(s, 5), round(w, 4)] for s, w in self.evidence],
        }


def speedup_limit(costs: list[float]) -> float:
    """One decode step's time over the best per-token time of a verify pass: the most a perfect copy gains."""
    return costs[1] / min(costs[m] / m for m in range(1, len(costs)))
