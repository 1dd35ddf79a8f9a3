"""A byte-level model that writes exactly the edit its instruction spells out: for language-server tests where
what arrives in the document must be known to the character, at a pace the test chooses.

The instruction `scripted: [["old", "new"], ...]` (JSON after the prefix) makes the answer the function with
each `old` replaced by its `new`; any other instruction gives the function back unchanged. `scripted-near:` with
the same list gives it back unchanged too, but offers each replacement as the runner-up (logit 9 against 10) at
the byte where it parts from the unchanged answer, and writes it surely once it is taken (a second look's
fork). An answer the rewrite starts again from a line of its own goes on from that line in the answer. Every
byte is a token (256 ends the answer), so prompt lookup drafts copies as it does for a real model.
`EDITSPEC_SCRIPTED_DELAY` (seconds) is slept in every model pass of the answer, so that a test can edit,
cancel or shut down while it streams. An answer that has written `CRASH` ends the process at once (exit code
70), as a server killed half-way through a rewrite.
"""

from __future__ import annotations

import json
import os
import re
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from tests.fakes import FakeBackend

END = 256
ANSWER_START = b"<|im_start|>assistant\n```"
# The code block's fence is three backticks or more (more when the code holds backticks); the answer closes with
# three, as the coder model does.
CODE = re.compile(r"Code to edit[^\n]*:\n(`{3,})[a-z]*\n(.*?)\n\1\n\nInstruction: (.*?)\nWrite the complete", re.DOTALL)


def scripted_answers(prompt: str) -> list[str]:
    """The answer to an edit prompt, then its near alternatives (see the module's text), closing fences included."""
    found = CODE.search(prompt)
    if found is None:
        return ["```\n"]
    _, code, instruction = found.groups()
    if instruction.startswith("scripted:"):
        for old, new in json.loads(instruction[len("scripted:") :]):
            code = code.replace(old, new)
    near = []
    if instruction.startswith("scripted-near:"):
        near = [code.replace(old, new) for old, new in json.loads(instruction[len("scripted-near:") :])]
    return [text + "\n```\n" for text in (code, *near)]


class ScriptedBackend(FakeBackend):
    """FakeBackend's KV bookkeeping (prefill, evaluate, truncate, states) with scripted logits."""

    n_vocab = END + 1
    bos_token = -1
    eos_token = END
    path = Path("scripted.gguf")

    def __init__(self, delay: float = 0.0, n_ctx: int | None = None):
        self.delay = delay
        self.n_ctx = n_ctx or int(os.environ.get("EDITSPEC_SCRIPTED_CTX", 1 << 16))
        self.tokens: list[int] = []
        self.prefix_cache = None
        self.last_reused = self.passes = self.read = 0
        self.end_token = END
        self._answers: dict[bytes, bytes] = {}

    # -- text ----------------------------------------------------------------------------------------------
    def tokenize(self, text: str, *, add_special: bool = False, parse_special: bool = True) -> list[int]:
        return list(text.encode("utf-8"))

    def token_bytes(self, token: int) -> bytes:
        return bytes([token]) if token < END else b""

    def detokenize(self, tokens: Sequence[int]) -> str:
        return b"".join(self.token_bytes(t) for t in tokens).decode("utf-8", errors="replace")

    def token_text(self, token: int) -> str:
        return self.token_bytes(token).decode("utf-8", errors="replace")

    def chat_template(self) -> str | None:
        return None  # editspec's ChatML fallback

    def metadata(self, key: str) -> str | None:
        return None

    def identity(self) -> dict:
        return {"model": "scripted"}

    def close(self) -> None:
        pass

    # -- the model -----------------------------------------------------------------------------------------
    def logits_after(self, history: Sequence[int]) -> np.ndarray:
        row = np.zeros(self.n_vocab, dtype=np.float32)
        data = bytes(t for t in history if t < END)
        start = data.rfind(ANSWER_START)
        if start < 0:
            row[ord(" ")] = 1.0
            return row
        start = data.index(b"\n", start + len(ANSWER_START)) + 1  # after the fence's language line
        prompt = data[:start]
        answers = self._answers.get(prompt)
        if answers is None:
            texts = scripted_answers(prompt.decode("utf-8", errors="replace"))
            answers = self._answers[prompt] = [t.encode() for t in texts]
        written, first = data[start:], answers[0]
        if written.endswith(b"CRASH"):
            os._exit(70)
        row[END] = 1.0
        for answer in answers:
            at = _going_on(answer, written)
            if at is not None and at < len(answer):
                parts_at = next((i for i, (a, b) in enumerate(zip(answer, first, strict=False)) if a != b), len(first))
                logit = 9.0 if at == parts_at else 10.0
                row[answer[at]] = max(row[answer[at]], logit)
        if row.max() == 1.0:
            row[END] = 10.0
        return row

    def _answering(self) -> bool:
        return bytes(t for t in self.tokens[-4096:] if t < END).rfind(ANSWER_START) >= 0

    def evaluate(self, tokens: Sequence[int]) -> np.ndarray:
        if self.delay and self._answering():
            time.sleep(self.delay)
        return super().evaluate(tokens)


def _going_on(answer: bytes, written: bytes) -> int | None:
    """Where in `answer` the model is, having written `written`: after it, where the answer begins with it; or,
    where the rewrite made the model start again from a line of its own (a function's own header, after an answer
    that opened with another of the file's definitions), after the longest piece of `written` from a line's start
    on that the answer has at a line's start, as a model that goes on from there."""
    if answer.startswith(written):
        return len(written)
    starts = [0] + [i + 1 for i, byte in enumerate(written) if byte == ord("\n")]
    for start in starts:  # longest first
        piece = written[start:]
        at = answer.find(b"\n" + piece) + 1 if piece.strip() else 0
        if at > 0:
            return at + len(piece)
    return None


def scripted_decoder(options=None):
    from editspec.decoding import Decoder

    return Decoder(ScriptedBackend(float(os.environ.get("EDITSPEC_SCRIPTED_DELAY", "0"))), options)
