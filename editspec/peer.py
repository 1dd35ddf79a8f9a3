"""llama.cpp's own server as a peer in `editspec bench`: the strongest prompt-lookup speculation outside editspec.

When $LLAMA_SERVER names a `llama-server` binary (README: how to build it from the llama.cpp sources that
llama-cpp-python's sdist vendors), the benchmark runs it on loopback with the same model and threads, plain and
with `--spec-type ngram-mod`. Each case sends the very prompt tokens the other methods read, greedy,
without the server's prompt cache; speeds are decode-only, from the server's own `timings`.

Every request gets a server process of its own (`FreshServer`): ngram-mod keeps one pool of n-grams for all the
requests a process serves, the answers' tokens included, and draws drafts of 48 tokens or more from it; a second
run of the same prompt then drafts the first run's answer, and the benchmark's repeats (and the story's rounds)
would measure that memory, not the speculation.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

from .models import EXTRA_BUFFERS_ENV, extra_buffers_allowed

SERVER_ENV = "LLAMA_SERVER"
SPEC_ARGS = {"llama_server_plain": [], "llama_server_ngram_mod": ["--spec-type", "ngram-mod"]}
FENCE_STOP = "\n```"


def server_binary() -> Path | None:
    """The binary $LLAMA_SERVER names, or None when unset; a clear error when it names nothing runnable."""
    value = os.environ.get(SERVER_ENV)
    if not value:
        return None
    path = Path(value).expanduser()
    if not (path.is_file() and os.access(path, os.X_OK)):
        raise FileNotFoundError(f"${SERVER_ENV} is {value}, which is not an executable file")
    return path


class PeerError(RuntimeError):
    """llama-server would not start or serve: what it said, for the user."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LlamaServer:
    """One llama-server process on 127.0.0.1, stopped by `close` (or leaving the `with` block)."""

    def __init__(self, binary: Path, model: Path, *, threads: int, n_ctx: int, extra: list[str], timeout=300.0):
        self.port = _free_port()
        self.log = tempfile.TemporaryFile()
        args = [str(binary), "-m", str(model), "--host", "127.0.0.1", "--port", str(self.port)]
        args += ["-t", str(threads), "-tb", str(threads), "-c", str(n_ctx), "-np", "1", "--no-webui", *extra]
        # As editspec loads the model itself: without llama.cpp's extra buffer types where the CPU advertises AMX
        # (a VM that advertises it and forbids it killed the server with SIGILL on its first product).
        args += [] if extra_buffers_allowed() else ["--no-repack"]
        self.process = subprocess.Popen(args, stdout=self.log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + timeout
        while True:
            if self.process.poll() is not None:
                raise PeerError(f"llama-server ({binary}) {_ended(self.process.returncode)}: {self._tail()}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/health", timeout=5) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                self.close()
                raise PeerError(f"llama-server ({binary}) did not become ready in {timeout:.0f} s: {self._tail()}")
            time.sleep(0.25)

    def _tail(self) -> str:
        self.log.seek(0)
        return self.log.read().decode(errors="replace")[-2000:]

    def complete(self, prompt: list[int], max_tokens: int, fenced: bool) -> dict:
        body = {
            "prompt": prompt,
            "n_predict": max_tokens,
            "temperature": 0.0,
            "top_k": 1,
            "cache_prompt": False,
            "return_tokens": True,
            "stream": False,
        }
        if fenced:
            body["stop"] = [FENCE_STOP]
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/completion",
            data=json.dumps(body).encode(),
            headers={"Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=600) as r:
            return json.loads(r.read())

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=20)
        self.log.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _ended(code: int) -> str:
    if code >= 0:
        return f"exited with {code}"
    name = signal.Signals(-code).name if -code in signal.valid_signals() else f"signal {-code}"
    why = (
        f" (an instruction this CPU refuses: a build for another machine, or AMX that the VM forbids; "
        f"{EXTRA_BUFFERS_ENV}=0 keeps llama.cpp's extra buffer types off)"
        if -code == signal.SIGILL
        else ""
    )
    return f"was killed by {name}{why}"


# The warm-up request a fresh process serves first: the prompt's first 8 tokens and 8 written after them, fewer
# together than ngram-mod's n-gram (24 tokens), so it leaves nothing for ngram-mod to draft from.
WARM_UP_TOKENS = 8


class FreshServer:
    """llama-server with no memory between requests: each `complete` starts a process (about 2 s here), warms it
    up on a request too short to leave anything to draft from, sends the request and stops the process."""

    def __init__(self, binary: Path, model: Path, *, threads: int, n_ctx: int, extra: list[str]):
        self.start = lambda: LlamaServer(binary, model, threads=threads, n_ctx=n_ctx, extra=extra)

    def complete(self, prompt: list[int], max_tokens: int, fenced: bool) -> dict:
        with self.start() as server:
            server.complete(prompt[:WARM_UP_TOKENS], WARM_UP_TOKENS, False)
            return server.complete(prompt, max_tokens, fenced)
