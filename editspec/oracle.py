"""The ceiling of a draft-length policy: an oracle replay of a finished generation.

Given the tokens a generation emitted, the drafts the lookup drafter would offer at every position, and the
verify costs of this machine, the best possible choice of draft lengths is a shortest path: from position i a
pass that verifies k drafted tokens, all of them right, costs `verify_seconds[k + 1]` and reaches i + k + 1. A pass
may also verify past the place where the draft breaks, for the same tokens: that pays where a longer pass costs
less (tiled kernels make a pass over 16 tokens cheaper than one over 11-15 here), and the live policy does it.
The oracle's decode time over the plain time of the same tokens (one step each) is the most any policy could reach
with these drafts on this machine; the live run's measured speed-up over it says how much of that the policy gets.

Between the two, `foresight_seconds`: the live run's own passes, each stopped where its copy broke. It tells the
gap's two parts apart: tokens verified past a break, which only knowing where the answer leaves the copy could
save, and drafts cut short of what would have held (the rest of the way to the oracle).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .drafters import PromptLookupDrafter


@dataclass
class Replay:
    decoded: int  # tokens the decoding phase made (the prefill's first token and opening excluded)
    plain_seconds: float  # those tokens at one plain step each
    oracle_seconds: float  # the best choice of draft lengths
    agreement: list[int]  # per decoded position: how many drafted tokens the output would have accepted

    @property
    def speedup(self) -> float:
        return self.plain_seconds / self.oracle_seconds if self.oracle_seconds > 0 else 1.0


def drafts(prompt: Sequence[int], output: Sequence[int], start: int, max_draft: int) -> tuple[list[int], list[int]]:
    """For each position i in [start, len(output)): how many tokens of the draft the lookup drafter proposes
    there (history = prompt + output[:i]) equal output[i:], and how long that draft is."""
    drafter = PromptLookupDrafter()
    drafter.start(prompt)
    drafter.extend(output[:start])
    agreement, lengths = [], []
    for i in range(start, len(output)):
        draft = drafter.propose(max_draft)
        n = 0
        if draft is not None:
            limit = min(len(draft.tokens), len(output) - i - 1)  # the last token is the target's own
            while n < limit and draft.tokens[n] == output[i + n]:
                n += 1
        agreement.append(n)
        lengths.append(len(draft.tokens) if draft is not None else 0)
        drafter.extend(output[i : i + 1])
    return agreement, lengths


def best_seconds(
    agreement: Sequence[int], verify_seconds: Sequence[float], lengths: Sequence[int] | None = None
) -> float:
    """Shortest decode time over the positions, passes of k + 1 tokens costing verify_seconds[k + 1]. With the
    drafts' `lengths`, a pass that reaches the place where its draft breaks may verify up to the whole draft
    instead, for the same tokens, where that costs less."""
    n = len(agreement)
    max_k = len(verify_seconds) - 2
    cost = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        best = verify_seconds[1] + cost[i + 1]
        top = min(agreement[i], max_k, n - 1 - i)
        for k in range(1, top + 1):
            best = min(best, verify_seconds[k + 1] + cost[i + k + 1])
        if lengths is not None and top == agreement[i]:  # the draft breaks after `top` tokens (or the answer ends)
            for j in range(top + 1, min(lengths[i], max_k) + 1):
                best = min(best, verify_seconds[j + 1] + cost[i + top + 1])
        cost[i] = best
    return cost[0]


def replay(
    prompt: Sequence[int], output: Sequence[int], prefill_output_tokens: int, verify_seconds: Sequence[float]
) -> Replay:
    """The oracle for one generation: `output` as emitted, the first `prefill_output_tokens` of it made within
    the prefill."""
    start = min(max(prefill_output_tokens, 1), len(output))
    agreement, lengths = drafts(prompt, output, start, len(verify_seconds) - 2)
    decoded = len(output) - start
    return Replay(decoded, decoded * verify_seconds[1], best_seconds(agreement, verify_seconds, lengths), agreement)


def live_model_seconds(drafted_lengths: Sequence[int], verify_seconds: Sequence[float]) -> float:
    """What the live run's passes cost by the same cost model (to tell policy from measurement)."""
    return sum(verify_seconds[min(k, len(verify_seconds) - 2) + 1] for k in drafted_lengths)


def foresight_seconds(passes: Sequence[tuple[int, int]], verify_seconds: Sequence[float]) -> float:
    """What the live run's passes would cost had each known where its draft breaks: a pass that verified k drafts
    of which a were accepted verifies a instead, for the same tokens (the target's own token after the a-th is then
    its bonus rather than its correction), or any number from a to k where that costs less (a longer pass can be
    the cheaper one where kernels tile). A pass given a = -1 made nothing to decode (an opening copy whose first
    token was already not the answer's) and is not run at all."""
    top = len(verify_seconds) - 1
    return sum(min(verify_seconds[min(j + 1, top)] for j in range(min(a, k), k + 1)) for k, a in passes if a >= 0)
