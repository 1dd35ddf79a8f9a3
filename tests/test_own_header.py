"""An answer that opens with (imports and) a method's class header and then writes a class of its own is written
again from the method's own header (`invented_class`, `Rewriter._from_own_header`); so is a module function's
answer that opens with another of the file's definitions (`other_definition_first`).

The coder model does this when asked for type hints on a method of a file that imports from `typing` (the
forty-sixth session: 9 of 14 methods of `textwrap.py` refused so). The model here is scripted (tests.
test_second_look's ForkingBackend): greedy writes the invented class; the method from its own header on is
offered only where it parts from that, so it is written only when the rewrite starts it there."""

from __future__ import annotations

from editspec.decoding import DecodeOptions, Decoder
from editspec.locate import definitions, find_by_name, language_for
from editspec.rewrite import Rewriter, SourceFile, invented_class, other_definition_first
from editspec.trace import render_html
from tests.test_second_look import ForkingBackend

PY = language_for("x.py")
SOURCE = """from typing import List


class Wrapper:
    def __init__(self, width):
        self.width = width

    def wrap(self, text):
        return [text[i : i + self.width] for i in range(0, len(text), self.width)]
"""
HINTED = SOURCE.replace("def wrap(self, text):", "def wrap(self, text: str) -> List[str]:")
METHOD = "def wrap(self, text):\n    return [text[i : i + self.width] for i in range(0, len(text), self.width)]\n"
HINTED_METHOD = METHOD.replace("def wrap(self, text):", "def wrap(self, text: str) -> List[str]:")


def in_class(method: str, imports: str = "from typing import List\n\n") -> str:
    return imports + "class Wrapper:\n" + "".join("    " + line for line in method.splitlines(True))


INVENTED = in_class("def __init__(self, width: int) -> None:\n    self.width = width\n\n" + HINTED_METHOD)


def rewrite_with(scripts, near, parents=None, source=SOURCE, name="Wrapper.wrap"):
    backend = ForkingBackend(scripts, near, parents)
    decoder = Decoder(backend, DecodeOptions(draft_length=4), verify_seconds=[0.0] + [1.0] * 40, policy_state={})
    target = find_by_name(definitions(source.encode(), PY), name)
    calls = []
    decode = decoder.decode
    decoder.decode = lambda prompt, **kw: calls.append(len(prompt)) or decode(prompt, **kw)
    result = Rewriter(decoder).rewrite(SourceFile.from_bytes(source.encode()), PY, target, "Add type hints.")
    return result, calls


def test_an_invented_class_is_written_again_from_the_methods_own_header():
    result, calls = rewrite_with([INVENTED, in_class(HINTED_METHOD)], near=[5.0])
    assert result.problem() is None, result.problem()
    assert result.new_text == HINTED  # the import was the file's already: nothing added above
    assert len(calls) == 2  # the first answer, stopped at `def __init__`, then the one from `def wrap`
    first = result.trace["own_header"]["first_answer"]
    assert first.startswith("from typing import List\n\nclass Wrapper:\n") and first.endswith("-> None:\n")
    assert "def __init__" not in first.split("-> None:")[1]  # stopped as soon as the line was complete
    assert result.trace["own_header"]["forced_tokens"] == len("from typing import List\n\nclass Wrapper:\n    def wrap")
    # The trace shows the answer kept, from the tokens it was made to start from; the work counts both answers.
    assert result.trace["output"].startswith(in_class(HINTED_METHOD))
    assert "".join(p.text for p in result.pieces) == in_class(HINTED_METHOD)
    assert result.stats.generated_tokens > len(HINTED_METHOD) - len("def wrap(") + len(first) - 8


def test_new_imports_before_the_invented_class_are_kept():
    imports = "from typing import List, Optional\n\n"
    invented = INVENTED.replace("from typing import List\n\n", imports)
    hinted = HINTED_METHOD.replace("def wrap(self, text: str)", "def wrap(self, text: Optional[str])")
    result, _ = rewrite_with([invented, in_class(hinted, imports)], near=[5.0])
    assert result.problem() is None, result.problem()
    assert result.imports == ["from typing import Optional"]
    assert "from typing import Optional\n" in result.new_text and "text: Optional[str]" in result.new_text


def test_a_class_header_followed_by_the_method_itself_is_answered_as_it_was():
    result, calls = rewrite_with([in_class(HINTED_METHOD, "")], near=[])
    assert result.new_text == HINTED and result.problem() is None
    assert len(calls) == 1 and "own_header" not in result.trace


def test_a_second_look_after_the_restart_forks_the_answer_from_the_method_header():
    # From `def wrap(` the model writes the method back unchanged, with the hints a near runner-up: the second look
    # forks that answer, whose prompt holds the tokens it was made to start from.
    restarted = in_class(METHOD)
    result, calls = rewrite_with([INVENTED, restarted, in_class(HINTED_METHOD)], near=[5.0, 9.0], parents=[0, 0, 1])
    assert result.problem() is None, result.problem()
    assert result.new_text == HINTED
    assert result.second_look["first_answer"] == restarted
    assert result.second_look["forked_at_line"] == 4
    assert len(calls) == 3


def test_invented_class_is_settled_by_the_first_line_inside_the_class():
    target = find_by_name(definitions(SOURCE.encode(), PY), "Wrapper.wrap")
    header = "from typing import List\n\nclass Wrapper:\n"
    assert invented_class("from typing import List\n", PY, target) == (False, None)  # a header may follow
    assert invented_class(header, PY, target) == (False, None)
    assert invented_class(header + "    def __init__", PY, target) == (False, None)  # (complete lines only)
    body = len(header)
    assert invented_class(header + "    def __init__(self):\n", PY, target) == (True, (body, "    "))
    assert invented_class(header + '\n  """A wrapper."""\n', PY, target) == (True, (body + 1, "  "))
    assert invented_class(header + "    @property\n    def width(self):\n", PY, target) == (True, (body, "    "))
    assert invented_class(header + "    # hints\n    @staticmethod\n    def wrap(text):\n", PY, target) == (True, None)
    assert invented_class("class Wrapper:\n    x = 1\n", PY, target) == (True, (len("class Wrapper:\n"), "    "))
    assert invented_class("class Wrapper:\nx = 1\n", PY, target) == (True, None)  # no class body: not this case
    assert invented_class("def wrap(self, text: str):\n", PY, target) == (True, None)
    function = find_by_name(definitions(b"def wrap(text):\n    return text\n", PY), "wrap")
    assert invented_class("class Wrapper:\n    x = 1\n", PY, function) == (True, None)  # not a method


# A module function the model answers with the file's class first (textwrap's `wrap`, asked for type hints, was
# answered with `class TextWrapper:` and refused for writing it).
MODULE = (
    "from functools import cache\n"
    + SOURCE
    + """

@cache
def wrap(text, width=70):
    return Wrapper(width).wrap(text)
"""
)
FUNCTION = "@cache\ndef wrap(text, width=70):\n    return Wrapper(width).wrap(text)\n"
HINTED_FUNCTION = FUNCTION.replace("def wrap(text, width=70):", "def wrap(text: str, width: int = 70) -> List[str]:")


def test_a_function_answered_with_another_of_the_files_definitions_first_is_written_again_from_its_header():
    opening = "from typing import List\n\nclass Wrapper:\n    def __init__(self, width: int) -> None:\n"
    result, calls = rewrite_with(
        [
            opening + "        self.width = width\n\n\n" + HINTED_FUNCTION,
            "from typing import List\n\n" + HINTED_FUNCTION,
        ],
        near=[5.0],
        source=MODULE,
        name="wrap",
    )
    assert result.problem() is None, result.problem()
    assert result.new_text == MODULE.replace(FUNCTION, HINTED_FUNCTION)
    assert len(calls) == 2
    # stopped at the class's header, its first complete line: the restart keeps the imports and its decorator
    assert result.trace["own_header"]["first_answer"] == "from typing import List\n\nclass Wrapper:\n"
    assert result.trace["own_header"]["kind"] == "function"
    assert result.trace["own_header"]["forced_tokens"] == len("from typing import List\n\n@cache\ndef wrap")
    assert "From the function's own header." in render_html(result.trace)


def test_a_function_answered_from_its_own_header_or_with_a_new_helper_first_is_answered_as_it_was():
    helper = "def _hinted(width: int) -> Wrapper:\n    return Wrapper(width)\n\n\n"
    for answer in (HINTED_FUNCTION, helper + HINTED_FUNCTION):
        result, calls = rewrite_with([answer], near=[], source=MODULE, name="wrap")
        assert result.problem() is None and len(calls) == 1 and "own_header" not in result.trace


def test_other_definition_first_is_settled_by_the_first_definition_header():
    target = find_by_name(definitions(MODULE.encode(), PY), "wrap")
    existing = {"Wrapper", "__init__"}
    assert other_definition_first("from typing import List\n", PY, target, existing) == (False, None)
    assert other_definition_first("@cache\n", PY, target, existing) == (False, None)  # a decorator: of what?
    assert other_definition_first("@cache\nclass Wrapper:\n", PY, target, existing) == (True, (0, ""))
    assert other_definition_first("import os\n\nclass Wrapper:\n", PY, target, existing) == (True, (11, ""))
    assert other_definition_first("@cache\ndef wrap(text):\n", PY, target, existing) == (True, None)
    assert other_definition_first("def helper():\n", PY, target, existing) == (True, None)  # a new helper
    assert other_definition_first("WIDTH = 70\n", PY, target, existing) == (True, None)
    method = find_by_name(definitions(MODULE.encode(), PY), "Wrapper.wrap")
    assert other_definition_first("class Wrapper:\n", PY, method, existing) == (True, None)  # a method's case


def test_the_trace_page_says_the_answer_was_started_again():
    result, _ = rewrite_with([INVENTED, in_class(HINTED_METHOD)], near=[5.0])
    page = render_html(result.trace)
    assert "From the method's own header." in page
    assert "class Wrapper: … def __init__(self, width: int) -&gt; None:" in page
    plain, _ = rewrite_with([in_class(HINTED_METHOD, "")], near=[])
    assert "own header" not in render_html(plain.trace)
