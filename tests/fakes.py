"""A small deterministic backend whose logits depend only on the history, never on batch shape.

That is what makes exactness provable: speculative greedy must equal plain greedy token for token.
"""

from __future__ import annotations

import pickle
from collections.abc import Sequence

import numpy as np

from editspec.prefix_cache import PrefixCache, reuse_prefix


class FakeBackend:
    def __init__(
        self,
        vocab: int = 40,
        seed: int = 0,
        source: Sequence[int] = (),
        copy_bias: float = 3.0,
        end_token: int | None = None,
        prefix_cache_bytes: int = 0,
    ):
        rng = np.random.default_rng(seed)
        self.n_vocab = vocab
        self.table = rng.normal(size=(vocab, vocab, vocab))
        # A pull towards continuing the source, so that copied drafts are often (not always) right.
        self.follows: dict[int, int] = {}
        for a, b in zip(source, source[1:], strict=False):
            self.follows.setdefault(a, b)
        self.copy_bias = copy_bias
        self.end_token = end_token
        self.tokens: list[int] = []
        self.passes = 0
        self.read = 0  # prompt tokens actually read by prefills (what a kept prefix saves)
        self.prefix_cache = PrefixCache(prefix_cache_bytes) if prefix_cache_bytes else None
        self.last_reused = 0

    def logits_after(self, history: Sequence[int]) -> np.ndarray:
        a = history[-2] if len(history) > 1 else 0
        b = history[-1]
        row = self.table[a, b].copy()
        if b in self.follows:
            row[self.follows[b]] += self.copy_bias
        return row

    def prefill(self, tokens: Sequence[int], draft: Sequence[int] = ()) -> np.ndarray:
        self.last_reused = reuse_prefix(self, self.prefix_cache, tokens)
        self.read += len(tokens) - self.last_reused
        self.tokens = list(tokens)
        self.passes += 1
        rows = [self.logits_after(self.tokens)]
        for tok in draft:
            self.tokens.append(tok)
            rows.append(self.logits_after(self.tokens))
        if self.prefix_cache is not None:
            self.prefix_cache.put(self.tokens, self.save_state())
        return np.stack(rows)

    def save_state(self) -> bytes:
        return pickle.dumps(list(self.tokens))

    def load_state(self, tokens: Sequence[int], state: bytes) -> None:
        """As llama.cpp's: a state that is not of these tokens is refused (RuntimeError), the cache left empty."""
        try:
            ok = pickle.loads(state) == list(tokens)
        except Exception:
            ok = False
        self.tokens = list(tokens) if ok else []
        if not ok:
            raise RuntimeError("not a saved state of these tokens")

    def evaluate(self, tokens: Sequence[int]) -> np.ndarray:
        assert tokens, "evaluate needs at least one token"
        self.passes += 1
        rows = []
        for tok in tokens:
            self.tokens.append(tok)
            rows.append(self.logits_after(self.tokens))
        return np.stack(rows)

    def truncate(self, n_tokens: int) -> None:
        assert 0 <= n_tokens <= len(self.tokens), (n_tokens, len(self.tokens))
        del self.tokens[n_tokens:]

    def is_end_of_generation(self, token: int) -> bool:
        return token == self.end_token
