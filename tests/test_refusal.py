"""When a rewrite will be refused for writing more than the one definition, and when that is certain."""

import pytest

from editspec.locate import Definition, language_for
from editspec.rewrite import (
    cut_copies,
    name_uses,
    new_helpers,
    refused_definitions,
    renamed_to,
    settled_extra_definition,
    unwrap_enclosing_class,
)


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
        # definitions whose line begins with a keyword of their own: as top-level as any other
        ("a.ts", "export function f(): number {\n  return 1;\n}\n\nexport function g(): number {\n", "g"),
        ("a.js", "export const f = () => 1;\nconst g = (y) => {\n", "g"),
        ("a.ts", "export function f(): number {\n  if (x) {\n    function g() {\n", None),  # indented: inside f
    ],
)
def test_an_extra_definition_is_settled_only_when_no_continuation_can_undo_it(file, partial, settled):
    spec = language_for(file)
    existing = {"g"}  # the file defines g already: writing it again is more than rewriting f
    assert settled_extra_definition(partial, spec, target(), existing) == settled
    if settled:  # and the finished answer is cut there: the copy is left out
        finished = partial + "}\n" * (file == "a.go")
        assert settled in refused_definitions(finished, spec, target(), existing)
        kept, left_out = cut_copies(finished, spec, target(), existing)
        assert left_out == [settled] and refused_definitions(kept, spec, target(), existing) == []
    assert settled_extra_definition(partial, spec, target(), set()) is None  # a new helper g: no refusal


def test_a_go_type_copied_after_the_target_is_left_out():
    spec = language_for("a.go")
    answer = "func f() int {\n\treturn 2\n}\n\ntype g struct {\n\tx int\n}\n"  # `type` begins its line
    assert cut_copies(answer, spec, target(), {"g"}) == ("func f() int {\n\treturn 2\n}\n", ["g"])


def test_a_class_target_may_hold_anything():
    spec = language_for("a.py")
    answer = "class A:\n    pass\n\n\nclass B:\n    pass\n"
    assert settled_extra_definition(answer, spec, target("class_definition"), {"B"}) is None
    assert refused_definitions(answer, spec, target("class_definition"), {"B"}) == []


@pytest.mark.parametrize(
    "answer,existing,refused,helpers",
    [
        ("def f(x):\n    return _sq(x)\n\n\ndef _sq(x):\n    return x * x\n", {"g"}, [], ["_sq"]),
        ("def _sq(x):\n    return x * x\n\n\ndef f(x):\n    return _sq(x)\n", {"g"}, [], ["_sq"]),  # before it
        ("def f(x):\n    return g(x)\n\n\ndef g(x):\n    return x\n", {"g"}, ["g"], []),  # g exists already
        ("def f(x):\n    return 1\n\n\ndef f(x):\n    return 2\n", set(), ["f"], []),  # f twice
        ("def h(x):\n    return 1\n\n\ndef h(x):\n    return 2\n", set(), ["h"], []),  # renamed, twice
        ("def f(x):\n    return 1\n\n\ndef a():\n    pass\n\n\ndef a():\n    pass\n", set(), ["a", "a"], []),
        ("def renamed(x):\n    return x\n", {"g"}, [], []),  # a rename alone is one definition
        ("class Rect:\n    pass\n", {"Rect"}, ["Rect"], []),  # another of the file's definitions instead
    ],
)
def test_new_helpers_are_accepted_duplicates_are_not(answer, existing, refused, helpers):
    spec = language_for("a.py")
    assert refused_definitions(answer, spec, target(), existing) == refused
    assert new_helpers(answer, spec, target(), existing) == helpers


def test_a_partial_answer_is_unwrapped_from_its_class_header():
    assert unwrap_enclosing_class("class C:\n    def f(self):\n        ret", ["class C:"]) == "def f(self):\n    ret"
    assert unwrap_enclosing_class("class C:\n", ["class C:"]) == ""
    assert unwrap_enclosing_class("class D:\n    x = 1\n", ["class C:"]) == "class D:\n    x = 1\n"
    # the same class with its header written another way
    assert unwrap_enclosing_class("class C(object):\n    def f(self):\n        pass\n", ["class C:"]) == (
        "def f(self):\n    pass\n"
    )


def test_the_files_next_definitions_copied_after_the_target_are_left_out():
    spec = language_for("a.py")
    answer = "def f(x):\n    return 2\n\n\ndef _h():\n    pass\n\n\ndef g(y):\n    return y\n\n\ndef k():\n"
    kept, left_out = cut_copies(answer, spec, target(), {"g", "k"})
    assert kept == "def f(x):\n    return 2\n\n\ndef _h():\n    pass\n" and left_out == ["g", "k"]
    assert refused_definitions(kept, spec, target(), {"g", "k"}) == []
    before = "def g(y):\n    return y\n\n\ndef f(x):\n    return 2\n"  # the start of the file copied first
    assert cut_copies(before, spec, target(), {"g"}) == (before, [])
    assert refused_definitions(before, spec, target(), {"g"}) == ["g"]
    assert settled_extra_definition(before, spec, target(), {"g"}) == "g"  # certain: stop there
    only_copies = "def g(y):\n    return y\n\n\ndef k():\n"
    assert refused_definitions(only_copies, spec, target(), {"g", "k"}) == ["g", "k"]
    assert settled_extra_definition(only_copies, spec, target(), {"g", "k"}) == "g"


@pytest.mark.parametrize(
    "file,answer,existing,expected",
    [
        ("a.py", "def f(x):\n    return x\n", set(), ""),
        ("a.py", "def calculate_f(x):\n    return x\n", {"g"}, "calculate_f"),
        ("a.py", "def _sq(x):\n    return x\n\n\ndef f(x):\n    return _sq(x)\n", set(), ""),  # a helper beside f
        ("a.py", "def g(x):\n    return x\n", {"g"}, ""),  # the file's g instead: refused, not a rename
        ("a.go", "func (s *Stack) ff() int {\n\treturn 1\n}\n", set(), "ff"),
        ("a.js", "function fTotal() {\n  return 1;\n}\n", set(), "fTotal"),
        ("a.rs", "fn f_total() -> i32 {\n    1\n}\n", set(), "f_total"),
        ("a.py", "x = (\n", set(), ""),  # no definition read: nothing said
    ],
)
def test_a_renamed_definition_is_named(file, answer, existing, expected):
    assert renamed_to(answer, language_for(file), target(), existing) == expected


@pytest.mark.parametrize(
    "file,text,lines",
    [
        ("a.go", "func Sum(v []int) int {\n\treturn 0\n}\n\n// Sum them\nvar t = Sum(nil) + s.Sum()\n", [6]),
        ("a.js", "function total() {}\nconst x = total(); // total\nobj.total();\nconst s = 'total';\n", [2, 3]),
        ("a.sh", "deploy() {\n  :\n}\ndeploy\necho deploy\n", [4, 5]),
    ],
)
def test_the_uses_of_a_renamed_definition_s_old_name_are_found_by_line(file, text, lines):
    """Outside the definition (its first 3 lines here); not in comments or strings (a shell's `echo deploy`
    passes the word: it may be a use, as far as the parse can tell)."""
    from editspec.locate import parse

    data = text.encode()
    skip = (0, data.index(b"}\n") + 2)
    found = name_uses(text.split("(")[0].split()[-1], data, parse(data, language_for(file)), skip)
    assert sorted({line for _, line in found}) == lines
