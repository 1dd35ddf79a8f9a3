"""Adaptive draft length: verify as many drafted tokens as pays for itself, right now.

On a CPU verifying is not free (here a pass over 16 tokens costs about 8 plain steps), so the length comes
from two things:
- the measured cost of one target pass over m tokens (`calibration`), and
- how likely each drafted token is to be accepted. For a copied draft that depends mostly on how long the
  copy has held so far: right after a change a match of one or two tokens is a guess, while a copy that
  has run for 30 tokens usually keeps going. So acceptance is estimated per token as a function of the
  match length in front of that token, learned online from every verified token and also from rounds
  that drafted nothing (the emitted token shows whether the draft's first token was right, for free).
With a(r) the acceptance of a token preceded by a match of r tokens, a draft continuing a run of r yields
1 + sum_j prod_{i<=j} a(r + i - 1) tokens per pass on average; we pick the k (0 = a plain step) with the
most tokens per second.

Those estimates come from every earlier request on the model, and a request can differ from them as a whole:
prose with a few repeated phrases accepts far less after a short match than code does. So each request also
keeps its own record, tokens accepted against the estimates' expectation for the same tokens, and when it
falls short scales the odds of acceptance down by that ratio (with REQUEST_WEIGHT tokens of evidence that it
is 1): a story whose first few copies fail stops drafting after them instead of after dozens, while a request
that does as well as the estimates (code edits, as a rule) drafts exactly as before. Never up: a request's
long copies that beat the estimates say nothing about its short matches.

Copies whose place is a guess (`Draft.weak`: one of several places that match as long, or a pattern in the answer
itself) break far more often after a short match than copies of one place in the code being edited, so they have
estimates of their own. Trusting a copy of the answer's own `self.` after three tokens as much as the code's unique
`def total_area(` is where most of the time lost to rejected drafts went (replayed on the coder's CanItEdit answers:
24 of 36 seconds, in passes that started from a match of 3-5 tokens).

And a request must not end up slower than plain decoding, whatever the estimates say: a copy that has held for
20 tokens is usually right, and when it breaks at once a pass over 25 tokens has cost 14 steps for two tokens. So
each request keeps a ledger of how far ahead of plain decoding it is by the costs it plans with (every pass's
tokens against one step each), and a pass may risk losing no more than LEAD_AT_RISK of that lead plus RISK_STEPS
steps: a request that is behind drafts a few tokens at a time until its copies have won the lead back, one that is
ahead drafts freely. Not the whole lead: a short answer whose opening copy won three steps and whose next long draft
then broke at once would end up behind plain by the two steps (0.90x over 20 tokens).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence

# Match lengths are grouped: 0, 1, 2, 3, 4-5, 6-7, 8-11, 12-15, 16-23, 24-31, 32-47, 48-63, 64+.
RUN_BUCKETS = (0, 1, 2, 3, 4, 6, 8, 12, 16, 24, 32, 48, 64)
PRIOR_WEIGHT = 2.0  # tokens of evidence the prior is worth; real observations soon dominate
FORGETTING = 0.995  # per observed token: acceptance drifts as generation moves through the file
REQUEST_WEIGHT = 4.0  # tokens of evidence that a request accepts as the estimates expect
REQUEST_FACTOR_FLOOR = 0.1  # the least a request's record scales the odds of acceptance by
RISK_STEPS = 2.0  # what a pass may lose beyond the request's lead over plain decoding, in plain steps
LEAD_AT_RISK = 0.9  # the share of that lead a pass may lose


def run_bucket(run: int) -> int:
    return bisect.bisect_right(RUN_BUCKETS, run) - 1


# Before any evidence, per bucket: how often a copied token is accepted after a match of that length. Measured on
# copy-edits (Qwen2.5-Coder-1.5B rewriting functions; SmolLM2 is much the same): a one-token match is right a
# quarter of the time, a copy that has held for 8 tokens is right 98% of the time, one of 32 or more 99%.
PRIOR_ACCEPTANCE = (0.2, 0.3, 0.45, 0.65, 0.85, 0.88, 0.95, 0.96, 0.98, 0.98, 0.985, 0.985, 0.985)


# The same for a token that starts a line (the token before it holds a line break), measured apart on CanItEdit's
# reference edits copied by this drafter: after a short match the next line's indentation is usually right
# (0.51 against 0.28 mid-line after a one-token match), while in a long copy a line is where an edit begins
# (0.983 against 0.994 after 64 tokens).
PRIOR_LINE_START_ACCEPTANCE = (0.2, 0.5, 0.7, 0.8, 0.85, 0.89, 0.94, 0.94, 0.95, 0.98, 0.975, 0.985, 0.98)


# The same for copies whose place is a guess (`Draft.weak`), inside a line and at line starts, measured the same way
# (coder model, CanItEdit's whole-file rewrites): after a 3-token match 0.53 against 0.88 for a copy of one place in
# the prompt; 0.85 against 0.95 after 8.
PRIOR_WEAK_ACCEPTANCE = (0.2, 0.28, 0.39, 0.53, 0.64, 0.71, 0.85, 0.85, 0.92, 0.93, 0.94, 0.96, 0.96)
PRIOR_WEAK_LINE_START_ACCEPTANCE = (0.2, 0.49, 0.7, 0.65, 0.73, 0.71, 0.83, 0.9, 0.95, 0.95, 0.95, 0.96, 0.96)

# Per kind of copied token (weak, line start): the name of its table in a saved state, and its prior.
TABLES = {
    (False, False): ("", PRIOR_ACCEPTANCE),
    (False, True): ("line_start_", PRIOR_LINE_START_ACCEPTANCE),
    (True, False): ("weak_", PRIOR_WEAK_ACCEPTANCE),
    (True, True): ("weak_line_start_", PRIOR_WEAK_LINE_START_ACCEPTANCE),
}


def expected_tokens(alpha: float, k: int) -> float:
    """Tokens emitted by a pass verifying k drafts, each accepted with probability alpha."""
    if alpha >= 1.0:
        return k + 1.0
    return (1.0 - alpha ** (k + 1)) / (1.0 - alpha)


def opening_pass_seconds(opening_drafted: int, verify_seconds) -> float:
    """What verifying the opening copy (drafted into the prefill) as a pass of its own would cost: a pass over the
    first token and the opening's other drafts, as many tokens as it drafted. Decode-only speed charges the
    opening's tokens this, more than they cost inside the prefill, rather than leaving them out."""
    if not opening_drafted or not verify_seconds:
        return 0.0
    return verify_seconds[min(opening_drafted, len(verify_seconds) - 1)]


def speedup_figures(
    decoded: int,
    decode_seconds: float,
    acceptance_rate: float,
    drafted_lengths: Sequence[int],
    verify_seconds,
    opening_drafted: int,
    plain_step: float,
) -> tuple[float, float] | None:
    """(measured, predicted) speed-up over plain decoding of `decoded` tokens made in `decode_seconds`.

    Measured against one plain step per token, `plain_step` (what a plain step took while the request ran: against
    the planned `verify_seconds[1]` instead, a machine running faster or slower than it was calibrated would show
    a speed-up that is not there, or a loss). Predicted from the acceptance rate α alone,
    for the passes the request ran (`drafted_lengths`: per pass, how many drafts it verified, 0 for a plain step): a
    pass verifying k drafts makes (1 - α^(k+1)) / (1 - α) tokens on average and costs `verify_seconds[k + 1]`. An
    opening copy verified within the prefill (`opening_drafted` tokens, charged as a pass over as many, as `editspec
    bench` does) makes one token fewer: its first comes with the prompt. The textbook formula takes one draft length
    for every pass; an adaptive length mixes plain steps with long drafts, and their mean says nothing."""
    if not verify_seconds or decoded <= 0 or decode_seconds <= 0:
        return None
    top = len(verify_seconds) - 1
    tokens = sum(expected_tokens(acceptance_rate, k) for k in drafted_lengths)
    seconds = sum(verify_seconds[min(k + 1, top)] for k in drafted_lengths)
    if opening_drafted:
        tokens += expected_tokens(acceptance_rate, opening_drafted) - 1.0
        seconds += verify_seconds[min(opening_drafted, top)]
    step = verify_seconds[1]
    predicted = tokens * step / seconds if seconds > 0 else 1.0
    return decoded * plain_step / decode_seconds, predicted


def request_speedups(stats) -> tuple[float, float] | None:
    """`speedup_figures` of one request (an engine.Stats), as `editspec rewrite`'s statistics line and the trace
    page show them: every token after the first, the opening copy's too, charged as a pass of its own (as
    `editspec bench` does), against the request's own plain steps (`Stats.plain_step_seconds`), by the verify
    costs the request planned its drafts with. The opening's charge is a planned cost, scaled to the plain steps
    measured as the decoding's seconds are."""
    verify_seconds, step = stats.verify_seconds, stats.plain_step_seconds
    if not verify_seconds or len(verify_seconds) < 2 or step is None:  # nothing planned: plain decoding
        return None
    seconds = stats.decode_seconds + step / verify_seconds[1] * opening_pass_seconds(
        stats.opening_drafted, verify_seconds
    )
    lengths = [len(r.drafted) for r in stats.rounds if not r.opening]
    return speedup_figures(
        stats.generated_tokens - 1,
        seconds,
        stats.acceptance_rate,
        lengths,
        verify_seconds,
        stats.opening_drafted,
        plain_step=step,
    )


class AdaptiveDraftLength:
    def __init__(self, verify_seconds: Sequence[float], draft_step_seconds: float = 0.0):
        """`verify_seconds[m]` is the cost of one target pass over m tokens (index 0 unused);
        `draft_step_seconds` the cost of one draft-model step, paid per model-drafted token."""
        if len(verify_seconds) < 2:
            raise ValueError("need the cost of at least a one-token pass")
        self.verify_seconds = list(verify_seconds)
        self.draft_step_seconds = draft_step_seconds
        n = len(RUN_BUCKETS)
        # Per kind of copied token (TABLES: weak or not, inside a line or starting one), per run bucket: evidence of
        # acceptance, as (successes, trials).
        self.tables = {
            kind: ([prior[b] * PRIOR_WEIGHT for b in range(n)], [PRIOR_WEIGHT] * n)
            for kind, (_, prior) in TABLES.items()
        }
        self.model_successes, self.model_trials = 0.6 * PRIOR_WEIGHT, PRIOR_WEIGHT
        self.risk_steps = RISK_STEPS
        self.start()

    def start(self) -> None:
        """A new request: its own record and ledger start empty (the estimates carry over)."""
        self.request_accepted = self.request_expected = 0.0
        self.lead = 0.0  # seconds this request is ahead of plain decoding, by the costs planned with

    def passed(self, tokens: int, emitted: int) -> None:
        """A target pass over `tokens` tokens (the opening's: its drafted tokens) wrote `emitted` tokens."""
        costs = self.verify_seconds
        self.lead += emitted * costs[1] - costs[min(tokens, len(costs) - 1)]

    def request_factor(self) -> float:
        """How much less often than the estimates say this request's copies have been accepted, as an odds ratio
        (1 when they have done as well or better)."""
        ratio = (self.request_accepted + REQUEST_WEIGHT) / (self.request_expected + REQUEST_WEIGHT)
        return min(1.0, max(REQUEST_FACTOR_FLOOR, ratio))

    def state(self) -> dict:
        """The acceptance estimates, to start the next request (or process) from."""
        state = {}
        for kind, (name, _) in TABLES.items():
            successes, trials = self.tables[kind]
            state[f"{name}successes"] = [round(x, 4) for x in successes]
            state[f"{name}trials"] = [round(x, 4) for x in trials]
        state["model"] = [round(self.model_successes, 4), round(self.model_trials, 4)]
        return state

    def load(self, state: dict | None) -> None:
        """Start from earlier estimates (ignored unless well-formed: a damaged cache is no error). A state saved
        before line starts or weak copies were told apart keeps the prior for them."""
        if not isinstance(state, dict):
            return
        found = {}
        for kind, (name, _) in TABLES.items():
            if kind == (False, False) or f"{name}trials" in state:
                found[kind] = _table(state, f"{name}successes", f"{name}trials")
        try:
            model = [float(x) for x in state["model"]]
        except (KeyError, TypeError, ValueError):
            return
        if None in found.values() or len(model) != 2 or not 0 <= model[0] <= model[1] or model[1] <= 0:
            return
        self.tables.update(found)
        self.model_successes, self.model_trials = model

    @property
    def max_length(self) -> int:
        return len(self.verify_seconds) - 2

    def acceptance(self, run: int, line_start: bool = False, weak: bool = False) -> float:
        b = run_bucket(run)
        successes, trials = self.tables[(weak, line_start)]
        return successes[b] / trials[b]

    def _best(self, survival: Sequence[float], per_draft_seconds: float) -> int:
        step = self.verify_seconds[1]
        best_k, best_rate = 0, 1.0 / step
        risk = LEAD_AT_RISK * max(self.lead, 0.0) + self.risk_steps * step  # what it may lose if nothing holds
        expected = 1.0
        for k, s in enumerate(survival, start=1):
            seconds = self.verify_seconds[k + 1] + k * per_draft_seconds
            expected += s
            if seconds - step > risk:  # a longer pass may still be within it: costs dip where kernels tile
                continue
            rate = expected / seconds
            if rate > best_rate:
                best_k, best_rate = k, rate
        return best_k

    def choose(self, kind: str, run: int, available: int, line_starts: Sequence[bool] = (), weak: bool = False) -> int:
        limit = min(available, self.max_length)
        if kind == "model":
            alpha = self.model_successes / self.model_trials
            return self._best([alpha**j for j in range(1, limit + 1)], self.draft_step_seconds)
        survival, s, factor = [], 1.0, self.request_factor()
        for j in range(limit):
            a = self.acceptance(run + j, j < len(line_starts) and bool(line_starts[j]), weak)
            s *= a * factor / (1.0 - a + a * factor)  # the odds, scaled by this request's record
            survival.append(s)
        return self._best(survival, 0.0)

    def update(
        self,
        kind: str,
        run: int,
        n_verified: int,
        n_accepted: int,
        line_starts: Sequence[bool] = (),
        weak: bool = False,
    ) -> None:
        """Record a verified draft (or, with n_verified=1, a draft's first token checked for free)."""
        outcomes = [True] * n_accepted + ([False] if n_accepted < n_verified else [])
        if kind == "model":
            self.model_successes = self.model_successes * FORGETTING ** len(outcomes) + n_accepted
            self.model_trials = self.model_trials * FORGETTING ** len(outcomes) + len(outcomes)
            return
        for j, accepted in enumerate(outcomes):
            b = run_bucket(run + j)
            successes, trials = self.tables[(weak, j < len(line_starts) and bool(line_starts[j]))]
            self.request_expected += successes[b] / trials[b]  # what the estimates expected of this token
            self.request_accepted += accepted
            successes[b] = successes[b] * FORGETTING + accepted
            trials[b] = trials[b] * FORGETTING + 1.0


def _table(state: dict, successes: str, trials: str) -> tuple[list[float], list[float]] | None:
    """A well-formed pair of per-bucket lists from a saved state, or None."""
    try:
        s = [float(x) for x in state[successes]]
        t = [float(x) for x in state[trials]]
    except (KeyError, TypeError, ValueError):
        return None
    n = len(RUN_BUCKETS)
    if len(s) != n or len(t) != n or min(t) <= 0 or any(not 0 <= a <= b for a, b in zip(s, t, strict=True)):
        return None
    return s, t


class FixedDraftLength:
    """Always verify up to k drafted tokens (for comparisons and tests)."""

    def __init__(self, k: int):
        self.k = k

    def start(self) -> None:
        pass

    def choose(self, kind: str, run: int, available: int, line_starts: Sequence[bool] = (), weak: bool = False) -> int:
        return min(self.k, available)

    def passed(self, tokens: int, emitted: int) -> None:
        pass

    def update(
        self,
        kind: str,
        run: int,
        n_verified: int,
        n_accepted: int,
        line_starts: Sequence[bool] = (),
        weak: bool = False,
    ) -> None:
        pass
