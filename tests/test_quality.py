"""`editspec bench --quality`: which problems count, how a rewrite is judged, and the report's shape."""

import json

import pytest
from click.testing import CliRunner

from editspec.cli import main
from editspec.quality import code_block, confining_definition, imported_modules, run_tests, select_problems

BEFORE = (
    "import math\n\n\n"
    "class Circle:\n"
    "    def __init__(self, r):\n"
    "        self.r = r\n\n"
    "    def area(self):\n"
    "        return 3.14 * self.r ** 2\n\n\n"
    "def total(xs):\n"
    "    s = 0\n"
    "    for x in xs:\n"
    "        s += x\n"
    "    return s\n"
)


def test_the_target_is_the_innermost_definition_holding_the_whole_edit():
    method = BEFORE.replace("3.14 * self.r ** 2", "math.pi * self.r ** 2")
    assert confining_definition(BEFORE, method).name == "Circle.area"
    two_methods = method.replace("self.r = r", "self.r = float(r)")
    assert confining_definition(BEFORE, two_methods).name == "Circle"
    function = BEFORE.replace("    s = 0\n    for x in xs:\n        s += x\n    return s\n", "    return sum(xs)\n")
    assert confining_definition(BEFORE, function).name == "total"
    two_places = function.replace("import math", "import math, sys")
    assert confining_definition(BEFORE, two_places) is None
    new_function = BEFORE + "\n\ndef mean(xs):\n    return total(xs) / len(xs)\n"
    assert confining_definition(BEFORE, new_function) is None
    # A new class right after the last method: the method's text and the class together do not parse as two
    # definitions on their own (the first line is indented), but they are two in the file.
    new_class = BEFORE.replace(
        "\n\n\ndef total", "\n\nclass Square:\n    def area(self):\n        return 1\n\n\ndef total"
    )
    assert new_class != BEFORE
    assert confining_definition(BEFORE, new_class) is None


def test_third_party_imports_are_found():
    assert imported_modules("import numpy as np\nfrom os import path\nfrom . import x\n") == {"numpy", "os"}


def test_the_answer_code_block_is_taken():
    assert code_block("Here:\n```python\ndef f():\n    pass\n```\nDone.") == "def f():\n    pass\n"
    assert code_block("```\nx = 1\n") == "x = 1\n"  # not closed: the rest
    assert code_block("x = 1\n") == "x = 1\n"


def test_tests_run_in_a_subprocess_with_a_timeout(tmp_path):
    assert run_tests("def f():\n    return 1\n", "assert f() == 1", tmp_path) == (True, "")
    passed, why = run_tests("def f():\n    return 2\n", "assert f() == 1", tmp_path)
    assert not passed and "AssertionError" in why
    passed, why = run_tests("while True:\n    pass\n", "", tmp_path, timeout=1)
    assert not passed and "timed out" in why


def test_problems_are_selected_and_the_others_say_why(tmp_path):
    good_after = BEFORE.replace("3.14 * self.r ** 2", "math.pi * self.r ** 2")
    rows = [
        {
            "id": 1,
            "name": "ok",
            "before": BEFORE,
            "after": good_after,
            "tests": "assert Circle(1).area() == math.pi",
            "instruction_descriptive": "Use math.pi.",
        },
        {
            "id": 2,
            "name": "numpy",
            "before": BEFORE,
            "after": good_after,
            "tests": "import numpy",
            "instruction_descriptive": "x",
        },
        {
            "id": 3,
            "name": "broken",
            "before": BEFORE,
            "after": good_after,
            "tests": "assert False",
            "instruction_descriptive": "x",
        },
        {
            "id": 4,
            "name": "spread",
            "before": BEFORE,
            "after": good_after.replace("import math", "import cmath"),
            "tests": "",
            "instruction_descriptive": "x",
        },
    ]
    chosen, left_out = select_problems(rows, tmp_path)
    assert [(p.case, p.target) for p in chosen] == [("1-ok", "Circle.area")]
    why = {o["case"]: o["why"] for o in left_out}
    assert why["2-numpy"] == "needs numpy"
    assert why["3-broken"].startswith("the reference fails its own tests")
    assert why["4-spread"] == "the reference edit is not inside one definition"


@pytest.mark.model
def test_quality_bench_reports_pass_refusals_and_time(tmp_path):
    data = tmp_path / "cases.jsonl"
    after = BEFORE.replace("    s = 0\n    for x in xs:\n        s += x\n    return s\n", "    return sum(xs)\n")
    row = {
        "id": 7,
        "name": "sum",
        "before": BEFORE,
        "after": after,
        "tests": "assert total([1, 2, 3]) == 6",
        "instruction_descriptive": "Use the built-in sum.",
        "instruction_lazy": "sum",
        "taxonomy": {},
    }
    data.write_text(json.dumps(row) + "\n")
    out = tmp_path / "q.json"
    result = CliRunner().invoke(
        main,
        [
            "bench",
            "--quality",
            "--model",
            "tiny",
            "--data",
            str(data),
            "--json",
            str(out),
            "--methods",
            "editspec,plain",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads(out.read_text())
    assert report["problems"] == 1 and report["model"].startswith("SmolLM2")
    case = report["cases"][0]
    assert case["target"] == "total"
    for method in ("editspec", "plain"):
        assert case[method]["status"] in ("pass", "fail", "refused")
        assert case[method]["seconds"] > 0
        s = report["summary"][method]
        assert s["pass"] + s["wrong_edits"] + s["refused"] == 1
        assert 0 <= s["second_look_passes"] <= s["second_looks"] <= 1 and s["written_back"] in (0, 1)
        if case[method]["status"] != "refused":
            assert s["second_looks"] == int(case[method]["second_look"])
            assert s["own_headers"] == int(case[method]["own_header"])
    assert "pass@1" in result.output and "answers from a second look" in result.output
    restarts = report["summary"]["editspec"]["own_headers"]
    assert f"{restarts} started again at the function's own header" in result.output
    assert "reading a name nothing defines" in result.output and "with arguments they do not take" in result.output
    for method in ("editspec", "plain"):
        if case[method]["status"] != "refused":
            assert report["summary"][method]["undefined_names"] == int(bool(case[method]["undefined_names"]))
    bad = CliRunner().invoke(main, ["bench", "--quality", "--latency"])
    assert bad.exit_code == 2 and "one of --latency and --quality" in bad.output


def test_the_summary_counts_answers_that_read_a_name_nothing_defines():
    from editspec.quality import summarize

    def run(status, names=(), calls=()):
        return {"status": status, "why": "", "seconds": 1.0, "undefined_names": list(names), "bad_calls": list(calls)}

    cases = [
        {"case": "a", "editspec": run("fail", ["clamp"])},
        {"case": "b", "editspec": run("pass", calls=["line 3: f(...) gets no `x`"])},
        {"case": "c", "editspec": run("fail", ["x", "y"])},
    ]
    summary = summarize(cases, ("editspec",))["editspec"]
    assert summary["undefined_names"] == 2 and summary["bad_calls"] == 1
