"""The first line is out with the prompt: the opening copy is verified within the prefill."""

from contextlib import nullcontext
from pathlib import Path
from unittest.mock import patch

from editspec import prompts
from editspec.decoding import DecodeOptions, Decoder
from editspec.locate import definitions, find_by_name, language_for
from editspec.rewrite import Rewriter, SourceFile

SAMPLE = Path(__file__).resolve().parents[1] / "samples" / "shapes.py"


def first_progress(backend, name: str, instruction: str, opening: int | None = None, code: str | None = None):
    """The text of the first progress report of a rewrite (of samples/shapes.py, or `code`), and the result."""
    source = SourceFile.read(SAMPLE) if code is None else SourceFile.from_bytes(code.encode())
    spec = language_for(str(SAMPLE))
    target = find_by_name(definitions(source.text.encode(), spec), name)
    rewriter = Rewriter(Decoder(backend, DecodeOptions()))
    reports = []
    fixed = nullcontext() if opening is None else patch.object(prompts, "opening_length", lambda backend, code: opening)
    with fixed:
        result = rewriter.rewrite(source, spec, target, instruction, lambda p: reports.append(p.text))
    return reports[0], result


def test_a_function_s_first_line_comes_with_the_prefill(backend):
    # (An instruction the tiny model starts by copying the function for; with others it may start elsewhere.)
    first, result = first_progress(backend, "total_area", "Rename total to result.")
    assert first.startswith("def total_area(shapes):\n")  # one whole line, before any decoding round
    opening = result.stats.rounds[0]
    assert opening.opening and opening.accepted >= 6
    assert result.stats.prefill_output_tokens == opening.accepted + 1


def test_a_method_s_first_line_comes_with_the_prefill():
    # A method is shown without its class (it is named in the prompt); the opening covers its first line.
    # (The scripted model copies what it is shown, so this is the opening's mechanics, not a model's choice.)
    from tests.scripted import ScriptedBackend
    from tests.test_rewrite_cli import CODE

    first, result = first_progress(ScriptedBackend(), "Shape.area", "Keep it.", code=CODE)
    assert first.startswith("def area(self, r):\n") and first.count("\n") == 1  # that line, not the next
    assert result.stats.rounds[0].opening


def test_without_an_opening_the_first_line_takes_rounds(backend):
    first, result = first_progress(backend, "total_area", "Use the built-in sum.", opening=0)
    assert "\n" not in first  # the prefill gives one token; the line needs decoding rounds
    assert not any(r.opening for r in result.stats.rounds)


def test_the_opening_reaches_past_a_short_first_line():
    # Within the prompt's batch a drafted token costs a fraction of a plain step: a short first line is not where
    # the opening stops, a long one still is (and never past MAX_OPENING).
    from tests.scripted import ScriptedBackend  # one token per byte

    backend = ScriptedBackend()
    assert prompts.opening_length(backend, "def f(x):\n    return x\n") == prompts.LEAST_OPENING
    long_first = "def area(self, radius, height, depth):\n    pass\n"
    assert prompts.opening_length(backend, long_first) == len("def area(self, radius, height, depth):\n") + 1
    assert prompts.opening_length(backend, "def " + "x" * 80 + "():\n") == prompts.MAX_OPENING
