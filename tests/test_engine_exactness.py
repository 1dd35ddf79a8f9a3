"""Speculative greedy decoding equals plain greedy decoding, for every drafter and draft length."""

import numpy as np
import pytest

from editspec import prompts
from editspec.acceptance import GreedyAcceptance
from editspec.drafters import CombinedDrafter, DraftModelDrafter, PromptLookupDrafter
from editspec.engine import generate
from editspec.policy import AdaptiveDraftLength, FixedDraftLength
from tests.fakes import FakeBackend

VERIFY_COST = [0.0] + [1.0 + 0.25 * (m - 1) for m in range(1, 40)]


def plain(backend, prompt, n):
    """The obviously-correct reference, independent of the engine: argmax of the model's logits after the
    whole history, one token at a time, from a fresh model (no KV cache, no batching)."""
    history, out = list(prompt), []
    while len(out) < n:
        token = int(np.argmax(backend.logits_after(history)))
        out.append(token)
        history.append(token)
        if backend.is_end_of_generation(token):
            break
    return out


def test_the_reference_is_what_the_engine_does_without_a_drafter():
    backend = FakeBackend(seed=4, source=sources()["random"])
    prompt = [1, 2, *sources()["random"]]
    assert plain(backend, prompt, 50) == generate(backend, prompt, GreedyAcceptance(), max_tokens=50).tokens


def sources():
    rng = np.random.default_rng(7)
    random = list(rng.integers(1, 40, size=60))
    return {
        "random": random,
        "empty": [],
        "repeated": [3, 4, 5, 6] * 15,
        "single_token": [9] * 30,
    }


def policies():
    return {
        "fixed1": lambda: FixedDraftLength(1),
        "fixed3": lambda: FixedDraftLength(3),
        "fixed8": lambda: FixedDraftLength(8),
        "fixed32": lambda: FixedDraftLength(32),
        "adaptive": lambda: AdaptiveDraftLength(VERIFY_COST),
    }


@pytest.mark.parametrize("source_name", list(sources()))
@pytest.mark.parametrize("policy_name", list(policies()))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_lookup_greedy_equals_plain(source_name, policy_name, seed):
    source = sources()[source_name]
    prompt = [1, 2, *source]  # the source ends the prompt: copies run into its end
    backend = FakeBackend(seed=seed, source=source)
    expected = plain(backend, prompt, 80)
    result = generate(
        backend,
        prompt,
        GreedyAcceptance(),
        # Token 5 stands for a line break: the adaptive policy then trusts the tokens after it apart.
        drafter=PromptLookupDrafter(has_newline=lambda t: t == 5),
        policy=policies()[policy_name](),
        max_tokens=80,
    )
    assert result.tokens == expected
    assert backend.tokens == (prompt + result.tokens)[: len(backend.tokens)]


def test_a_draft_says_which_of_its_tokens_start_a_line():
    nl = 9
    drafter = PromptLookupDrafter(has_newline=lambda t: t == nl)
    drafter.start([1, 2, nl, 3, 4, nl, 5, 7, 1, 2])
    draft = drafter.propose(5)
    assert draft.tokens == [nl, 3, 4, nl, 5]
    assert draft.line_starts == (False, True, False, False, True)
    assert PromptLookupDrafter().propose(5) is None
    without = PromptLookupDrafter()
    without.start([1, 2, nl, 3, 1, 2])
    assert without.propose(3).line_starts == ()


def test_a_draft_says_when_its_place_is_a_guess():
    """One place in the prompt matching longest is the copy; a tie between places, or a place in the answer
    itself, is a guess (`Draft.weak`), and a copy keeps what its place was until it breaks."""
    unique = PromptLookupDrafter()
    unique.start([5, 6, 7, 8, 9, 1, 6, 7])  # (6, 7) twice, but only one place follows (5, 6, 7)...
    unique.extend([5, 6, 7])
    draft = unique.propose(2)
    assert draft.tokens == [8, 9] and not draft.weak
    tied = PromptLookupDrafter()
    tied.start([1, 6, 7, 8, 2, 6, 7, 9, 3])
    tied.extend([6, 7])  # both (6, 7) match as long: the later is copied, as a guess
    draft = tied.propose(2)
    assert draft.tokens == [9, 3] and draft.weak
    answer = PromptLookupDrafter()
    answer.start([1, 2, 3])
    answer.extend([4, 5, 6, 4, 5])  # (4, 5) occurs only in the answer: copying it is a guess
    draft = answer.propose(1)
    assert draft.tokens == [6] and draft.weak
    answer.extend([6])  # the copy held: same place, still a guess
    assert answer.propose(1).weak


@pytest.mark.parametrize("policy_name", ["fixed1", "fixed8", "adaptive"])
@pytest.mark.parametrize("seed", [0, 3])
def test_draft_model_and_combined_greedy_equal_plain(policy_name, seed):
    source = sources()["random"]
    prompt = [1, 2, *source]
    target = FakeBackend(seed=seed, source=source)
    expected = plain(target, prompt, 60)
    for combined in (False, True):
        policy = policies()[policy_name]()
        # A draft model that agrees with the target often but not always: same table, weaker copy bias.
        draft_backend = FakeBackend(seed=seed, source=source, copy_bias=1.0)
        model = DraftModelDrafter(draft_backend, policy, min_probability=0.0)
        drafter = CombinedDrafter(PromptLookupDrafter(), model, policy) if combined else model
        result = generate(target, prompt, GreedyAcceptance(), drafter=drafter, policy=policy, max_tokens=60)
        assert result.tokens == expected, f"combined={combined}"
        assert result.stats.drafted_tokens > 0


@pytest.mark.parametrize("source_name", ["random", "repeated", "single_token"])
@pytest.mark.parametrize("opening", [1, 4, 16, 100])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_opening_copy_greedy_equals_plain(source_name, opening, seed):
    """The prompt ends with an anchor that occurred before the source (as an edit prompt ends with the code
    fence), so a copy of the source is verified within the prefill; the output must not change."""
    source = sources()[source_name]
    anchor = [31, 32, 33]
    prompt = [1, 2, *anchor, *source, 9, *anchor]
    backend = FakeBackend(seed=seed, source=source)
    expected = plain(backend, prompt, 60)
    result = generate(
        backend,
        prompt,
        GreedyAcceptance(),
        drafter=PromptLookupDrafter(),
        policy=AdaptiveDraftLength(VERIFY_COST),
        max_tokens=60,
        opening_draft=opening,
    )
    assert result.tokens == expected
    s = result.stats
    first = s.rounds[0]
    assert first.opening and first.drafted == prompt[5:][: min(opening, 59)]  # the source, and on
    assert s.prefill_output_tokens == first.accepted + 1
    assert s.target_passes == len(s.rounds)  # the opening shares the prefill's pass
    assert backend.tokens == (prompt + result.tokens)[: len(backend.tokens)]


def test_opening_copy_saves_rounds_and_needs_an_anchor():
    source = [int(t) for t in np.random.default_rng(1).permutation(np.arange(3, 30))]  # no repeats: one way to copy
    anchored = [1, 2, 31, 32, 33, *source, 9, 31, 32, 33]
    backend = FakeBackend(seed=0, source=anchored[2:-4], copy_bias=50.0)  # the target copies the source
    options = dict(drafter=PromptLookupDrafter(), policy=FixedDraftLength(4), max_tokens=30)
    without = generate(backend, anchored, GreedyAcceptance(), **options)
    options["drafter"] = PromptLookupDrafter()
    with_opening = generate(backend, anchored, GreedyAcceptance(), opening_draft=16, **options)
    assert with_opening.tokens == without.tokens
    assert with_opening.stats.prefill_output_tokens == 17
    assert with_opening.stats.target_passes < without.stats.target_passes
    # A one-token coincidence at the prompt's end is no anchor: nothing is drafted into the prefill.
    unanchored = [1, 2, *source, 9, 33]
    result = generate(backend, unanchored, GreedyAcceptance(), opening_draft=16, **options)
    assert not any(r.opening for r in result.stats.rounds)
    assert result.stats.prefill_output_tokens == 1


def test_speculation_saves_passes_when_copying():
    source = list(np.random.default_rng(1).integers(1, 40, size=80))
    prompt = [1, 2, *source, 1, 2]
    backend = FakeBackend(seed=0, source=source, copy_bias=50.0)  # the target copies the source
    result = generate(
        backend,
        prompt,
        GreedyAcceptance(),
        drafter=PromptLookupDrafter(),
        policy=AdaptiveDraftLength(VERIFY_COST),
        max_tokens=60,
    )
    assert result.stats.tokens_per_pass > 3
    assert result.stats.acceptance_rate > 0.8


def test_statistics_add_up():
    source = sources()["random"]
    backend = FakeBackend(seed=4, source=source)
    result = generate(
        backend,
        [1, *source],
        GreedyAcceptance(),
        drafter=PromptLookupDrafter(),
        policy=FixedDraftLength(4),
        max_tokens=50,
    )
    s = result.stats
    assert s.generated_tokens == len(result.tokens) == 50
    assert s.target_passes == len([r for r in s.rounds if not r.opening]) + 1
    assert s.drafted_tokens == sum(len(r.drafted) for r in s.rounds)
    assert s.accepted_tokens == sum(r.accepted for r in s.rounds)
    assert all(0 <= r.accepted <= len(r.drafted) for r in s.rounds)
    # Every round emits its accepted drafts plus the target's own token (the last may be cut by the cap).
    assert sum(r.accepted + 1 for r in s.rounds) >= s.generated_tokens - s.prefill_output_tokens
    for r in s.rounds:
        if r.origin == "lookup":
            copied = ([1, *source] + result.tokens)[r.copied_from : r.copied_from + len(r.drafted)]
            assert copied == r.drafted


def test_stop_condition_end_token_and_cancel():
    source = sources()["random"]
    prompt = [1, *source]
    backend = FakeBackend(seed=5, source=source)
    full = plain(backend, prompt, 40)
    stop_at = full[10]
    first = full.index(stop_at)
    result = generate(
        backend,
        prompt,
        GreedyAcceptance(),
        drafter=PromptLookupDrafter(),
        policy=FixedDraftLength(8),
        max_tokens=40,
        stop=lambda out: out[-1] == stop_at,
    )
    assert result.tokens == full[: first + 1]
    assert result.stats.stop_reason == "stop"

    ended = FakeBackend(seed=5, source=source, end_token=stop_at)
    result = generate(
        ended,
        prompt,
        GreedyAcceptance(),
        drafter=PromptLookupDrafter(),
        policy=FixedDraftLength(8),
        max_tokens=40,
    )
    assert result.tokens == full[:first]
    assert result.stats.stop_reason == "end_of_generation"

    seen = []
    result = generate(
        backend,
        prompt,
        GreedyAcceptance(),
        drafter=PromptLookupDrafter(),
        policy=FixedDraftLength(8),
        max_tokens=40,
        on_tokens=lambda toks, rnd: seen.extend(toks) or len(seen) >= 5,
    )
    assert result.stats.stop_reason == "cancelled"
    assert seen == result.tokens and 5 <= len(seen) < 40


def test_empty_prompt_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        generate(FakeBackend(), [], GreedyAcceptance())


class StopAt:
    """Stops at `token`; knows how much of a draft comes before it (as the code-fence stop does)."""

    def __init__(self, token):
        self.token = token

    def __call__(self, out):
        return out[-1] == self.token

    def tokens_before_stop(self, tokens):
        return tokens.index(self.token) if self.token in tokens else len(tokens)


def test_drafts_are_not_verified_past_the_stop():
    source = sources()["random"]
    prompt = [1, *source, *source[:6]]  # the output copies the source again: drafts run on past the stop
    backend = FakeBackend(seed=5, source=source, copy_bias=6.0)
    full = plain(backend, prompt, 40)
    stop_at = full[12]
    expected = full[: full.index(stop_at) + 1]

    def run(stop):
        rounds = []
        result = generate(
            backend,
            prompt,
            GreedyAcceptance(),
            drafter=PromptLookupDrafter(),
            policy=FixedDraftLength(16),
            max_tokens=40,
            opening_draft=16,
            stop=stop,
            on_tokens=lambda toks, rnd: rounds.append(rnd) and None,
        )
        assert result.tokens == expected and result.stats.stop_reason == "stop"
        return [r for r in rounds if r is not None]

    unaware = run(lambda out: out[-1] == stop_at)
    assert any(stop_at in r.drafted for r in unaware), "no draft reached the stop: the test proves nothing"
    aware = run(StopAt(stop_at))
    assert not any(stop_at in r.drafted for r in aware)
    assert sum(len(r.drafted) for r in aware) < sum(len(r.drafted) for r in unaware)


class Pieces:
    def __init__(self, pieces):
        self.pieces = pieces

    def token_bytes(self, token):
        return self.pieces[token].encode()


def test_the_fence_stop_cuts_a_draft_before_the_token_that_closes_the_fence():
    backend = Pieces({0: "x", 1: "\n", 2: "``", 3: "`", 4: "```", 5: "`\n", 6: "y"})
    stop = prompts.FenceStop(backend)
    assert stop.tokens_before_stop([0, 1, 6]) == 3
    assert stop.tokens_before_stop([0, 1, 4, 1, 6]) == 2  # the fence in one token
    assert stop.tokens_before_stop([0, 1, 2, 3, 6]) == 3  # the fence split over two tokens
    assert stop.tokens_before_stop([2, 3, 6]) == 1  # the answer's start is a line's start
    assert stop.tokens_before_stop([0, 2, 3, 6]) == 4  # inside a line three backticks are code (a doc's example)
    assert stop.tokens_before_stop([0, 1, 6, 2, 3, 1]) == 6
    assert not stop([0]) and not stop([0, 1]) and not stop([0, 1, 2])  # the output now ends in "``"
    assert stop.tokens_before_stop([5, 6]) == 0
    assert stop.tokens_before_stop([6, 3]) == 2
    assert stop.tokens_before_stop([]) == 0


def test_every_request_starts_the_policy_afresh():
    """generate tells the policy a request begins (its own record of this request's copies), once per call."""
    starts = []

    class Counting(FixedDraftLength):
        def start(self):
            starts.append(len(starts))

    source = sources()["repeated"]
    backend = FakeBackend(seed=0, source=source)
    policy = Counting(4)
    for _ in range(2):
        generate(
            backend, [1, 2, *source], GreedyAcceptance(), drafter=PromptLookupDrafter(), policy=policy, max_tokens=8
        )
    assert starts == [0, 1]


def test_the_policy_is_told_every_pass_and_what_it_wrote():
    """Its ledger against plain decoding: each round (the opening's included) reported once, as the pass's
    tokens (the pending token and the draft; the opening's drafted tokens) and the tokens it wrote."""
    passes = []

    class Recording(FixedDraftLength):
        def passed(self, tokens, emitted):
            passes.append((tokens, emitted))

    source = sources()["repeated"]
    backend = FakeBackend(seed=0, source=source)
    prompt = [1, 2, *source]
    g = generate(
        backend,
        prompt,
        GreedyAcceptance(),
        drafter=PromptLookupDrafter(),
        policy=Recording(4),
        opening_draft=8,
        max_tokens=40,
    )
    rounds = g.stats.rounds
    assert rounds[0].opening and rounds[0].drafted and any(r.drafted for r in rounds[1:])
    assert passes == [(len(r.drafted) + (0 if r.opening else 1), r.accepted + 1) for r in rounds]
    assert len(passes) == g.stats.target_passes and sum(e for _, e in passes) >= len(g.tokens)
