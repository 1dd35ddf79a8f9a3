"""Drafters: where speculative tokens come from.

`PromptLookupDrafter` copies from the history (the prompt, which holds the code being edited, plus the
output so far). An edit is mostly a copy with a few changes, so it keeps copying from the same place while
the emitted tokens keep matching, and re-synchronises by the longest n-gram match after a change. A place
found that way is only a guess when other places match as long, or when it lies in the answer itself (a
pattern the answer repeats, not the code being edited): measured on CanItEdit with the coder model, after a
match of 3 tokens such a copy's next token was right 53% of the time against 88% for a copy of one place in
the prompt. The draft says so (`Draft.weak`), and the policy keeps its estimates for such copies apart.
`DraftModelDrafter` asks a small model with the same vocabulary; `CombinedDrafter` uses it only where
lookup has nothing worth verifying.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence

import numpy as np

from .acceptance import GreedyAcceptance
from .engine import Draft, DraftLengthPolicy

MAX_MATCH_CHECK = 32  # a longer match says no more about the next token than a 32-token one
MIN_OPENING_ANCHOR = 3  # an opening copy needs the prompt's tail to match at least this many tokens


class PromptLookupDrafter:
    """Drafts by copying what followed the longest earlier occurrence of the history's tail."""

    def __init__(self, max_ngram: int = 4, max_candidates: int = 64, has_newline: Callable[[int], bool] | None = None):
        """`has_newline(token)`: whether a token's text holds a line break; with it each draft says which of its
        tokens start a line (where an edit usually begins, so the policy trusts them less)."""
        self.max_ngram = max_ngram
        self.max_candidates = max_candidates
        self.has_newline = has_newline
        self.history: list[int] = []
        self.breaks: list[bool] = []  # per history token: it holds a line break (with has_newline only)
        # ngram length -> ngram -> positions of the token that followed each occurrence
        self.index: dict[int, dict[tuple[int, ...], list[int]]] = {}
        self.cursor: int | None = None  # where the copy we are following continues
        self.run = 0  # how many history tokens in a row match the text before the cursor
        self.prompt_length = 0
        self.weak = False  # the cursor's place is a guess (see the module's note)

    def start(self, prompt: Sequence[int]) -> None:
        self.history, self.breaks = [], []
        self.index = {n: defaultdict(list) for n in range(1, self.max_ngram + 1)}
        self.cursor, self.run, self.weak = None, 0, False
        self.prompt_length = len(prompt)
        self._append(prompt)

    def _append(self, tokens: Sequence[int]) -> None:
        h = self.history
        for tok in tokens:
            h.append(tok)
            if self.has_newline is not None:
                self.breaks.append(self.has_newline(tok))
            end = len(h)
            for n in range(1, min(self.max_ngram, end) + 1):
                self.index[n][tuple(h[end - n : end])].append(end)

    def extend(self, tokens: Sequence[int]) -> None:
        for tok in tokens:
            if self.cursor is not None and self.cursor < len(self.history) and self.history[self.cursor] == tok:
                self.cursor += 1
                self.run += 1
            else:
                self.cursor, self.run = None, 0
            self._append((tok,))

    def _match_length(self, position: int) -> int:
        """How many tokens before `position` equal the history's tail."""
        h, n = self.history, 0
        while n < MAX_MATCH_CHECK and n < position and h[position - 1 - n] == h[-1 - n]:
            n += 1
        return n

    def _resynchronise(self) -> None:
        h = self.history
        for n in range(min(self.max_ngram, len(h)), 0, -1):
            # The newest entry is the tail itself (its continuation is not written yet).
            candidates = [p for p in self.index[n].get(tuple(h[-n:]), ()) if p < len(h)]
            if not candidates:
                continue
            if len(candidates) > self.max_candidates:
                candidates = candidates[-self.max_candidates :]
            # Longest match wins; among equals, the latest (edits move forward through the source).
            lengths = {p: self._match_length(p) for p in candidates}
            best = max(candidates, key=lambda p: (lengths[p], p))
            self.cursor, self.run = best, lengths[best]
            ties = sum(1 for p in candidates if lengths[p] == lengths[best])
            self.weak = ties > 1 or best >= self.prompt_length
            return

    def opening(self, max_tokens: int) -> Draft | None:
        """The copy that the prompt's own tail points at (for an edit prompt, the code's first lines), when
        the anchor is long enough to trust rather than a one- or two-token coincidence."""
        draft = self.propose(max_tokens)
        return draft if draft is not None and draft.run >= MIN_OPENING_ANCHOR else None

    def propose(self, max_tokens: int) -> Draft | None:
        if self.cursor is None or self.cursor >= len(self.history):
            self._resynchronise()
        if self.cursor is None or self.cursor >= len(self.history):
            self.cursor, self.run = None, 0
            return None
        tokens = self.history[self.cursor : self.cursor + max_tokens]
        # Token j starts a line when the one before it holds a break; before the first is the copy's anchor,
        # history[cursor - 1], which equals the history's last token (the match the cursor stands on).
        starts = tuple(self.breaks[self.cursor - 1 : self.cursor - 1 + len(tokens)]) if self.breaks else ()
        return Draft(
            tokens=tokens, origin="lookup", run=self.run, copied_from=self.cursor, line_starts=starts, weak=self.weak
        )


class DraftModelDrafter:
    """Drafts with a small model, choosing each token as the target would (`rule`): the argmax when greedy,
    and with the target's own noise for that position when sampling, so that where the two models are close
    the draft is the target's token."""

    def __init__(self, backend, policy: DraftLengthPolicy, rule=None, min_probability: float = 0.3):
        self.backend = backend
        self.policy = policy
        self.rule = rule if rule is not None else GreedyAcceptance()
        self.min_probability = min_probability
        self.history: list[int] = []
        self.prompt_length = 0

    def start(self, prompt: Sequence[int]) -> None:
        self.history = list(prompt)
        self.prompt_length = len(prompt)
        self.backend.prefill(self.history)

    def opening(self, max_tokens: int) -> Draft | None:
        return None  # its first draft would cost draft-model steps before the prefill could start

    def extend(self, tokens: Sequence[int]) -> None:
        self.history.extend(tokens)

    def _logits_after_history(self) -> np.ndarray:
        cached = self.backend.tokens
        common = 0
        limit = min(len(cached), len(self.history) - 1)  # always re-evaluate at least the last token
        while common < limit and cached[common] == self.history[common]:
            common += 1
        self.backend.truncate(common)
        return self.backend.evaluate(self.history[common:])[-1]

    def propose(self, max_tokens: int) -> Draft | None:
        k = min(max_tokens, self.policy.choose("model", 0, max_tokens))
        if k <= 0:
            return None
        tokens: list[int] = []
        position = len(self.history) - self.prompt_length
        logits = self._logits_after_history()
        while True:
            tok = self.rule.token(logits, position + len(tokens))
            if self.rule.temperature == 0:
                shifted = np.exp(logits - logits.max())
                if shifted[tok] / shifted.sum() < self.min_probability:
                    break  # not confident: verifying this token would probably be wasted work
            tokens.append(tok)
            if len(tokens) >= k or self.backend.is_end_of_generation(tok):
                break
            logits = self.backend.evaluate([tok])[-1]
        if not tokens:
            return None
        return Draft(tokens=tokens, origin="model")


class CombinedDrafter:
    """Prompt lookup first; the draft model only where lookup offers nothing the policy would verify."""

    def __init__(self, lookup: PromptLookupDrafter, model: DraftModelDrafter, policy: DraftLengthPolicy):
        self.lookup, self.model, self.policy = lookup, model, policy

    def start(self, prompt: Sequence[int]) -> None:
        self.lookup.start(prompt)
        self.model.start(prompt)

    def extend(self, tokens: Sequence[int]) -> None:
        self.lookup.extend(tokens)
        self.model.extend(tokens)

    def opening(self, max_tokens: int) -> Draft | None:
        return self.lookup.opening(max_tokens)

    def propose(self, max_tokens: int) -> Draft | None:
        draft = self.lookup.propose(max_tokens)
        chosen = draft is not None and self.policy.choose(
            draft.origin, draft.run, len(draft.tokens), draft.line_starts, draft.weak
        )
        if chosen:
            return draft
        return self.model.propose(max_tokens)
