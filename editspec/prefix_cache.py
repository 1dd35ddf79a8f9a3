"""Keep the KV cache of prompts between requests, so a rewrite re-reads only what changed.

On a CPU reading the prompt takes as long as writing the answer. Prompts are laid out so that what repeats
between requests comes first (system prompt, file context), and a backend keeps the KV state of earlier
prompts here. Reuse is decided on the tokens themselves (longest common prefix), so an edited file can never
reuse stale state: everything after the first changed token is read again. Memory is bounded; the least
recently used state goes first.

With a directory, the states are also kept on disk (as many bytes again, least recently used removed), so
that the next process on the same model file starts with them: a second `editspec rewrite` of a file re-reads
only the function and the instruction, and any rewrite skips the system prompt. A state file that cannot be
read or restored is removed and its prompt read again: never an error.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import struct
import time
from array import array
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path

MAGIC = b"editspec KV state 1\n"
SUFFIX = ".kv"
TMP_SUFFIX = ".tmp"  # a state being written: `.<name>.kv.<pid>.tmp`
STALE_TMP_SECONDS = 3600
# A folder of states that no process has read or written for this long is removed (see remove_abandoned).
ABANDONED_SECONDS = 30 * 24 * 3600


def common_prefix(a: Sequence[int], b: Sequence[int], limit: int) -> int:
    n = 0
    limit = min(limit, len(a), len(b))
    while n < limit and a[n] == b[n]:
        n += 1
    return n


class DiskStates:
    """KV states in files named by their tokens' digest: the magic line, the token count, the tokens (uint32),
    then the state. Written to a temporary file and renamed, so a reader never sees half a file and two
    processes saving the same prompt leave one whole file."""

    def __init__(self, directory: Path, max_bytes: int):
        self.directory = Path(directory)
        self.max_bytes = max_bytes
        self._tokens: dict[str, tuple[int, ...] | None] = {}  # file name -> its tokens (None: unreadable)

    def _paths(self) -> list[Path]:
        try:
            return [p for p in self.directory.iterdir() if p.name.endswith(SUFFIX)]
        except OSError:
            return []

    def _read_tokens(self, path: Path) -> tuple[int, ...] | None:
        try:
            with path.open("rb") as f:
                head = f.read(len(MAGIC) + 4)
                if len(head) < len(MAGIC) + 4 or not head.startswith(MAGIC):
                    return None
                (n,) = struct.unpack("<I", head[len(MAGIC) :])
                raw = f.read(4 * n)
        except OSError:
            return None
        if len(raw) != 4 * n:
            return None
        tokens = array("I")
        tokens.frombytes(raw)
        return tuple(tokens)

    def index(self) -> dict[tuple[int, ...], Path]:
        """The prompts kept on disk now (another process may have added or removed some)."""
        found = {}
        for path in self._paths():
            if path.name not in self._tokens:
                self._tokens[path.name] = self._read_tokens(path)
            tokens = self._tokens[path.name]
            if tokens is None:
                self.remove(path)
            else:
                found[tokens] = path
        return found

    def load(self, path: Path) -> bytes | None:
        """The state kept in `path`, or None if it is gone or damaged (then it is removed)."""
        tokens = self._tokens.get(path.name)
        try:
            data = path.read_bytes()
            os.utime(path)  # used: the least recently used are removed first
        except OSError:
            return None
        start = len(MAGIC) + 4 + 4 * len(tokens or ())
        if tokens is None or len(data) <= start or not data.startswith(MAGIC):
            self.remove(path)
            return None
        return data[start:]

    def save(self, tokens: Sequence[int], state: bytes) -> None:
        """Keep a state on disk; a full or read-only disk only means it is not kept."""
        if len(state) > self.max_bytes:
            return
        raw = array("I", tokens).tobytes()
        path = self.directory / (hashlib.sha256(raw).hexdigest()[:32] + SUFFIX)
        tmp = self.directory / f".{path.name}.{os.getpid()}{TMP_SUFFIX}"
        try:
            self.directory.mkdir(parents=True, exist_ok=True)
            with tmp.open("wb") as f:
                f.write(MAGIC + struct.pack("<I", len(tokens)) + raw)
                f.write(state)
            tmp.replace(path)
        except OSError:
            with contextlib.suppress(OSError):
                tmp.unlink()
            return
        self._tokens[path.name] = tuple(tokens)
        self._evict()

    def _evict(self) -> None:
        stale = time.time() - STALE_TMP_SECONDS  # a process killed while saving leaves its temporary file
        for tmp in self.directory.glob(f".*{TMP_SUFFIX}"):
            with contextlib.suppress(OSError):
                if tmp.stat().st_mtime < stale:
                    tmp.unlink()
        files = []
        for path in self._paths():
            with contextlib.suppress(OSError):
                st = path.stat()
                files.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in files)
        for _, size, path in sorted(files, key=lambda f: f[0]):
            if total <= self.max_bytes:
                break
            self.remove(path)
            total -= size

    def remove(self, path: Path) -> None:
        self._tokens.pop(path.name, None)
        with contextlib.suppress(OSError):
            path.unlink()


class PrefixCache:
    def __init__(self, max_bytes: int, directory: Path | None = None):
        self.max_bytes = max_bytes
        self.entries: OrderedDict[tuple[int, ...], bytes] = OrderedDict()
        self.disk = DiskStates(directory, max_bytes) if directory is not None else None
        self._on_disk: dict[tuple[int, ...], Path] = {}

    @property
    def bytes_used(self) -> int:
        return sum(len(v) for v in self.entries.values())

    def longest(self, tokens: Sequence[int], limit: int) -> tuple[tuple[int, ...] | None, int]:
        """The kept prompt sharing the longest prefix with `tokens` (at most `limit` tokens), and its length.
        Kept in memory or, with a directory, on disk."""
        self._on_disk = self.disk.index() if self.disk is not None else {}
        best, best_len = None, 0
        for key in [*self.entries, *self._on_disk]:
            n = common_prefix(key, tokens, limit)
            if n > best_len:
                best, best_len = key, n
        return best, best_len

    def get(self, key: tuple[int, ...]) -> bytes | None:
        """A kept state; None if it was on disk and is gone or damaged."""
        if key in self.entries:
            self.entries.move_to_end(key)
            return self.entries[key]
        path = self._on_disk.get(key)
        state = self.disk.load(path) if self.disk is not None and path is not None else None
        if state is not None:
            self._remember(key, state)
        return state

    def put(self, tokens: Sequence[int], state: bytes) -> None:
        self._remember(tuple(tokens), state)
        if self.disk is not None:
            self.disk.save(tokens, state)

    def forget(self, key: tuple[int, ...]) -> None:
        """A state the backend could not restore: never offered again."""
        self.entries.pop(key, None)
        path = self._on_disk.pop(key, None)
        if path is not None and self.disk is not None:
            self.disk.remove(path)

    def resize(self, max_bytes: int) -> None:
        """Keep at most `max_bytes` in memory from now on (the least recently used states go first)."""
        self.max_bytes = max_bytes
        self._evict()

    def _remember(self, key: tuple[int, ...], state: bytes) -> None:
        if len(state) > self.max_bytes:
            return
        self.entries[key] = state
        self.entries.move_to_end(key)
        self._evict()

    def _evict(self) -> None:
        while self.entries and self.bytes_used > self.max_bytes:
            self.entries.popitem(last=False)


def keep_prompts(backend, max_bytes: int) -> None:
    """Let a backend keep earlier prompts' KV states in up to `max_bytes` of memory from now on (0: none), loading
    nothing again: a smaller budget drops the least recently used states, a larger one keeps what is held. (A
    cache made here is in memory only.)"""
    if max_bytes <= 0:
        backend.prefix_cache = None
    elif backend.prefix_cache is None:
        backend.prefix_cache = PrefixCache(max_bytes)
    else:
        backend.prefix_cache.resize(max_bytes)


def reuse_prefix(backend, cache: PrefixCache | None, tokens: Sequence[int]) -> int:
    """Bring the backend's KV cache to the longest prefix of `tokens` it can have without reading; return its
    length. At least the last token is always left to read, for its logits."""
    limit = len(tokens) - 1
    live = common_prefix(backend.tokens, tokens, limit)
    if cache is not None:
        key, stored = cache.longest(tokens, limit)
        if key is not None and stored > live:
            state = cache.get(key)
            if state is not None:
                try:
                    backend.load_state(key, state)
                    live = stored
                except RuntimeError:  # not a state of this model and context: read the prompt instead
                    cache.forget(key)
                    live = common_prefix(backend.tokens, tokens, limit)
    backend.truncate(live)
    return live


def remove_abandoned(base: Path, keep: Path) -> None:
    """Remove the folders of KV states under `base` that no process has used for ABANDONED_SECONDS, except `keep`.
    Each model file, llama.cpp version and CPU has a folder of its own (`LlamaBackend.states_dir`), so an upgrade
    leaves the old one behind, up to `--prefix-cache-mb` of states nothing will read again. A folder in use keeps
    fresh times (every state read or written is touched), another CPU's sharing the cache directory too. Only
    state files and their temporary files are removed, and the folder once nothing else is in it."""
    cutoff = time.time() - ABANDONED_SECONDS
    try:
        folders = [p for p in Path(base).iterdir() if p.is_dir() and p != Path(keep)]
    except OSError:
        return
    for folder in folders:
        try:
            ours = [p for p in folder.iterdir() if p.name.endswith((SUFFIX, TMP_SUFFIX))]
            newest = max((p.stat().st_mtime for p in ours), default=folder.stat().st_mtime)
        except OSError:
            continue
        if newest >= cutoff:
            continue
        for path in ours:
            with contextlib.suppress(OSError):
                path.unlink()
        with contextlib.suppress(OSError):
            folder.rmdir()  # fails, and keeps it, if anything else is in it
