"""The engine on the real bundled model: agreement with plain greedy, up to llama.cpp's batch numerics."""

import numpy as np
import pytest

from editspec import calibration, prompts
from editspec.decoding import DecodeOptions, Decoder

# llama.cpp's logits for a batch differ slightly from one-token-at-a-time logits on the CPU, so a
# speculative run may take the other branch where the plain run's top two logits are this close.
NEAR_TIE = 0.5

EDITS = [
    (
        "def area(w, h):\n    result = w * h\n    return result\n\n\ndef perimeter(w, h):\n"
        "    result = 2 * (w + h)\n    return result\n",
        "Rename the parameter w to width in both functions.",
    ),
    (
        "class Stack:\n    def __init__(self):\n        self.items = []\n\n    def push(self, item):\n"
        "        self.items.append(item)\n\n    def pop(self):\n        return self.items.pop()\n\n"
        "    def peek(self):\n        return self.items[-1]\n",
        "Add a method size that returns the number of items.",
    ),
    (
        "def mean(xs):\n    total = 0\n    for x in xs:\n        total += x\n    return total / len(xs)\n",
        "Return 0 when xs is empty.",
    ),
]


def plain_margin_at(backend, prompt, output, i):
    """The top-2 logit margin of one-at-a-time decoding before output[i]."""
    backend.truncate(0)
    logits = backend.prefill([*prompt, *output[:i]])[-1]
    top2 = np.sort(logits)[-2:]
    return float(top2[1] - top2[0])


@pytest.mark.parametrize("draft_length", [None, 8])
def test_speculative_greedy_agrees_with_plain_up_to_near_ties(backend, draft_length):
    plain = Decoder(backend, DecodeOptions(speculate=False, max_tokens=200))
    spec = Decoder(backend, DecodeOptions(max_tokens=200, draft_length=draft_length))
    accepted = 0
    for code, instruction in EDITS:
        prompt = backend.tokenize(prompts.edit_prompt(backend, code, instruction))
        backend.truncate(0)
        expected = plain.decode(prompt, stop=prompts.FenceStop(backend)).tokens
        backend.truncate(0)
        result = spec.decode(prompt, stop=prompts.FenceStop(backend))
        accepted += result.stats.accepted_tokens
        if result.tokens != expected:
            i = next(i for i, (a, b) in enumerate(zip(result.tokens, expected, strict=False)) if a != b)
            margin = plain_margin_at(backend, prompt, expected, i)
            assert margin < NEAR_TIE, f"diverged at token {i} where plain greedy was sure (margin {margin:.2f})"
    assert accepted > 20, "the drafts were never accepted: the comparison proves nothing"


def test_rollback_restores_the_cache(backend):
    prompt = backend.tokenize("def add(a, b):\n    return a + b\n")
    backend.truncate(0)
    first = backend.prefill(prompt)[-1]
    tok = int(np.argmax(first))
    after = backend.evaluate([tok])[0]
    backend.evaluate([5, 6, 7, 8])  # a rejected draft
    backend.truncate(len(prompt) + 1)
    assert backend.tokens == [*prompt, tok]
    again = backend.evaluate([int(np.argmax(after))])[0]
    backend.truncate(len(prompt) + 1)
    fresh = backend.evaluate([int(np.argmax(after))])[0]
    np.testing.assert_allclose(again, fresh, atol=1e-4)


def test_prefill_reuses_a_shared_prefix(backend):
    a = backend.tokenize("import os\nimport sys\n\ndef main():\n    print(1)\n")
    b = backend.tokenize("import os\nimport sys\n\ndef other():\n    print(2)\n")
    backend.truncate(0)
    backend.prefill(a)
    reused = backend.prefill(b)[-1]
    backend.truncate(0)
    cold = backend.prefill(b)[-1]
    np.testing.assert_allclose(reused, cold, atol=1e-3)
    assert int(np.argmax(reused)) == int(np.argmax(cold))


def small_start():
    """The tiny model with 256 tokens of cache allocated at first, so that a few hundred tokens make it grow."""
    from editspec.backend import LlamaBackend

    class SmallStart(LlamaBackend):
        INITIAL_CONTEXT = 256

    return SmallStart("tiny", n_ctx=2048)


def test_the_cache_grows_as_needed_and_gives_the_same_logits(backend):
    text = open(__file__.replace("test_real_model.py", "../editspec/engine.py")).read()
    tokens = backend.tokenize(text)[:700]
    small = small_start()
    assert small.allocated == 256 and small.n_ctx == 2048
    backend.truncate(0)
    # Grown in the prompt, then in a pass, keeping what the cache held: the logits are the full-size cache's.
    assert np.array_equal(small.prefill(tokens[:300]), backend.prefill(tokens[:300]))
    assert small.allocated >= 300
    before = small.allocated
    small.prefill(tokens[:before])  # fills the cache exactly: no growth yet
    assert small.allocated == before
    backend.prefill(tokens[:before])
    assert np.array_equal(small.evaluate(tokens[before : before + 8]), backend.evaluate(tokens[before : before + 8]))
    assert small.allocated > before and small.tokens == backend.tokens == tokens[: before + 8]
    # A saved state longer than the cache is restored into a grown one.
    fresh = small_start()
    fresh.load_state(backend.tokens, backend.save_state())
    assert fresh.tokens == backend.tokens
    assert np.array_equal(fresh.evaluate(tokens[600:604]), backend.evaluate(tokens[600:604]))
    # Never past the context the backend was opened with.
    with pytest.raises(ValueError, match="context is full"):
        fresh.prefill(tokens[:8] * 300)
    for b in (small, fresh):
        b.close()


def test_calibration_is_measured_and_cached(backend):
    costs = calibration.verify_seconds(backend)
    assert len(costs) == calibration.MAX_PASS + 1
    # Measured, not made up: a 33-token pass costs more than a 1-token pass, and far less than 33 of them.
    assert costs[1] > 0 and costs[1] * 1.2 < costs[33] < costs[1] * 33 / 1.5
    assert calibration.cache_file().is_file()
    assert calibration.verify_seconds(backend) == costs  # read back, not re-measured
    assert calibration.speedup_limit(costs) > 1.5


def test_speedup_limit_by_hand():
    # One token 10 ms; 4 tokens 20 ms (5 ms each, the best); 8 tokens 48 ms (6 ms each): the limit is 10 / 5.
    costs = [0.0, 0.010, 0.012, 0.016, 0.020, 0.030, 0.036, 0.042, 0.048]
    assert calibration.speedup_limit(costs) == pytest.approx(2.0)
