"""Keep the KV cache of prompts between requests, so a rewrite re-reads only what changed.

On a CPU reading the prompt takes as long as writing the answer. Prompts are laid out so that what repeats
between requests comes first (system prompt, file context), and a backend keeps the KV state of earlier
prompts here. Reuse is decided on the tokens themselves (longest common prefix), so an edited file can never
reuse stale state: everything after the first changed token is read again. Memory is bounded; the least
recently used state goes first.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = 0
    limit = min(limit, len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n


class PrefixCache:
    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[int, ...], bytes] = OrderedDict()

    @property
    def bytes_used(self) -> int:
        return sum(len(v) for v in self.entries.values())

    def longest(self, tokens: Sequence[int], limit: int) -> tuple[tuple[int, ...] | None, int]:
        """The kept prompt sharing the longest prefix with `tokens` (at most `limit` tokens), and its length."""
        best, best_len = None, 0
        for key in self.entries:
            n = common_prefix(key, tokens, limit)
            if n > best_len:
                best, best_len = key, n
        return best, best_len

    def get(self, key: tuple[int, ...]) -> bytes:
        self.entries.move_to_end(key)
        return self.entries[key]

    def put(self, tokens: Sequence[int], state: bytes) -> None:
        if len(state) > self.max_bytes:
            return
        key = tuple(tokens)
        self.entries[key] = state
        self.entries.move_to_end(key)
        while self.bytes_used > self.max_bytes:
            self.entries.popitem(last=False)


def reuse_prefix(backend, cache: PrefixCache | None, tokens: Sequence[int]) -> int:
    """Bring the backend's KV cache to the longest prefix of `tokens` it can have without reading; return its
    length. At least the last token is always left to read, for its logits."""
    limit = len(tokens) - 1
    live = common_prefix(backend.tokens, tokens, limit)
    if cache is not None:
        key, stored = cache.longest(tokens, limit)
        if key is not None and stored > live:
            backend.load_state(key, cache.get(key))
            live = stored
    backend.truncate(live)
    return live
