"""editspec.hoisting: a JavaScript or TypeScript function declaration made a `const` (or an arrow function), and
the uses of it that then fail."""

from __future__ import annotations

from editspec.hoisting import broken_uses, declaration_change, declared_as
from editspec.locate import language_for

TS = language_for("x.ts")
JS = language_for("x.js")


def test_how_a_definition_declares_its_name():
    assert declared_as("export function f(x: number): number {\n  return x;\n}\n", TS, "f") == ("function", "function")
    assert declared_as("const f = (x) => x;\n", JS, "f") == ("const", "arrow")
    assert declared_as("export const f = async (x: number) => x;\n", TS, "f") == ("const", "arrow")
    assert declared_as("let f = function (x) {\n  return x;\n};\n", JS, "f") == ("let", "function")
    assert declared_as("var a = 1, f = () => 1;\n", JS, "f") == ("var", "arrow")
    assert declared_as("const f = 5;\n", JS, "f") == ("const", "")
    assert declared_as("class f {}\n", JS, "f") == ("class", "")
    assert declared_as("function g() {}\nconst f = () => 1;\n", JS, "f") == ("const", "arrow")  # a helper first
    assert declared_as("function g() {\n  const f = () => 1;\n}\n", JS, "f") is None  # a helper's local
    assert declared_as("function f( {\n", JS, "f") is None  # does not parse
    assert declared_as("const g = () => 1;\n", JS, "f") is None


def test_which_changes_lose_something():
    names = ("f", "f")
    assert declaration_change("function f() {}\n", "const f = () => {};\n", JS, names) == ("const", "arrow")
    assert declaration_change("function f() {}\n", "const f = function () {};\n", JS, names) == ("const", "function")
    assert declaration_change("const f = function () {};\n", "const f = () => {};\n", JS, names) == ("const", "arrow")
    assert declaration_change("function f() {}\n", "export function f() {}\n", JS, names) is None
    assert declaration_change("const f = () => {};\n", "function f() {}\n", JS, names) is None
    assert declaration_change("const f = () => 1;\n", "const f = () => 2;\n", JS, names) is None
    assert declaration_change("function f() {}\n", "const g = () => {};\n", JS, ("f", "g")) == ("const", "arrow")
    assert declaration_change("def f():\n    pass\n", "f = lambda: None\n", language_for("x.py"), names) is None


def test_the_uses_that_run_before_the_definition():
    text = (
        "import { g } from './g';\n"
        "const s: typeof total = total;\n"  # 2: the annotation is a type; the value runs now
        "console.log(total([1]));\n"  # 3
        "export default { total };\n"  # 4
        "if (g) {\n"
        "  total([2]);\n"  # 6: a block runs now too
        "}\n"
        "function later() {\n"
        "  return total([3]);\n"  # runs when called
        "}\n"
        "const f = () => total([4]);\n"
        "class A {\n"
        "  m() {\n"
        "    return total([5]);\n"
        "  }\n"
        "}\n"
        "const total = (xs: number[]): number => xs.length;\n"  # 17
        "console.log(total([6]));\n"  # after: fine
    )
    assert broken_uses(text, TS, "total", (17, 17)) == ([2, 3, 4, 6], [])
    # a function declaration is hoisted: nothing to say
    assert broken_uses(
        text.replace("const total = (xs: number[]): number => xs.length;", "function total() {}"), TS, "total", (17, 17)
    ) == ([], [])
    # in a function: the uses above it in that function's body
    nested = "function outer() {\n  const n = inner();\n  const inner = () => 1;\n  return n;\n}\ninner();\n"
    assert broken_uses(nested, JS, "inner", (3, 3)) == ([2], [])
    assert broken_uses("total(;\nconst total = () => 1;\n", JS, "total", (2, 2)) == ([], [])  # does not parse


def test_what_an_arrow_function_makes_fail():
    text = (
        "const Point = (x, y) => {\n"
        "  this.x = x;\n"
        "  this.y = this.x;\n"  # one line, named once
        "  const args = () => arguments[0];\n"  # an arrow function in it shares them
        "  function own() {\n"
        "    return this.z + arguments.length;\n"  # a function of its own has its own
        "  }\n"
        "};\n"
        "const p = new Point(1, 2);\n"
        "const q = new other.Point(1, 2);\n"
    )
    assert broken_uses(text, JS, "Point", (1, 8)) == (
        [],
        ["line 9: `new Point(...)`", "line 2: `this`", "line 3: `this`", "line 4: `arguments`"],
    )
    plain = "const Point = function (x) {\n  this.x = x;\n};\nconst p = new Point(1);\n"
    assert broken_uses(plain, JS, "Point", (1, 3)) == ([], [])


def test_the_names_declared_twice_in_one_scope():
    from editspec.hoisting import redeclarations

    text = (
        "const TAX = 0.2;\n"
        "var a; var a;\n"  # a script may declare a var twice
        "function f() {}\nfunction f() {}\n"  # and a function
        "let b;\n{ let b; }\n"  # another block's b
        "switch (1) { case 1: let w; break; case 2: let w; }\n"  # 7: a switch's cases share one scope
        "import x from 'x';\n"
        "const { x: [y] } = q;\n"  # binds y, not x
        "const y = 2;\n"  # 10
        "export const TAX = 0.25;\n"  # 11
    )
    assert redeclarations(text, JS) == {"w": 7, "y": 10, "TAX": 11}
    merged = (
        "function f(a: string): void;\nfunction f(a: any) {}\nclass K {}\nnamespace K {}\n"
        "interface I {}\ninterface I {}\nenum E { A }\nenum E { B = 2 }\n"
    )
    assert redeclarations(merged, TS) == {}
    assert redeclarations("const a = 1;\nconst a = (;\n", JS) == {}  # does not parse: not judged here
    assert redeclarations("a = 1\na = 2\n", language_for("x.py")) == {}
