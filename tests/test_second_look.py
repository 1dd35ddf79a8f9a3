"""The second look: an answer that writes the code back unchanged is forked where the model nearly wrote something
else, and the likeliest fork that changes the code (and passes the checks) is kept.

The model here is byte-level and scripted with several answers: the first is the one greedy writes; each other one
becomes possible only at the byte where it parts from the first, with a logit of its own there (how nearly the
model wrote it), and is followed surely after that. So which forks exist, and how likely each is, is known."""

from __future__ import annotations

import numpy as np
import pytest

from editspec.acceptance import GreedyAcceptance
from editspec.decoding import DecodeOptions, Decoder
from editspec.engine import generate, score_tokens
from editspec.locate import definitions, find_by_name, language_for, written_back
from editspec.policy import FixedDraftLength
from editspec.rewrite import Rewriter, SourceFile
from tests.fakes import FakeBackend
from tests.scripted import ANSWER_START, END, ScriptedBackend

PY = language_for("x.py")
SOURCE = (
    "def transcribe(dna):\n    rna = ''\n    for i in range(len(dna) - 1):\n        rna += dna[i]\n    return rna\n"
)
FIXED = SOURCE.replace("range(len(dna) - 1)", "range(len(dna))")
COMMENTED = SOURCE.replace("    return rna\n", "    # done\n    return rna\n")
BROKEN = SOURCE.replace("    return rna\n", "    return (rna\n")
IMPORTED = "import os\n\n" + SOURCE
TRAILING = SOURCE.replace("    return rna\n", "    return rna  \n")


class ForkingBackend(ScriptedBackend):
    """Answers `scripts[0]` greedily; `scripts[k]` (k > 0) is offered, with logit `near[k]` against the first's
    10, at the byte where it parts from the first (or from `scripts[parents[k]]`), and written surely after that."""

    def __init__(self, scripts: list[str], near: list[float], parents: list[int] | None = None):
        super().__init__()
        self.scripts = [(s + "```\n").encode() for s in scripts]
        self.near = [10.0, *near]
        self.parents = parents or [0] * len(scripts)

    def logits_after(self, history) -> np.ndarray:
        data = bytes(t for t in history if t < END)
        start = data.rfind(ANSWER_START)
        if start < 0:
            return super().logits_after(history)
        written = data[data.index(b"\n", start + len(ANSWER_START)) + 1 :]
        row = np.zeros(self.n_vocab, dtype=np.float32)
        row[END] = 1.0
        for k, (script, near, parent) in enumerate(zip(self.scripts, self.near, self.parents, strict=True)):
            if not script.startswith(written) or len(written) >= len(script):
                continue
            first = self.scripts[parent]
            parts_at = next((i for i, (a, b) in enumerate(zip(script, first, strict=False)) if a != b), len(first))
            if k and len(written) < parts_at:
                continue  # its parent's byte, which its parent offers (as likely as it is there)
            logit = near if len(written) == parts_at else 10.0
            row[script[len(written)]] = max(row[script[len(written)]], logit)
        return row


def rewrite_with(scripts, near, second_look=True, finish_refused=False):
    backend = ForkingBackend(scripts, near)
    decoder = Decoder(backend, DecodeOptions(draft_length=4), verify_seconds=[0.0] + [1.0] * 40, policy_state={})
    source = SourceFile.from_bytes(SOURCE.encode())
    target = find_by_name(definitions(SOURCE.encode(), PY), "transcribe")
    rewriter = Rewriter(decoder, second_look=second_look, finish_refused=finish_refused)
    return rewriter.rewrite(source, PY, target, "Fix the off-by-one.")


def test_an_unchanged_answer_gets_the_likeliest_fork_that_changes_the_code():
    # A comment and other spacing are likelier forks than the fix, but leave the code as it was; the broken one
    # is likelier too, but does not parse. What is left is the fix.
    spaced = SOURCE.replace("rna += dna[i]", "rna  +=  dna[i]")
    result = rewrite_with([SOURCE, FIXED, COMMENTED, spaced], near=[8.0, 9.5, 9.7])
    assert result.new_text == FIXED
    assert result.second_look["forked_at_line"] == 3
    assert result.second_look["first_answer"] == SOURCE
    assert result.second_look["tried"] == 3
    assert result.problem() is None and not result.unchanged
    assert "".join(p.text for p in result.pieces) == FIXED  # the pieces are of the answer kept
    assert result.trace["output"].startswith(FIXED) and result.trace["second_look"]
    assert result.unchanged_note() is None
    note = result.second_look_note("--no-second-look keeps the first answer")
    assert note.startswith("the model first wrote transcribe back unchanged") and "from line 3 of" in note
    assert note.endswith(
        "If the code already did what you asked, keep it as it was: --no-second-look keeps the first answer"
    )


def test_every_fork_starts_from_the_first_answers_state_and_reads_only_its_own_token():
    # The likeliest fork parts at line 4, the next at line 5: written after the first, it would re-read the first
    # answer from line 4 to line 5 had the first fork's tokens replaced it in the cache.
    spaced = SOURCE.replace("rna += dna[i]", "rna  +=  dna[i]")
    backend = ForkingBackend([SOURCE, FIXED, COMMENTED, spaced], [8.0, 9.5, 9.7])
    decoder = Decoder(backend, DecodeOptions(draft_length=4), verify_seconds=[0.0] + [1.0] * 40, policy_state={})
    target = find_by_name(definitions(SOURCE.encode(), PY), "transcribe")
    openings = []
    decode = decoder.decode
    decoder.decode = lambda prompt, **kw: openings.append(kw.get("opening_draft")) or decode(prompt, **kw)
    result = Rewriter(decoder).rewrite(SourceFile.from_bytes(SOURCE.encode()), PY, target, "Fix the off-by-one.")
    assert result.new_text == FIXED and result.second_look["tried"] == 3
    # A fork drafts no opening: its prompt is read but for its forced token, so the first pass is the policy's.
    assert openings[0] > 0 and openings[1:] == [0, 0, 0]
    assert backend.read == result.stats.prompt_tokens + 3  # the prompt once, then each fork's own first token
    assert backend.prefix_cache is None  # the request's kept prompts are back as they were (none here)


def _padded(code: str, before: str, line: str, n: int) -> str:
    """`code` with `n` copies of `line` put in front of `before`: a long answer, each byte a little unsure."""
    return code.replace(before, line * n + before)


def _forked_rewrite(scripts, near):
    backend = ForkingBackend(scripts, near)
    decoder = Decoder(backend, DecodeOptions(draft_length=4), verify_seconds=[0.0] + [1.0] * 40, policy_state={})
    target = find_by_name(definitions(SOURCE.encode(), PY), "transcribe")
    return backend, Rewriter(decoder).rewrite(SourceFile.from_bytes(SOURCE.encode()), PY, target, "Fix it.")


def test_a_fork_that_starts_likeliest_and_falls_behind_is_paused_not_written_whole():
    # The likeliest fork writes 40 more lines, each byte a little unsure, so it ends less likely than the fix,
    # which starts less likely. The fork is written only until the fix leads; the fix is kept, as before.
    padded = _padded(SOURCE, "    for i", "    unused = 0\n", 40)
    backend, result = _forked_rewrite([SOURCE, padded, FIXED], [9.9, 9.0])
    assert result.new_text == FIXED and result.second_look["tried"] == 2
    assert result.stats.generated_tokens < len(padded) - len("def transcribe(dna):\n")  # not written whole
    assert backend.read == result.stats.prompt_tokens + 2  # each fork read its forced token, nothing more


def test_a_paused_fork_goes_on_from_where_it_was_and_is_kept_whole():
    # The likeliest fork is paused when the other leads; that one then falls behind over 60 more lines, and the
    # first goes on from its pause (reading one token again, nothing before it) to be kept, written whole.
    padded = _padded(SOURCE, "    for i", "    unused = 0\n", 10)
    long_fix = _padded(FIXED, "    return rna", "    spare = 1\n", 60)
    backend, result = _forked_rewrite([SOURCE, padded, long_fix], [9.9, 9.5])
    assert result.new_text == padded and result.second_look["tried"] == 2
    assert backend.read == result.stats.prompt_tokens + 3  # two forks started, one resumed
    assert "".join(p.text for p in result.pieces) == padded
    assert result.trace["output"].startswith(padded)
    assert len(result.trace["tokens"]) == len(padded) + len("```")  # the trace holds every token, once


def test_with_force_the_second_look_still_knows_the_first_answer():
    # --force with no progress shown: the answer's text is kept all the same.
    result = rewrite_with([SOURCE, FIXED], near=[8.0], finish_refused=True)
    assert result.new_text == FIXED and result.second_look["first_answer"] == SOURCE


def test_of_two_forks_that_change_the_code_the_likelier_one_is_kept():
    other = SOURCE.replace("rna += dna[i]", "rna = rna + dna[i]")
    for near, kept in (([7.0, 8.0], FIXED), ([8.0, 7.0], other)):
        result = rewrite_with([SOURCE, other, FIXED], near=near)
        # The likelier fork goes first; the other could only be less likely, so it does not run.
        assert result.new_text == kept and result.second_look["tried"] == 1


def test_a_fork_stops_once_it_is_less_likely_than_the_best_one():
    quoted = SOURCE.replace("rna = ''", 'rna = ""')
    renamed = SOURCE.replace("for i in", "for j in")  # a little less likely, and parts later: it runs, then stops
    result = rewrite_with([SOURCE, quoted, renamed], near=[9.9, 9.8])
    assert result.new_text == quoted and result.second_look["tried"] == 2
    first, written = len(SOURCE) + 3, len(SOURCE) + 3 - SOURCE.index("''") + len(SOURCE) + 3 - SOURCE.index("i in")
    # The second fork stopped before its last line (both forks written whole: first + written, less a token or two).
    assert result.stats.generated_tokens < first + written - len("    return rna\n```\n")


def test_without_a_second_look_or_without_a_fork_that_changes_it_the_answer_is_the_code_unchanged():
    result = rewrite_with([SOURCE, FIXED], near=[8.0], second_look=False)
    assert result.unchanged and not result.changed and not result.second_look
    assert result.unchanged_note() == "the model wrote transcribe back unchanged; say more precisely what to change"
    assert result.second_look_note("--no-second-look") is None
    result = rewrite_with([SOURCE, COMMENTED.replace("# done", "pass"), BROKEN], near=[8.0, 9.0])
    assert result.new_text != SOURCE and result.second_look  # `pass` is code: a change
    result = rewrite_with([SOURCE, BROKEN, IMPORTED, COMMENTED, TRAILING], near=[8.0, 9.0, 9.5, 9.6])
    assert result.unchanged and not result.changed and not result.second_look


def test_an_answer_that_changes_the_code_gets_no_second_look():
    result = rewrite_with([FIXED, SOURCE], near=[9.9])
    assert result.new_text == FIXED and not result.second_look
    assert rewrite_with([COMMENTED, FIXED], near=[9.9]).new_text == COMMENTED  # a comment is a change


@pytest.mark.parametrize(
    "after, same",
    [
        (SOURCE, True),
        ("\n" + SOURCE.replace("\n", "   \n") + "\n\n", True),  # blank lines around, spaces at line ends
        (IMPORTED, True),
        ("from os import path\n" + SOURCE, True),
        (COMMENTED, False),
        (FIXED, False),
        (SOURCE.replace("    rna = ''", "    rna  = ''"), False),  # spacing inside a line is a change
        (SOURCE.replace("    ", "\t"), False),  # so is another indentation
    ],
)
def test_written_back(after, same):
    assert written_back(SOURCE, after, PY) is same


def test_scores_are_the_log_probabilities_of_the_tokens_and_of_the_runner_up():
    rows = np.array([[1.0, 3.0, 2.0, 0.0], [0.5, 0.5, 4.0, 1.0]])
    scores = score_tokens(rows.copy(), [1, 0])
    log_p = rows - np.log(np.exp(rows).sum(axis=1, keepdims=True))
    assert scores[0].logprob == pytest.approx(log_p[0, 1])
    assert (scores[0].alternative, scores[0].alternative_logprob) == (2, pytest.approx(log_p[0, 2]))
    # A token that is not the argmax (sampling): its alternative is the argmax.
    assert (scores[1].alternative, scores[1].logprob) == (2, pytest.approx(log_p[1, 0]))


@pytest.mark.parametrize("length", [0, 1, 3, 8])
def test_scores_follow_the_tokens_whatever_is_drafted(length):
    """Each emitted token's score is of the logits at its own position, speculating or not."""
    source = list(np.random.default_rng(3).integers(1, 40, size=50))
    backend = FakeBackend(seed=5, source=source)
    prompt = [1, 2, *source]
    from editspec.drafters import PromptLookupDrafter

    drafter = PromptLookupDrafter() if length else None
    policy = FixedDraftLength(length) if length else None
    gen = generate(backend, prompt, GreedyAcceptance(), drafter=drafter, policy=policy, max_tokens=40, scores=True)
    assert len(gen.scores) == len(gen.tokens) == 40
    history = list(prompt)
    for token, score in zip(gen.tokens, gen.scores, strict=True):
        row = backend.logits_after(history)
        log_p = row - np.log(np.exp(row - row.max()).sum()) - row.max()
        assert score.logprob == pytest.approx(log_p[token])
        assert score.alternative == int(np.argsort(-row)[1])
        history.append(token)
    assert generate(backend, prompt, GreedyAcceptance(), max_tokens=5).scores is None


@pytest.mark.parametrize("length, opening", [(0, 0), (3, 0), (8, 0), (3, 8)])
def test_every_token_reaches_the_callback_with_its_score_the_first_included(length, opening):
    """A fork pauses on the log-probability its callback sums: the first token (out of the prefill, with no
    opening copy as in every fork) must be in it, or a fork would pause late."""
    from editspec.drafters import PromptLookupDrafter

    source = list(np.random.default_rng(4).integers(1, 40, size=50))
    backend = FakeBackend(seed=6, source=source, copy_bias=4.0)
    seen, summed = [], []

    def on_tokens(tokens, rnd):
        seen.extend(tokens)
        summed.extend(score.logprob for score in rnd.scores)
        assert len(rnd.scores) == len(tokens)

    drafter = PromptLookupDrafter() if length else None
    policy = FixedDraftLength(length) if length else None
    prompt = [1, *source, *source[:6]]  # ends in a copy of the source: an opening has something to draft
    gen = generate(
        backend,
        prompt,
        GreedyAcceptance(),
        drafter=drafter,
        policy=policy,
        max_tokens=30,
        opening_draft=opening,
        on_tokens=on_tokens,
        scores=True,
    )
    assert gen.stats.opening_drafted == opening
    assert seen == gen.tokens and summed == [score.logprob for score in gen.scores]
    assert sum(summed) < 0.0  # scored tokens, not a sum of nothing


def test_a_fork_refused_as_it_goes_is_passed_over_not_taken_for_a_cancel():
    # This fork goes on to write a second `transcribe`: generation stops at once, as for any refused answer.
    twice = SOURCE + "\n\ndef transcribe(x):\n    return x\n"
    result = rewrite_with([SOURCE, twice, FIXED], near=[9.5, 8.0])
    assert result.new_text == FIXED and result.second_look["tried"] == 2
