"""Adaptive draft length: verify as many drafted tokens as pays for itself, right now.

On a CPU verifying is not free (one pass over 16 tokens costs ~5 plain steps here), so the length comes
from two things: the measured cost of a target pass over m tokens, and the acceptance rate α expected for
this kind of draft (estimated online, per kind, with forgetting). With α per token and k drafted tokens a
pass yields (1 - α^(k+1)) / (1 - α) tokens on average; we pick the k (0 = a plain step) with the most
tokens per second.
"""

from __future__ import annotations

from collections.abc import Sequence

# Prior acceptance per kind of draft, before any evidence: longer matches copy more reliably.
PRIOR_ACCEPTANCE = {
    "match1": 0.3,
    "match2": 0.45,
    "match3": 0.55,
    "match4": 0.65,
    "match8": 0.75,
    "match16": 0.85,
    "match32": 0.9,
    "model": 0.6,
}
PRIOR_WEIGHT = 4.0  # how many tokens of evidence the prior is worth
FORGETTING = 0.9  # per update: recent rounds count most, since acceptance changes near an edit


def expected_tokens(alpha: float, k: int) -> float:
    """Tokens emitted by a pass verifying k drafts, each accepted with probability alpha."""
    if alpha >= 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


class AdaptiveDraftLength:
    def __init__(self, verify_seconds: Sequence[float], draft_step_seconds: float = 0.0):
        """`verify_seconds[m]` is the cost of one target pass over m tokens (index 0 unused)."""
        if len(verify_seconds) < 2:
            raise ValueError("need the cost of at least a one-token pass")
        self.verify_seconds = list(verify_seconds)
        self.draft_step_seconds = draft_step_seconds
        self.successes: dict[str, float] = {}
        self.trials: dict[str, float] = {}

    @property
    def max_length(self) -> int:
        return len(self.verify_seconds) - 2

    def alpha(self, kind: str) -> float:
        prior = PRIOR_ACCEPTANCE.get(kind, 0.5)
        s, t = self.successes.get(kind, 0.0), self.trials.get(kind, 0.0)
        return (s + prior * PRIOR_WEIGHT) / (t + PRIOR_WEIGHT)

    def choose(self, kind: str, available: int) -> int:
        alpha = self.alpha(kind)
        per_draft = self.draft_step_seconds if kind == "model" else 0.0
        best_k, best_rate = 0, 1.0 / self.verify_seconds[1]
        for k in range(1, min(available, self.max_length) + 1):
            rate = expected_tokens(alpha, k) / (self.verify_seconds[k + 1] + k * per_draft)
            if rate > best_rate:
                best_k, best_rate = k, rate
        return best_k

    def update(self, kind: str, n_verified: int, n_accepted: int) -> None:
        # Each draft token up to the first rejection is one trial; a full accept has no failure.
        failures = 1 if n_accepted < n_verified else 0
        self.successes[kind] = self.successes.get(kind, 0.0) * FORGETTING + n_accepted
        self.trials[kind] = self.trials.get(kind, 0.0) * FORGETTING + n_accepted + failures


class FixedDraftLength:
    """Always verify up to k drafted tokens (for comparisons and tests)."""

    def __init__(self, k: int):
        self.k = k

    def choose(self, kind: str, available: int) -> int:
        return min(self.k, available)

    def update(self, kind: str, n_verified: int, n_accepted: int) -> None:
        pass
