"""editspec.promises: a JavaScript or TypeScript function made async (or not), and the calls that no longer fit."""

from __future__ import annotations

from editspec.locate import language_for
from editspec.promises import async_change, is_async, promise_misuses

TS = language_for("x.ts")
JS = language_for("x.js")


def test_which_definitions_are_async():
    assert is_async("export async function f(x: number): Promise<number> {\n  return x;\n}\n", TS) is True
    assert is_async("export function f(x) {\n  return x;\n}\n", JS) is False
    assert is_async("const f = async (x) => x;\n", JS) is True
    assert is_async("  async m() {\n    return 1;\n  }\n", JS) is True
    assert is_async("async function* f() {\n  yield 1;\n}\n", JS) is None  # a generator's calls are iterated
    assert is_async("function f( {\n", JS) is None  # does not parse
    assert async_change("function f() {}\n", "async function f() {}\n", TS) == "async"
    assert async_change("async function f() {}\n", "function f() {}\n", TS) == "sync"
    assert async_change("function f() {}\n", "function g() {}\n", TS) == ""
    assert async_change("def f():\n    pass\n", "async def f():\n    pass\n", language_for("x.py")) == ""
    # the named function, not a helper the answer wrote before it
    helper_first = "async function g() {}\nconst f = () => 1;\n"
    assert async_change("const f = () => 1;\n", helper_first, JS, ("f", "f")) == ""
    assert async_change("const f = () => 1;\n", helper_first, JS) == "async"
    assert async_change("function f() {}\n", "function h() {}\nconst f = async () => 1;\n", JS, ("f", "f")) == "async"


def test_the_calls_that_no_longer_fit():
    text = (
        "async function total(xs) {\n"  # 1
        "  return 1;\n"
        "}\n"
        "const s = `total: ${total(a)}`;\n"  # 4: a Promise in the text
        "const n = total(a) + 1;\n"  # 5
        "total(a);\n"  # 6: a rejection dropped
        "console.log(total(a));\n"  # 7: logs a Promise
        "async function main() {\n"
        "  const t = await total(a);\n"
        "  total(a).then(print);\n"
        "  await Promise.all([total(a), total(b)]);\n"
        "  return total(a);\n"
        "}\n"
        "const g = () => total(a);\n"
        "const fixed = total(a).toFixed(2);\n"  # 15: a Promise has no toFixed
        "const totals = xs.map((x) => x + totals(x));\n"
        "void total(a);\n"  # dropped on purpose
    )
    assert promise_misuses(text, JS, "total", 1, method=False, now_async=True) == [4, 5, 6, 7, 15]
    assert promise_misuses(text, JS, "total", 1, method=False, now_async=False) == [10]


def test_a_method_s_calls_are_this_class_s():
    text = (
        "class A {\n"
        "  async load() {\n"  # 2
        "    return 1;\n"
        "  }\n"
        "  show() {\n"
        "    return `${this.load()}`;\n"  # 6
        "  }\n"
        "}\n"
        "class B {\n"
        "  load() {\n"
        "    return 2;\n"
        "  }\n"
        "  show() {\n"
        "    return `${this.load()}`;\n"  # B's own load
        "  }\n"
        "}\n"
    )
    assert promise_misuses(text, TS, "load", 2, method=True, now_async=True) == [6]
    assert promise_misuses(text, TS, "load", 10, method=True, now_async=True) == [14]
