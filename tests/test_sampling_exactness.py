"""Speculative sampling emits tokens distributed exactly as the target's, and the test can tell if not."""

import itertools
import math
from collections import Counter

import numpy as np
import pytest

from editspec.acceptance import SamplingAcceptance, target_distribution, verify
from editspec.drafters import CombinedDrafter, DraftModelDrafter, PromptLookupDrafter
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


def keeps_likely_drafts(rule, rows, draft, position):
    """Broken: keeps a drafted token whenever the target finds it likely enough, not only when it is the
    target's own token."""
    if draft and rule.distribution(rows[0])[draft[0]] > 0.15:
        return 1, rule.token(rows[1], position + 1)
    return verify(rule, rows, draft, position)


class UniformNoise(SamplingAcceptance):
    """Broken: the race run on uniform noise instead of exponential."""

    def noise(self, position, size):
        return np.random.default_rng([self.seed, position]).random(size) + 1e-12


class SameNoiseEveryPosition(SamplingAcceptance):
    """Broken: every position races on the same noise, so a sequence's tokens are not drawn independently
    (each position alone is still exact)."""

    def noise(self, position, size):
        return super().noise(0, size)


def first_emitted(check, rule, rows, x, position):
    n, nxt = check(rule, rows, [x], position)
    return x if n == 1 else nxt


def run_copied(rule_cls=SamplingAcceptance, check=verify, n=30000):
    rule = rule_cls(TEMPERATURE, TOP_P, seed=11)
    x = 4  # a plausible but not the likeliest token
    return Counter(first_emitted(check, rule, LOGITS, x, i) for i in range(n))


DRAFT_LOGITS = np.array([0.5, 2.5, 0.0, 1.0, -1.0, 0.5])


def run_model_drafts(rule_cls=SamplingAcceptance, check=verify, n=30000):
    """The draft model chooses as the drafter does: the same rule, on its own logits."""
    rule = rule_cls(TEMPERATURE, TOP_P, seed=12)
    return Counter(first_emitted(check, rule, LOGITS, rule.token(DRAFT_LOGITS, i), i) for i in range(n))


def expected_first():
    p = reference_distribution(LOGITS[0], TEMPERATURE, TOP_P)
    return {i: float(p[i]) for i in range(6) if p[i] > 0}


def test_each_position_samples_the_target_distribution():
    rule = SamplingAcceptance(TEMPERATURE, TOP_P, seed=10)
    counts = Counter(rule.token(LOGITS[0], i) for i in range(30000))
    assert chi_square_p_value(counts, expected_first(), 30000) > 1e-3


def test_copied_drafts_are_exact():
    assert chi_square_p_value(run_copied(), expected_first(), 30000) > 1e-3


def test_draft_model_drafts_are_exact_and_mostly_kept():
    assert chi_square_p_value(run_model_drafts(), expected_first(), 30000) > 1e-3
    rule = SamplingAcceptance(TEMPERATURE, TOP_P, seed=12)
    kept = sum(verify(rule, LOGITS, [rule.token(DRAFT_LOGITS, i)], i)[0] for i in range(5000)) / 5000
    p, q = rule.distribution(LOGITS[0]), rule.distribution(DRAFT_LOGITS)
    tv = 0.5 * np.abs(p - q).sum()
    # The race's coupling keeps at least (1 - TV) / (1 + TV); never more than 1 - TV.
    assert (1 - tv) / (1 + tv) - 0.02 < kept < 1 - tv + 0.02


@pytest.mark.parametrize(
    "broken,runner",
    [
        (dict(check=keeps_likely_drafts), run_copied),
        (dict(check=keeps_likely_drafts), run_model_drafts),
        (dict(rule_cls=UniformNoise), run_copied),
    ],
)
def test_a_broken_rule_is_caught(broken, runner):
    assert chi_square_p_value(runner(**broken), expected_first(), 30000) < 1e-6


def joint_counts(rule_cls, prompt, backend, opening, n):
    counts, drafted, openings = Counter(), 0, 0
    for i in range(n):
        result = generate(
            backend,
            prompt,
            rule_cls(TEMPERATURE, TOP_P, seed=i),
            drafter=PromptLookupDrafter(),
            policy=FixedDraftLength(2),
            max_tokens=3,
            opening_draft=opening,
        )
        counts[tuple(result.tokens)] += 1
        drafted += result.stats.drafted_tokens
        openings += bool(result.stats.rounds and result.stats.rounds[0].opening)
    return counts, drafted, openings


def joint_distribution(backend, prompt, vocab):
    expected = {}
    for seq in itertools.product(range(vocab), repeat=3):
        prob, history = 1.0, list(prompt)
        for tok in seq:
            prob *= reference_distribution(backend.logits_after(history), TEMPERATURE, TOP_P)[tok]
            history.append(tok)
        if prob > 0:
            expected[seq] = prob
    return expected


@pytest.mark.parametrize("opening", [0, 2])
def test_engine_sequences_follow_the_target(opening):
    """Three-token outputs of the whole speculative loop against the exact joint distribution; with
    `opening`, the prompt's tail [1, 2, 3] anchors a copy that is verified within the prefill."""
    vocab, source = 5, [1, 2, 3, 4, 1, 2, 4, 3]
    prompt = [0, *source, 1, 2, 3] if opening else [0, *source, 1]
    backend = FakeBackend(vocab=vocab, seed=3, source=source, copy_bias=2.0)
    expected = joint_distribution(backend, prompt, vocab)
    n = 20000
    counts, drafted, openings = joint_counts(SamplingAcceptance, prompt, backend, opening, n)
    assert drafted > n  # the drafts really were verified, not skipped
    assert openings == (n if opening else 0)
    assert chi_square_p_value(counts, expected, n) > 1e-3
    broken, _, _ = joint_counts(SameNoiseEveryPosition, prompt, backend, opening, n)
    assert chi_square_p_value(broken, expected, n) < 1e-6


@pytest.mark.parametrize("seed", [0, 7])
def test_a_seed_writes_what_plain_sampling_writes_whatever_is_drafted(seed):
    """The same seed gives the same text with no drafts, with copied drafts of any length, with a draft
    model and with both: speculation changes nothing a user can see, sampling included."""
    source = [int(t) for t in np.random.default_rng(seed).integers(3, 40, size=50)]
    prompt = [1, 2, *source]
    target = FakeBackend(vocab=48, seed=seed, source=source, copy_bias=3.0)

    def sample(drafter=None, policy=None):
        rule = SamplingAcceptance(TEMPERATURE, TOP_P, seed=seed)
        return generate(target, prompt, rule, drafter=drafter, policy=policy, max_tokens=60)

    plain = sample().tokens
    outputs, drafted = {}, 0
    for length in (1, 3, 8):
        policy = FixedDraftLength(length)
        draft_model = DraftModelDrafter(
            FakeBackend(vocab=48, seed=seed, source=source, copy_bias=1.5),
            policy,
            SamplingAcceptance(TEMPERATURE, TOP_P, seed=seed),
        )
        for name, drafter in {
            "lookup": PromptLookupDrafter(),
            "model": draft_model,
            "both": CombinedDrafter(PromptLookupDrafter(), draft_model, policy),
        }.items():
            result = sample(drafter, policy)
            outputs[name, length] = result.tokens
            drafted += result.stats.accepted_tokens
    assert all(tokens == plain for tokens in outputs.values()), [k for k, t in outputs.items() if t != plain]
    assert drafted > 100  # drafts were kept, not only tried
    assert sample().tokens == plain
    other = generate(target, prompt, SamplingAcceptance(TEMPERATURE, TOP_P, seed=seed + 1), max_tokens=60).tokens
    assert other != plain, "the seed changes nothing: is it used?"
