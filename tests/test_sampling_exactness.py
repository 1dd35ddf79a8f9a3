"""Speculative sampling emits tokens distributed exactly as the target's, and the test can tell if not."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from editspec.acceptance import SamplingAcceptance, target_distribution
from editspec.drafters import PromptLookupDrafter
from editspec.engine import generate
from editspec.policy import FixedDraftLength
from tests.fakes import FakeBackend

TEMPERATURE, TOP_P = 0.9, 0.95
LOGITS = np.array([[2.0, 1.5, 0.3, -0.5, 1.0, -2.0], [0.1, 0.2, 1.7, -1.0, 0.4, 0.0]])


def reference_distribution(logits, temperature: float, top_p: float = 1.0) -> np.ndarray:
    """Written out plainly, apart from the product's: softmax(logits / T), then the smallest set of most
    likely tokens whose mass reaches top_p, renormalised."""
    top = max(logits)
    weights = [math.exp((x - top) / temperature) for x in logits]
    probs = [w / sum(weights) for w in weights]
    kept, mass = [], 0.0
    for i in sorted(range(len(probs)), key=lambda i: (-probs[i], i)):
        kept.append(i)
        mass += probs[i]
        if mass >= top_p:
            break
    norm = sum(probs[i] for i in kept)
    return np.array([probs[i] / norm if i in kept else 0.0 for i in range(len(probs))])


def test_the_product_s_distribution_is_the_reference():
    rng = np.random.default_rng(11)
    for _ in range(200):
        logits = rng.normal(scale=2.0, size=int(rng.integers(2, 30)))
        t, top_p = float(rng.uniform(0.2, 2.0)), float(rng.choice([1.0, 0.95, 0.7, 0.3]))
        np.testing.assert_allclose(target_distribution(logits, t, top_p), reference_distribution(logits, t, top_p))


def chi_square_p_value(observed: Counter, expected_probs: dict, n: int) -> float:
    """Pearson's test, cells with fewer than 5 expected pooled; Wilson-Hilferty for the tail."""
    stat, pooled_obs, pooled_exp, cells = 0.0, 0, 0.0, 0
    for key, prob in expected_probs.items():
        e = prob * n
        if e < 5:
            pooled_obs, pooled_exp = pooled_obs + observed.get(key, 0), pooled_exp + e
            continue
        stat += (observed.get(key, 0) - e) ** 2 / e
        cells += 1
    if pooled_exp > 0:
        stat += (pooled_obs - pooled_exp) ** 2 / pooled_exp
        cells += 1
    outside = n - sum(observed.get(k, 0) for k in expected_probs)
    if outside:
        return 0.0  # emitted something the target never could
    k = cells - 1
    z = ((stat / k) ** (1 / 3) - (1 - 2 / (9 * k))) / math.sqrt(2 / (9 * k))
    return 0.5 * math.erfc(z / math.sqrt(2))


class PointMassWithoutRemoval(SamplingAcceptance):
    """Broken: on rejecting a copied token, resample from p without removing it."""

    def verify(self, rows, draft, q=None):
        p = self.distribution(rows[0])
        if self.rng.random() < p[draft[0]]:
            return 1, self._sample(self.distribution(rows[1]))
        return 0, self._sample(p)


class ResampleFromTargetOnRejection(SamplingAcceptance):
    """Broken: accepts a draft-model token with min(1, p/q) but on rejection samples from p, not from the
    residual max(0, p - q). (Treating the token as copied would still be exact, just slower.)"""

    def verify(self, rows, draft, q=None):
        p = self.distribution(rows[0])
        if self.rng.random() * q[0][draft[0]] < p[draft[0]]:
            return 1, self._sample(self.distribution(rows[1]))
        return 0, self._sample(p)


def first_emitted(rule, rows, x, q):
    n, nxt = rule.verify(rows, [x], q)
    return x if n == 1 else nxt


def run_copied(rule_cls, n=30000):
    rule = rule_cls(TEMPERATURE, TOP_P, seed=11)
    x = 4  # a plausible but not the likeliest token
    return Counter(first_emitted(rule, LOGITS, x, None) for _ in range(n))


def run_model_drafts(rule_cls, n=30000):
    rule = rule_cls(TEMPERATURE, TOP_P, seed=12)
    draw = np.random.default_rng(13)
    q = reference_distribution(np.array([0.5, 2.5, 0.0, 1.0, -1.0, 0.5]), 1.0)
    return Counter(first_emitted(rule, LOGITS, int(draw.choice(6, p=q)), q[None]) for _ in range(n))


def expected_first():
    p = reference_distribution(LOGITS[0], TEMPERATURE, TOP_P)
    return {i: float(p[i]) for i in range(6) if p[i] > 0}


def test_copied_drafts_are_exact():
    assert chi_square_p_value(run_copied(SamplingAcceptance), expected_first(), 30000) > 1e-3


def test_draft_model_drafts_are_exact():
    assert chi_square_p_value(run_model_drafts(SamplingAcceptance), expected_first(), 30000) > 1e-3


@pytest.mark.parametrize(
    "broken,runner",
    [(PointMassWithoutRemoval, run_copied), (ResampleFromTargetOnRejection, run_model_drafts)],
)
def test_a_broken_rule_is_caught(broken, runner):
    assert chi_square_p_value(runner(broken), expected_first(), 30000) < 1e-6


@pytest.mark.parametrize("opening", [0, 2])
def test_engine_sequences_follow_the_target(opening):
    """Three-token outputs of the whole speculative loop against the exact joint distribution; with
    `opening`, the prompt's tail [1, 2, 3] anchors a copy that is verified within the prefill."""
    vocab, source = 5, [1, 2, 3, 4, 1, 2, 4, 3]
    prompt = [0, *source, 1, 2, 3] if opening else [0, *source, 1]
    backend = FakeBackend(vocab=vocab, seed=3, source=source, copy_bias=2.0)
    expected = {}
    for seq in itertools.product(range(vocab), repeat=3):
        prob, history = 1.0, list(prompt)
        for tok in seq:
            prob *= reference_distribution(backend.logits_after(history), TEMPERATURE, TOP_P)[tok]
            history.append(tok)
        if prob > 0:
            expected[seq] = prob
    n, counts, drafted, openings = 20000, Counter(), 0, 0
    rule = SamplingAcceptance(TEMPERATURE, TOP_P, seed=5)
    for _ in range(n):
        result = generate(
            backend,
            prompt,
            rule,
            drafter=PromptLookupDrafter(),
            policy=FixedDraftLength(2),
            max_tokens=3,
            opening_draft=opening,
        )
        counts[tuple(result.tokens)] += 1
        drafted += result.stats.drafted_tokens
        openings += bool(result.stats.rounds and result.stats.rounds[0].opening)
    assert drafted > n  # the drafts really were verified, not skipped
    assert openings == (n if opening else 0)
    assert chi_square_p_value(counts, expected, n) > 1e-3
