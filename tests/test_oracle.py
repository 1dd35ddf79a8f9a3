"""The oracle replay: the best draft lengths for a finished generation, by the machine's verify costs."""

import itertools

import numpy as np
import pytest

from editspec.acceptance import GreedyAcceptance
from editspec.drafters import PromptLookupDrafter
from editspec.engine import generate
from editspec.oracle import best_seconds, drafts, foresight_seconds, live_model_seconds, replay
from editspec.policy import AdaptiveDraftLength, FixedDraftLength
from tests.fakes import FakeBackend

CPU_LIKE = [0.0, 1.0, 1.6, 2.0, 2.3, 2.6, 2.9, 3.2, 3.5, 3.8]  # a pass over 9 tokens costs 3.8 steps


def brute_force(agreement, costs, lengths=None):
    """Every way of cutting the positions into passes, each pass no longer than what the drafts allow; a pass that
    ends where its draft breaks verifying any length of that draft from there on."""
    n, best = len(agreement), float("inf")
    for cuts in itertools.product([0, 1], repeat=n - 1):
        i, total, ok = 0, 0.0, True
        bounds = [j + 1 for j, c in enumerate(cuts) if c] + [n]
        for end in bounds:
            k = end - i - 1  # drafted tokens in the pass from i to end
            if k > min(agreement[i], len(costs) - 2):
                ok = False
                break
            longest = min(lengths[i], len(costs) - 2) if lengths is not None and k == agreement[i] else k
            total += min(costs[j + 1] for j in range(k, max(k, longest) + 1))
            i = end
        if ok:
            best = min(best, total)
    return best


@pytest.mark.parametrize("seed", range(20))
def test_best_seconds_is_the_shortest_path(seed):
    rng = np.random.default_rng(seed)
    agreement = [int(a) for a in rng.integers(0, 6, size=10)]
    assert best_seconds(agreement, CPU_LIKE) == pytest.approx(brute_force(agreement, CPU_LIKE))


# Where kernels tile, a longer pass can cost less: here a pass over 6 tokens costs less than one over 4 or 5.
DIPPED = [0.0, 1.0, 1.6, 2.0, 2.6, 3.0, 2.4, 3.2, 3.5, 3.8]


@pytest.mark.parametrize("seed", range(20))
def test_a_pass_may_verify_past_the_break_where_a_longer_pass_costs_less(seed):
    rng = np.random.default_rng(seed)
    agreement = [int(a) for a in rng.integers(0, 6, size=10)]
    lengths = [a + int(x) for a, x in zip(agreement, rng.integers(0, 4, size=10), strict=True)]
    with_lengths = best_seconds(agreement, DIPPED, lengths)
    assert with_lengths == pytest.approx(brute_force(agreement, DIPPED, lengths))
    assert with_lengths <= best_seconds(agreement, DIPPED) + 1e-12
    assert best_seconds(agreement, CPU_LIKE, lengths) == pytest.approx(best_seconds(agreement, CPU_LIKE))


def test_the_dip_pays_only_for_a_draft_long_enough_to_reach_it():
    # Four drafted tokens hold, the fifth breaks: verifying all 5 (a pass over 6 tokens) makes the same 5 tokens
    # for 2.4 instead of 3.0, when the draft has 5 tokens to verify; then one plain step.
    assert best_seconds([4, 0, 0, 0, 0, 0], DIPPED, [5, 0, 0, 0, 0, 0]) == pytest.approx(2.4 + 1.0)
    assert best_seconds([4, 0, 0, 0, 0, 0], DIPPED, [4, 0, 0, 0, 0, 0]) == pytest.approx(3.0 + 1.0)


def test_linear_costs_gain_nothing_and_free_passes_gain_the_draft_length():
    agreement = [8] * 20
    linear = [float(m) for m in range(10)]
    assert best_seconds(agreement, linear) == pytest.approx(20.0)
    free = [0.0] + [1.0] * 9  # any pass costs one step: passes of 9 tokens
    assert best_seconds(agreement, free) == pytest.approx(3.0)  # 9 + 9 + 2
    assert best_seconds([0] * 20, free) == pytest.approx(20.0)  # nothing to copy: plain


def test_agreement_of_a_pure_copy_and_of_a_changed_token():
    source = list(range(10, 30))
    prompt = [1, 2, *source, 3, 1, 2]  # the prompt ends where the copy starts
    agreement, lengths = drafts(prompt, source, 0, 8)
    # At each position the draft copies the rest of the source, up to 8 tokens (the last token is the target's).
    assert agreement == [min(8, len(source) - i - 1) for i in range(len(source))]
    assert lengths == [8] * len(source)  # the drafts run on past the source, into what follows it in the prompt
    changed = [*source[:5], 99, *source[6:]]
    agreement, lengths = drafts(prompt, changed, 0, 8)
    assert agreement[0] == 5 and lengths[0] == 8 and agreement[5] == 0  # the copy stops before the change
    assert agreement[8] > 0  # and is found again after it


@pytest.mark.parametrize("policy", [FixedDraftLength(1), FixedDraftLength(4), AdaptiveDraftLength(CPU_LIKE)])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_the_oracle_is_never_worse_than_the_live_run(policy, seed):
    """The live run's passes are one path through the same drafts: the oracle is at least as fast. So are the
    same passes stopped where each copy broke, and they are no slower than the live run."""
    rng = np.random.default_rng(seed)
    source = [int(t) for t in rng.integers(1, 40, size=60)]
    prompt = [1, 2, *source]
    backend = FakeBackend(seed=seed, source=source)
    g = generate(backend, prompt, GreedyAcceptance(), drafter=PromptLookupDrafter(), policy=policy, max_tokens=80)
    r = replay(prompt, g.tokens, g.stats.prefill_output_tokens, CPU_LIKE)
    live = live_model_seconds([len(x.drafted) for x in g.stats.rounds if not x.opening], CPU_LIKE)
    assert r.decoded == len(g.tokens) - g.stats.prefill_output_tokens
    assert r.oracle_seconds <= live + 1e-9
    assert 1.0 <= r.speedup
    rounds = [x for x in g.stats.rounds if not x.opening]
    foresight = foresight_seconds([(len(x.drafted), x.accepted) for x in rounds], CPU_LIKE)
    assert r.oracle_seconds <= foresight + 1e-9 <= live + 2e-9
    assert (foresight < live) == any(x.accepted < len(x.drafted) for x in rounds)


def test_foresight_charges_only_the_drafts_that_held():
    """A pass that verified 6 drafts of which 2 held costs a pass over 3 tokens with foresight; one whose drafts all
    held costs what it cost; an opening whose first token was not the answer's (-1) costs nothing."""
    assert foresight_seconds([(6, 2)], CPU_LIKE) == CPU_LIKE[3]
    assert foresight_seconds([(6, 6), (0, 0)], CPU_LIKE) == CPU_LIKE[7] + CPU_LIKE[1]
    assert foresight_seconds([(15, -1), (3, 0)], CPU_LIKE) == CPU_LIKE[1]
    # Knowing where it breaks, a pass stops at the cheapest length from there to where the live run stopped it.
    assert foresight_seconds([(5, 3)], DIPPED) == DIPPED[6]
    assert foresight_seconds([(4, 3)], DIPPED) == DIPPED[4]
