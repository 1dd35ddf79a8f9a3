"""Acceptance rules: which drafted tokens the target keeps, without changing what it would have written.

Greedy keeps a draft token while it equals the target's argmax. Sampling is exact (Leviathan et al. 2022;
Chen et al. 2023): a copied draft is a point mass (q(x) = 1), accepted with probability p(x), and on
rejection the target samples from p with x removed; a draft-model token is accepted with probability
min(1, p(x)/q(x)), and on rejection the target samples from normalize(max(0, p - q)).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


class GreedyAcceptance:
    def first_token(self, logits: np.ndarray) -> int:
        return int(np.argmax(logits))

    def verify(self, rows: np.ndarray, draft: Sequence[int], q: np.ndarray | None = None) -> tuple[int, int]:
        best = np.argmax(rows, axis=1)
        n = 0
        while n < len(draft) and best[n] == draft[n]:
            n += 1
        return n, int(best[n])


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
        self.temperature = temperature
        self.top_p = top_p
        self.rng = np.random.default_rng(seed)

    def distribution(self, logits: np.ndarray) -> np.ndarray:
        return target_distribution(logits, self.temperature, self.top_p)

    def _sample(self, p: np.ndarray) -> int:
        return int(self.rng.choice(len(p), p=p))

    def first_token(self, logits: np.ndarray) -> int:
        return self._sample(self.distribution(logits))

    def verify(self, rows: np.ndarray, draft: Sequence[int], q: np.ndarray | None = None) -> tuple[int, int]:
        for i, x in enumerate(draft):
            p = self.distribution(rows[i])
            if q is None:  # a copied token: q is a point mass at x
                if self.rng.random() < p[x]:
                    continue
                residual = p.copy()
                residual[x] = 0.0
            else:
                # u < min(1, p/q), written without dividing (q[x] > 0: the draft model drew x).
                if self.rng.random() * q[i][x] < p[x]:
                    continue
                residual = np.maximum(p - q[i], 0.0)
            total = residual.sum()
            # total is 0 only when rejection had probability 0; fall back to p for numerical safety.
            return i, self._sample(residual / total if total > 0 else p)
        return len(draft), self._sample(self.distribution(rows[len(draft)]))
