"""The ceiling of a draft-length policy: an oracle replay of a finished generation.

Given the tokens a generation emitted, the drafts the lookup drafter would offer at every position, and the
verify costs of this machine, the best possible choice of draft lengths is a shortest path: from position i a
pass that verifies k drafted tokens, all of them right (a k beyond the draft's agreement with the output only
costs more for the same tokens), costs `verify_seconds[k + 1]` and reaches i + k + 1. The oracle's decode time
over the plain time of the same tokens (one step each) is the most any policy could reach with these drafts on
this machine; the live run's measured speed-up over it says how much of that the policy gets.

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


def draft_agreement(prompt: Sequence[int], output: Sequence[int], start: int, max_draft: int) -> list[int]:
    """For each position i in [start, len(output)): how many tokens of the draft the lookup drafter proposes
    there (history = prompt + output[:i]) equal output[i:]."""
    drafter = PromptLookupDrafter()
    drafter.start(prompt)
    drafter.extend(output[:start])
    agreement = []
    for i in range(start, len(output)):
        draft = drafter.propose(max_draft)
        n = 0
        if draft is not None:
            limit = min(len(draft.tokens), len(output) - i - 1)  # the last token is the target's own
            while n < limit and draft.tokens[n] == output[i + n]:
                n += 1
        agreement.append(n)
        drafter.extend(output[i : i + 1])
    return agreement


def best_seconds(agreement: Sequence[int], verify_seconds: Sequence[float]) -> float:
    """Shortest decode time over the positions, passes of k + 1 tokens costing verify_seconds[k + 1]."""
    n = len(agreement)
    max_k = len(verify_seconds) - 2
    cost = [0.0] * (n + 1)
    for i in range(n - 1, -1, -1):
        best = verify_seconds[1] + cost[i + 1]
        for k in range(1, min(agreement[i], max_k, n - 1 - i) + 1):
            best = min(best, verify_seconds[k + 1] + cost[i + k + 1])
        cost[i] = best
    return cost[0]


def replay(
    prompt: Sequence[int], output: Sequence[int], prefill_output_tokens: int, verify_seconds: Sequence[float]
) -> Replay:
    """The oracle for one generation: `output` as emitted, the first `prefill_output_tokens` of it made within
    the prefill."""
    start = min(max(prefill_output_tokens, 1), len(output))
    agreement = draft_agreement(prompt, output, start, len(verify_seconds) - 2)
    decoded = len(output) - start
    return Replay(decoded, decoded * verify_seconds[1], best_seconds(agreement, verify_seconds), agreement)


def live_model_seconds(drafted_lengths: Sequence[int], verify_seconds: Sequence[float]) -> float:
    """What the live run's passes cost by the same cost model (to tell policy from measurement)."""
    return sum(verify_seconds[min(k, len(verify_seconds) - 2) + 1] for k in drafted_lengths)


def foresight_seconds(passes: Sequence[tuple[int, int]], verify_seconds: Sequence[float]) -> float:
    """What the live run's passes would cost had each verified only the drafts that held: a pass that verified k
    drafts of which a were accepted verifies a instead, for the same tokens (the target's own token after the a-th
    is then its bonus rather than its correction), at `verify_seconds[a + 1]`. A pass given a = -1 made nothing to
    decode (an opening copy whose first token was already not the answer's) and is not run at all."""
    top = len(verify_seconds) - 1
    return sum(verify_seconds[min(min(a, k) + 1, top)] for k, a in passes if a >= 0)
