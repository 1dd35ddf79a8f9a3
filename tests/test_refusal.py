"""When a rewrite will be refused for writing more than the one definition, and when that is certain."""

import pytest

from editspec.locate import Definition, language_for
from editspec.rewrite import extra_definitions, settled_extra_definition, unwrap_enclosing_class


def target(kind="function_definition"):
    return Definition("f", kind, 0, 0, 0, 0, 1, 1)


@pytest.mark.parametrize(
    "file,partial,settled",
    [
        ("a.py", "def f(x):\n    return x\n\n\ndef g(", None),  # the next line is not complete yet
        ("a.py", "def f(x):\n    return x\n\n\ndef g(y):\n", "g"),
        ("a.py", "def f(x):\n    def g(y):\n        return y\n", None),  # nested: part of f
        ("a.py", "class C:\n    def f(self):\n        pass\n", None),  # the answer's only definition
        ("a.js", "function f() {\n  function g() {\n", None),  # f is not closed: g may be inside it
        ("a.js", "function f() {\n  return 1;\n}\nfunction g() {\n  return 2;\n}\n", "g"),
        ("a.go", "func f() int {\n\treturn 1\n}\n\nfunc g() {\n", "g"),
    ],
)
def test_an_extra_definition_is_settled_only_when_no_continuation_can_undo_it(file, partial, settled):
    spec = language_for(file)
    assert settled_extra_definition(partial, spec, target()) == settled
    if settled:  # and the finished answer is refused for the same reason
        assert settled in extra_definitions(partial + "}\n" * (file == "a.go"), spec, target())


def test_a_class_target_may_hold_anything():
    spec = language_for("a.py")
    answer = "class A:\n    pass\n\n\nclass B:\n    pass\n"
    assert settled_extra_definition(answer, spec, target("class_definition")) is None
    assert extra_definitions(answer, spec, target("class_definition")) == []


def test_a_partial_answer_is_unwrapped_from_its_class_header():
    assert unwrap_enclosing_class("class C:\n    def f(self):\n        ret", ["class C:"]) == "def f(self):\n    ret"
    assert unwrap_enclosing_class("class C:\n", ["class C:"]) == ""
    assert unwrap_enclosing_class("class D:\n    x = 1\n", ["class C:"]) == "class D:\n    x = 1\n"
