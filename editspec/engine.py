"""The speculative decoding loop: a pure function over a backend, a drafter and an acceptance rule.

Nothing here prints or touches files. Text streams out through `on_tokens`; statistics come back in the
result. The CLI, the language server and the benchmark all call `generate`.

Cache invariant: the backend's KV cache always holds `prompt + output[:-1]`; the last emitted token is
"pending" and is evaluated at the head of the next round, followed by the draft. One `evaluate` per round
verifies the whole draft and yields the next token for free.

The opening: an edit usually starts by copying the code's first line, and the prompt ends where that copy
begins. So the drafter's opening copy is read in the same batch as the prompt: in a batch of hundreds of
tokens a few more cost little, and the first line is out when the prefill is, without a round of its own.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from .acceptance import verify


class Backend(Protocol):
    """A target model: a KV cache that grows by `evaluate` and shrinks by `truncate`."""

    n_vocab: int

    def prefill(self, tokens: Sequence[int], draft: Sequence[int] = ()) -> np.ndarray:
        """Make the cache hold exactly `tokens + draft`; return the logits after the last of `tokens` and
        after each draft token, shape (1 + len(draft), n_vocab)."""

    def evaluate(self, tokens: Sequence[int]) -> np.ndarray:
        """Append `tokens` to the cache; return logits after each of them, shape (len(tokens), n_vocab)."""

    def truncate(self, n_tokens: int) -> None:
        """Drop everything after the first `n_tokens` cached tokens."""

    def is_end_of_generation(self, token: int) -> bool: ...


@dataclass
class Draft:
    """Tokens proposed for the target to verify, and where they came from."""

    tokens: list[int]
    origin: str  # "lookup" (copied) or "model" (draft model)
    run: int = 0  # how many tokens before the draft already matched where it was copied from
    copied_from: int | None = None  # index into the history (prompt + output) of the first copied token
    line_starts: tuple[bool, ...] = ()  # per token: it starts a line (empty: not known)
    # The copy's place is a guess: one of several equally long matches, or in the answer itself (a pattern the
    # answer repeats) rather than in the prompt's code. Such copies break far more often after a short match.
    weak: bool = False


class Drafter(Protocol):
    def start(self, prompt: Sequence[int]) -> None:
        """Begin a request whose history starts with `prompt`."""

    def extend(self, tokens: Sequence[int]) -> None:
        """The history grew by these emitted tokens."""

    def propose(self, max_tokens: int) -> Draft | None:
        """The longest useful draft (the policy shortens it), or None."""

    def opening(self, max_tokens: int) -> Draft | None:
        """After `start`: a confident copy to verify together with the prompt, or None."""


class DraftLengthPolicy(Protocol):
    def start(self) -> None:
        """A new request begins."""

    def choose(self, kind: str, run: int, available: int, line_starts: Sequence[bool] = (), weak: bool = False) -> int:
        """How many of `available` drafted tokens to verify (0 = a plain decoding step)."""

    def update(
        self,
        kind: str,
        run: int,
        n_verified: int,
        n_accepted: int,
        line_starts: Sequence[bool] = (),
        weak: bool = False,
    ) -> None: ...

    def passed(self, tokens: int, emitted: int) -> None:
        """A target pass over `tokens` tokens wrote `emitted` tokens (every pass: the opening, plain steps)."""


class AcceptanceRule(Protocol):
    def token(self, logits: np.ndarray, position: int) -> int:
        """The token the target writes at output position `position`, given its logits there."""


@dataclass
class Round:
    """One target pass: what was drafted, how much of it survived, and what the target said instead."""

    drafted: list[int]
    accepted: int
    origin: str | None
    copied_from: int | None
    next_token: int  # the target's own token: the correction at the first mismatch, or the bonus
    seconds: float
    opening: bool = False  # verified within the prefill (its seconds are the prefill's)
    scores: list[Score] | None = None  # with generate(scores=True): of the tokens this round emitted


# A request's plain steps (passes that verified no draft) stand for plain decoding's step once there are this many.
PLAIN_STEPS_TO_MEASURE = 5


def median_step(steps: Sequence[float]) -> float | None:
    """The median of plain steps' seconds (None: fewer than PLAIN_STEPS_TO_MEASURE of them)."""
    return statistics.median(steps) if len(steps) >= PLAIN_STEPS_TO_MEASURE else None


def plain_steps(rounds: Sequence[Round]) -> list[float]:
    """The seconds of the decoding passes that verified no draft: one plain step each."""
    return [r.seconds for r in rounds if not r.opening and not r.drafted]


def median_step_seconds(rounds: Sequence[Round]) -> float | None:
    """The median seconds of a request's plain steps (None: too few)."""
    return median_step(plain_steps(rounds))


@dataclass
class Stats:
    prompt_tokens: int = 0
    reused_prompt_tokens: int = 0  # read from a kept KV cache instead of the model
    generated_tokens: int = 0
    prefill_output_tokens: int = 0  # the first token, plus the opening copy accepted within the prefill
    target_passes: int = 0
    drafted_tokens: int = 0
    accepted_tokens: int = 0
    prefill_seconds: float = 0.0
    decode_seconds: float = 0.0
    stop_reason: str = ""
    rounds: list[Round] = field(default_factory=list)
    # The verify costs the drafts were planned with (set by the Decoder; what its learning makes of them after
    # the request is the next request's): a statistic of this request charges its passes these.
    verify_seconds: list[float] | None = None

    @property
    def opening_drafted(self) -> int:
        """Tokens of the opening copy verified within the prefill (0: none). Its round is the first one."""
        return len(self.rounds[0].drafted) if self.rounds and self.rounds[0].opening else 0

    @property
    def plain_step_seconds(self) -> float | None:
        """What a step of plain decoding cost during this request: the mean of its own plain steps, measured (its
        slow spells included, as plain decoding would have had them; a median reads it faster); with too few of
        them, the step it planned with (None: neither)."""
        steps = plain_steps(self.rounds)
        if len(steps) >= PLAIN_STEPS_TO_MEASURE:
            return statistics.fmean(steps)
        return self.verify_seconds[1] if self.verify_seconds and len(self.verify_seconds) > 1 else None

    @property
    def acceptance_rate(self) -> float:
        return self.accepted_tokens / self.drafted_tokens if self.drafted_tokens else 0.0

    @property
    def tokens_per_pass(self) -> float:
        return self.generated_tokens / self.target_passes if self.target_passes else 0.0

    @property
    def decode_tokens_per_second(self) -> float:
        # The first token (and an accepted opening) comes out of the prefill; decoding makes the rest.
        n = self.generated_tokens - self.prefill_output_tokens
        return n / self.decode_seconds if self.decode_seconds > 0 and n > 0 else 0.0

    def summary(self) -> dict:
        return {
            "prompt_tokens": self.prompt_tokens,
            "reused_prompt_tokens": self.reused_prompt_tokens,
            "generated_tokens": self.generated_tokens,
            "prefill_output_tokens": self.prefill_output_tokens,
            "target_passes": self.target_passes,
            "drafted_tokens": self.drafted_tokens,
            "accepted_tokens": self.accepted_tokens,
            "acceptance_rate": round(self.acceptance_rate, 4),
            "tokens_per_pass": round(self.tokens_per_pass, 3),
            "prefill_seconds": round(self.prefill_seconds, 4),
            "decode_seconds": round(self.decode_seconds, 4),
            "decode_tokens_per_second": round(self.decode_tokens_per_second, 2),
            "stop_reason": self.stop_reason,
        }


@dataclass(frozen=True)
class Score:
    """How sure the target was of a token it wrote: the token's log-probability under the raw logits, and the
    likeliest other token at that position with its log-probability (what it nearly wrote instead)."""

    logprob: float
    alternative: int
    alternative_logprob: float


def score_tokens(rows: np.ndarray, tokens: Sequence[int]) -> list[Score]:
    """`rows[i]` are the logits at the position where `tokens[i]` was written."""
    scores = []
    for row, tok in zip(rows, tokens, strict=False):
        top = float(row.max())
        log_total = top + math.log(float(np.exp(row - top, dtype=np.float32).sum(dtype=np.float64)))
        best = int(row.argmax())
        if best == tok:  # the runner-up: the row's argmax with the winner masked (put back at once)
            kept, row[best] = row[best], -np.inf
            alternative = int(row.argmax())
            row[best] = kept
        else:
            alternative = best
        scores.append(Score(float(row[tok]) - log_total, alternative, float(row[alternative]) - log_total))
    return scores


@dataclass
class Generation:
    tokens: list[int]
    stats: Stats
    scores: list[Score] | None = None  # per token, with generate(scores=True)


# Called with the newly emitted tokens and the round that produced them; the first token comes out of the prefill,
# in the opening's round (`opening`, and nothing drafted when there was no opening copy: that round is not one of
# `Stats.rounds`). Returning True stops generation (cancellation).
TokenCallback = Callable[[list[int], Round], bool | None]
# Called after each emitted token with the output so far; True means "done, keep this token". A stop condition
# may also have `tokens_before_stop(tokens) -> int`: how many of these tokens, appended to the output, leave it
# running. A draft is verified only up to there: what follows the stop would be thrown away however right.
StopCondition = Callable[[list[int]], bool]


def _room_before_stop(stop: StopCondition | None, tokens: Sequence[int]) -> int:
    limit = getattr(stop, "tokens_before_stop", None)
    return len(tokens) if limit is None else limit(tokens)


def generate(
    backend: Backend,
    prompt: Sequence[int],
    acceptance: AcceptanceRule,
    *,
    drafter: Drafter | None = None,
    policy: DraftLengthPolicy | None = None,
    max_tokens: int = 512,
    max_draft: int = 32,
    opening_draft: int = 0,
    stop: StopCondition | None = None,
    on_tokens: TokenCallback | None = None,
    scores: bool = False,
    clock: Callable[[], float] = time.perf_counter,
) -> Generation:
    """Generate up to `max_tokens` tokens after `prompt`, speculating with `drafter` when one is given.

    Without a drafter (or when the policy picks length 0) each round is one plain decoding step, so
    `--no-speculation` runs the very same code path. Up to `opening_draft` tokens of the drafter's opening
    copy are verified within the prefill. With `scores`, the result says per token how sure the target was
    (`Score`; a rewrite's second look forks where it nearly wrote something else).
    """
    if not prompt:
        raise ValueError("the prompt is empty")
    stats = Stats(prompt_tokens=len(prompt))
    out: list[int] = []
    out_scores: list[Score] | None = [] if scores else None

    def emit(new: list[int], rnd: Round, rows: np.ndarray) -> bool:
        """Append tokens until a stop condition; return True when generation is over. `rows[i]`: the logits
        where new[i] was written."""
        kept: list[int] = []
        done = False
        new_scores = score_tokens(rows, new) if out_scores is not None else None
        for j, tok in enumerate(new):
            if backend.is_end_of_generation(tok):
                stats.stop_reason, done = "end_of_generation", True
                break
            kept.append(tok)
            out.append(tok)
            if new_scores is not None:
                out_scores.append(new_scores[j])
            if stop is not None and stop(out):
                stats.stop_reason, done = "stop", True
                break
            if len(out) >= max_tokens:
                stats.stop_reason, done = "max_tokens", True
                break
        if kept and drafter is not None and not done:
            drafter.extend(kept)
        if new_scores is not None:
            rnd.scores = new_scores[: len(kept)]
        if on_tokens is not None and on_tokens(kept, rnd):
            stats.stop_reason, done = "cancelled", True
        return done

    t0 = clock()
    opening = None
    if policy is not None:
        policy.start()
    if drafter is not None:
        drafter.start(prompt)
        if opening_draft > 0 and max_tokens > 1:
            opening = drafter.opening(min(opening_draft, max_tokens - 1))
    drafted = opening.tokens[: _room_before_stop(stop, opening.tokens)] if opening is not None else []
    rows = backend.prefill(prompt, drafted)
    if drafted:
        n_accepted, next_token = verify(acceptance, rows, drafted, 0)
        backend.truncate(len(prompt) + n_accepted)
        if policy is not None:
            policy.update(opening.origin, opening.run, len(drafted), n_accepted, opening.line_starts, opening.weak)
            policy.passed(len(drafted), n_accepted + 1)
        stats.drafted_tokens, stats.accepted_tokens = len(drafted), n_accepted
        first = [*drafted[:n_accepted], next_token]
    else:
        first = [acceptance.token(rows[0], 0)]
    stats.prefill_seconds = clock() - t0
    stats.reused_prompt_tokens = getattr(backend, "last_reused", 0)
    stats.target_passes = 1
    if drafted:
        opening_round = Round(
            drafted=list(drafted),
            accepted=n_accepted,
            origin=opening.origin,
            copied_from=opening.copied_from,
            next_token=next_token,
            seconds=stats.prefill_seconds,
            opening=True,
        )
        stats.rounds.append(opening_round)
    else:  # the prefill wrote the first token alone: a round for the callback, not one of the stats' rounds
        opening_round = Round([], 0, None, None, first[0], stats.prefill_seconds, opening=True)
    done = max_tokens <= 0 or emit(first, opening_round, rows)
    stats.prefill_output_tokens = len(out)

    t_decode = clock()
    while not done:
        t_round = clock()
        draft = drafter.propose(max_draft) if drafter is not None else None
        k = 0
        if draft is not None and draft.tokens:
            k = min(len(draft.tokens), max_draft, max_tokens - len(out))
            k = _room_before_stop(stop, draft.tokens[:k])
            if policy is not None and k > 0:
                k = min(k, policy.choose(draft.origin, draft.run, k, draft.line_starts, draft.weak))
        drafted = draft.tokens[:k] if draft is not None else []
        rows = backend.evaluate([out[-1], *drafted])
        n_accepted, next_token = verify(acceptance, rows, drafted, len(out))
        # Keep the pending token and the accepted drafts; the rejected tail leaves the cache.
        backend.truncate(len(prompt) + len(out) + n_accepted)
        if draft is not None and draft.tokens and policy is not None:
            if k > 0:
                policy.update(draft.origin, draft.run, k, n_accepted, draft.line_starts, draft.weak)
            else:  # nothing verified, but the emitted token shows whether the draft would have started right
                first_right = int(draft.tokens[0] == next_token)
                policy.update(draft.origin, draft.run, 1, first_right, draft.line_starts, draft.weak)
        if policy is not None:
            policy.passed(k + 1, n_accepted + 1)

        stats.target_passes += 1
        stats.drafted_tokens += k
        stats.accepted_tokens += n_accepted
        rnd = Round(
            drafted=list(drafted),
            accepted=n_accepted,
            origin=draft.origin if k else None,
            copied_from=draft.copied_from if k else None,
            next_token=next_token,
            seconds=clock() - t_round,
        )
        stats.rounds.append(rnd)
        done = emit([*drafted[:n_accepted], next_token], rnd, rows)

    stats.decode_seconds = clock() - t_decode
    stats.generated_tokens = len(out)
    return Generation(tokens=out, stats=stats, scores=out_scores)
