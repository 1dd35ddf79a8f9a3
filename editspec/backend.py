"""The target (or draft) model through llama-cpp-python's low-level API.

Why not the high-level `Llama` class: it cannot ask for logits at only some positions (prompt lookup in
llama-cpp-python forces `logits_all=True`, computing and copying logits for every prompt token), and it
hides `use_extra_bufts`. Here one `llama_decode` per round verifies the pending token plus the draft, with
logits only at those positions, and the KV cache is rolled back with `llama_memory_seq_rm`, checked.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
from collections.abc import Sequence
from pathlib import Path

import llama_cpp
import llama_cpp.llama_cpp as L
import numpy as np

from .kernels import setting_for
from .models import (
    ModelError,
    PrepareProgress,
    cpu_identity,
    extra_buffers_allowed,
    gpu_layers,
    resolve_model_path,
)
from .prefix_cache import PrefixCache, remove_abandoned, reuse_prefix

_quiet_logger = None
DEFAULT_MAX_CONTEXT = 16384  # tokens: room for a function of well over 1,000 lines and its answer


def _silence_llama_logs() -> None:
    """llama.cpp prints hundreds of loading lines to stderr; keep only errors."""
    global _quiet_logger
    if _quiet_logger is None:

        @ctypes.CFUNCTYPE(None, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)
        def _log(level, text, user_data):  # GGML_LOG_LEVEL_ERROR = 4
            if level == 4 and os.environ.get("EDITSPEC_DEBUG"):
                os.write(2, text)

        _quiet_logger = _log
        L.llama_log_set(_quiet_logger, ctypes.c_void_p(0))
        L.llama_backend_init()


class LlamaBackend:
    # Tokens of KV cache allocated at first. Allocating (and clearing) the whole context up front cost a one-shot
    # rewrite of the coder model 0.3-1.3 s of its start (more where the memory is fresh to the process) for room
    # it seldom uses, and 4,096 tokens still 0.3 s more than 1,024 (which holds a typical prompt and its answer);
    # a longer prompt or answer grows the cache, keeping what it holds (the logits do not depend on the cache's
    # size), at a few hundredths of a second per doubling.
    INITIAL_CONTEXT = 1024

    def __init__(
        self,
        model_path: str | os.PathLike | None = None,
        *,
        n_ctx: int | None = None,
        n_threads: int | None = None,
        n_batch: int = 512,
        prefix_cache_bytes: int = 0,
        prefix_cache_dir: str | os.PathLike | None = None,
        n_gpu_layers: int | None = None,
        on_prepare: PrepareProgress | None = None,
    ):
        """`model_path`: a model name (`coder`, `tiny`) or a GGUF path; None: $EDITSPEC_MODEL, else `coder`.
        `n_gpu_layers`: layers offloaded to a GPU (-1: all; None: $EDITSPEC_GPU_LAYERS, else 0). `on_prepare`:
        progress while a named model is assembled on first use. `prefix_cache_dir`: where kept prompt states also go
        on disk, for later processes (in a folder of this model file's own; None: memory only)."""
        _silence_llama_logs()
        self.path = resolve_model_path(model_path, progress=on_prepare)
        self.n_threads = n_threads or os.cpu_count() or 1
        self.n_gpu_layers = gpu_layers(n_gpu_layers)
        # llama.cpp's CPU kernels for this model on this machine (see kernels.py), set before its first product.
        self.tiled_matmul = setting_for(self.path, self.n_threads)
        params = L.llama_model_default_params()
        params.use_extra_bufts = extra_buffers_allowed()
        params.n_gpu_layers = self.n_gpu_layers if self.n_gpu_layers >= 0 else 2**31 - 1
        self.model = L.llama_model_load_from_file(str(self.path).encode(), params)
        if not self.model:
            raise ModelError(f"llama.cpp could not load {self.path}: is it a complete GGUF of a supported model?")
        self.vocab = L.llama_model_get_vocab(self.model)
        self.n_vocab = L.llama_vocab_n_tokens(self.vocab)
        if n_ctx is None:  # as long as the model was trained for, within what a rewrite can sensibly need
            n_ctx = min(L.llama_model_n_ctx_train(self.model), DEFAULT_MAX_CONTEXT) or 4096
        ctx_params = L.llama_context_default_params()
        ctx_params.n_batch = ctx_params.n_ubatch = n_batch
        ctx_params.n_threads = ctx_params.n_threads_batch = self.n_threads
        ctx_params.no_perf = True
        # Flash attention off, as llama-cpp-python sets it: the same numerics as its plain decoding.
        ctx_params.flash_attn_type = L.LLAMA_FLASH_ATTN_TYPE_DISABLED
        self._ctx_params = ctx_params
        self.n_ctx = n_ctx  # what a prompt and its answer may fill; the cache is allocated as they need it
        self.ctx = None
        self.tokens: list[int] = []  # what the KV cache holds
        try:
            self._allocate(min(n_ctx, self.INITIAL_CONTEXT))
        except ModelError:
            L.llama_model_free(self.model)
            raise
        self.n_batch = n_batch
        self.batch = L.llama_batch_init(n_batch, 0, 1)
        self._pieces: dict[int, bytes] = {}
        # Earlier prompts' KV states, for prefix reuse across requests (0: only the live cache is reused).
        states = self.states_dir(prefix_cache_dir) if prefix_cache_dir and prefix_cache_bytes > 0 else None
        if states is not None:
            remove_abandoned(Path(prefix_cache_dir), keep=states)
        self.prefix_cache = PrefixCache(prefix_cache_bytes, states) if prefix_cache_bytes > 0 else None
        self.last_reused = 0  # how many prompt tokens the last prefill did not have to read

    # -- the Backend protocol ------------------------------------------------------------------

    def prefill(self, tokens: Sequence[int], draft: Sequence[int] = ()) -> np.ndarray:
        """Make the cache hold `tokens + draft`, reading only what no kept prefix already holds; logits after
        the last prompt token and after each draft token."""
        tokens = list(tokens)
        if not tokens:
            raise ValueError("cannot prefill an empty prompt")
        common = self.last_reused = reuse_prefix(self, self.prefix_cache, tokens)
        self.reserve(len(tokens) + len(draft))  # before reading: grown while it holds only the reused part
        rest = [*tokens[common:], *draft]
        wanted_from = len(rest) - len(draft) - 1  # the first position whose logits we need
        rows = []
        for start in range(0, len(rest), self.n_batch):
            chunk = rest[start : start + self.n_batch]
            rows.append(self._decode(chunk, max(0, wanted_from - start)))
        if self.prefix_cache is not None and common < len(tokens) - 1:
            # The key is what the cache holds, draft included: a later prompt reuses only what matches.
            self.prefix_cache.put(self.tokens, self.save_state())
        return np.concatenate(rows)

    def _allocate(self, size: int) -> None:
        """A context with room for `size` tokens, holding what the current one holds (which is then freed)."""
        held = list(self.tokens) if self.ctx else []
        state = self._state_buffer() if held else None
        self._ctx_params.n_ctx = size
        ctx = L.llama_init_from_model(self.model, self._ctx_params)
        if not ctx:
            raise ModelError(f"llama.cpp could not create a context of {size} tokens for {self.path}")
        if self.ctx:
            L.llama_free(self.ctx)
        self.ctx, self.memory, self.allocated = ctx, L.llama_get_memory(ctx), L.llama_n_ctx(ctx)
        self.tokens = []
        if state is not None:
            self._restore(held, state)

    def reserve(self, n_tokens: int) -> None:
        """Room for `n_tokens` in the cache (at most `n_ctx`): grown by at least doubling, so seldom."""
        if n_tokens > self.allocated:
            self._allocate(min(self.n_ctx, max(n_tokens, 2 * self.allocated)))

    def _state_buffer(self):
        size = L.llama_state_seq_get_size(self.ctx, 0)
        buf = (ctypes.c_uint8 * size)()
        written = L.llama_state_seq_get_data(self.ctx, buf, size, 0)
        if written != size:
            raise RuntimeError(f"llama.cpp saved {written} of {size} bytes of KV state")
        return buf

    def _restore(self, tokens: Sequence[int], buf) -> None:
        L.llama_memory_seq_rm(self.memory, 0, 0, -1)
        if L.llama_state_seq_set_data(self.ctx, buf, len(buf), 0) != len(buf):
            self.tokens = []
            raise RuntimeError("llama.cpp could not restore a saved KV state")
        self.tokens = list(tokens)

    def save_state(self) -> bytes:
        return bytes(self._state_buffer())

    def load_state(self, tokens: Sequence[int], state: bytes) -> None:
        """Replace the KV cache with a saved state holding `tokens`."""
        self.reserve(len(tokens))
        self._restore(tokens, (ctypes.c_uint8 * len(state)).from_buffer_copy(state))

    def evaluate(self, tokens: Sequence[int]) -> np.ndarray:
        if len(tokens) > self.n_batch:
            raise ValueError(f"cannot verify {len(tokens)} tokens in one pass (batch size {self.n_batch})")
        return self._decode(list(tokens), 0)

    def truncate(self, n_tokens: int) -> None:
        if n_tokens >= len(self.tokens):
            return
        if not L.llama_memory_seq_rm(self.memory, 0, n_tokens, -1):
            raise RuntimeError(f"llama.cpp refused to roll the KV cache back to {n_tokens} tokens")
        del self.tokens[n_tokens:]
        last = L.llama_memory_seq_pos_max(self.memory, 0)
        if last != n_tokens - 1:
            raise RuntimeError(f"KV cache rollback left position {last}, expected {n_tokens - 1}")

    def is_end_of_generation(self, token: int) -> bool:
        return bool(L.llama_vocab_is_eog(self.vocab, token))

    # -- the rest ------------------------------------------------------------------------------

    def _decode(self, tokens: list[int], logits_from: int) -> np.ndarray:
        """Append `tokens` to the cache; logits after each of them from index `logits_from` on."""
        n, start = len(tokens), len(self.tokens)
        if start + n > self.n_ctx:
            raise ValueError(f"the context is full ({self.n_ctx} tokens): shorten the prompt or --max-tokens")
        self.reserve(start + n)
        b = self.batch
        b.n_tokens = n
        for i, tok in enumerate(tokens):
            b.token[i] = tok
            b.pos[i] = start + i
            b.n_seq_id[i] = 1
            b.seq_id[i][0] = 0
            b.logits[i] = i >= logits_from
        rc = L.llama_decode(self.ctx, b)
        if rc != 0:
            raise RuntimeError(f"llama_decode failed with code {rc}")
        self.tokens.extend(tokens)
        rows = max(0, n - logits_from)
        if rows == 0:
            return np.empty((0, self.n_vocab), dtype=np.float32)
        ptr = L.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(ptr, shape=(rows, self.n_vocab)).copy()

    def tokenize(self, text: str, *, add_special: bool = False, parse_special: bool = True) -> list[int]:
        data = text.encode("utf-8")
        capacity = len(data) + 16
        buf = (L.llama_token * capacity)()
        n = L.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_special, parse_special)
        if n < 0:
            capacity = -n
            buf = (L.llama_token * capacity)()
            n = L.llama_tokenize(self.vocab, data, len(data), buf, capacity, add_special, parse_special)
        return list(buf[:n])

    def token_bytes(self, token: int) -> bytes:
        piece = self._pieces.get(token)
        if piece is None:
            buf = ctypes.create_string_buffer(64)
            n = L.llama_token_to_piece(self.vocab, token, buf, 64, 0, False)
            if n < 0:
                buf = ctypes.create_string_buffer(-n)
                n = L.llama_token_to_piece(self.vocab, token, buf, -n, 0, False)
            piece = self._pieces[token] = buf.raw[:n]
        return piece

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def metadata(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = L.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode("utf-8", errors="replace") if n >= 0 else None

    def chat_template(self) -> str | None:
        raw = L.llama_model_chat_template(self.model, None)
        return raw.decode("utf-8") if raw else None

    def token_text(self, token: int) -> str:
        raw = L.llama_vocab_get_text(self.vocab, token)
        return raw.decode("utf-8", errors="replace") if raw else ""

    @property
    def bos_token(self) -> int:
        return L.llama_vocab_bos(self.vocab)

    @property
    def eos_token(self) -> int:
        return L.llama_vocab_eos(self.vocab)

    def identity(self) -> dict:
        """What a calibration depends on: the model file, the CPU, how many threads run it, how much runs on a
        GPU. (A cache directory that moves to another machine, or that unlike nodes of a cluster share, keeps each
        CPU's costs and what its rewrites taught apart.)"""
        stat = Path(self.path).stat()
        return {
            "model": str(self.path),
            "size": stat.st_size,
            "mtime": int(stat.st_mtime),
            "cpu": cpu_identity(),
            "threads": self.n_threads,
            "context": "no-flash-attn/1",
            "tiled_matmul": self.tiled_matmul,
            "calibration": "median-of-shuffled-sweeps",  # how it was measured: an older calibration is measured again
            "gpu_layers": self.n_gpu_layers,
        }

    def states_dir(self, base: str | os.PathLike) -> Path:
        """The folder under `base` for KV states of this model file as this llama.cpp computes them on this CPU
        (another CPU's kernels compute slightly different numbers: a state from them would make a restored prompt's
        answer differ from a cold one at near-ties)."""
        ident = self.identity()
        kept = {k: ident[k] for k in ("model", "size", "mtime", "cpu", "context", "tiled_matmul", "gpu_layers")}
        kept["llama_cpp"] = getattr(llama_cpp, "__version__", "?")
        digest = hashlib.sha256(json.dumps(kept, sort_keys=True).encode()).hexdigest()[:16]
        return Path(base) / f"{Path(self.path).stem}-{digest}"

    def close(self) -> None:
        if getattr(self, "ctx", None):
            L.llama_batch_free(self.batch)
            L.llama_free(self.ctx)
            L.llama_model_free(self.model)
            self.ctx = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
