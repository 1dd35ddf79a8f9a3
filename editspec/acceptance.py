"""Which token the target writes at each position, and which drafted tokens it keeps.

A drafted token is kept exactly when it is the token the target itself writes there; the first one that is
not is replaced by the target's. So a draft can only save passes, never change the text.

Greedy writes the argmax. Sampling writes argmax(p / E) where p is the target's distribution (temperature,
top-p) and E is vocabulary-sized Exp(1) noise drawn for that output position alone, from (seed, position):
the exponential race (Gumbel-max), which picks token i with probability p_i. Because the noise belongs to the
position and not to the order of random draws, a seed gives the same text whatever was drafted, however long
the drafts were and whichever drafter offered them: it is the text plain sampling writes with that seed. A draft
model samples with the same noise, so it agrees with the target wherever their distributions are close
(a coupling that accepts at least (1 - TV) / (1 + TV) of the time, against 1 - TV for the rejection
sampling of Leviathan et al.; the exact reproducibility is worth the difference).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class GreedyAcceptance:
    temperature = 0.0

    def token(self, logits: np.ndarray, position: int) -> int:
        return int(np.argmax(logits))


def target_distribution(logits: np.ndarray, temperature: float, top_p: float = 1.0) -> np.ndarray:
    """The distribution sampling draws from: softmax(logits / T), cut to the top-p nucleus."""
    z = logits.astype(np.float64) / temperature
    z -= z.max()
    p = np.exp(z)
    p /= p.sum()
    if top_p < 1.0:
        order = np.argsort(-p, kind="stable")
        cumulative = np.cumsum(p[order])
        keep = order[: int(np.searchsorted(cumulative, top_p)) + 1]
        cut = np.zeros_like(p)
        cut[keep] = p[keep]
        p = cut / cut.sum()
    return p


class SamplingAcceptance:
    def __init__(self, temperature: float, top_p: float = 1.0, seed: int | None = None):
        if temperature <= 0:
            raise ValueError("sampling needs a temperature above 0; use greedy decoding for 0")
        if not 0 < top_p <= 1:
            raise ValueError("top_p must be in (0, 1]")
        if seed is not None and seed < 0:
            raise ValueError("the seed must be 0 or more")
        self.temperature = temperature
        self.top_p = top_p
        self.seed = int(np.random.SeedSequence().entropy) if seed is None else seed

    def distribution(self, logits: np.ndarray) -> np.ndarray:
        return target_distribution(logits, self.temperature, self.top_p)

    def noise(self, position: int, size: int) -> np.ndarray:
        """Exp(1) noise of output position `position`: the same for every call with this seed."""
        e = np.random.default_rng([self.seed, position]).standard_exponential(size, dtype=np.float32)
        return np.maximum(e, np.float32(1e-30))

    def token(self, logits: np.ndarray, position: int) -> int:
        p = self.distribution(logits)
        return int(np.argmax(p / self.noise(position, len(p))))


def verify(rule, rows: np.ndarray, draft: Sequence[int], position: int) -> tuple[int, int]:
    """`rows[i]` are the target's logits for output position `position + i`, where `draft[i]` was drafted.
    Returns (how many draft tokens are kept, the target's own token after them)."""
    for i, x in enumerate(draft):
        y = rule.token(rows[i], position + i)
        if y != x:
            return i, y
    return len(draft), rule.token(rows[len(draft)], position + len(draft))
