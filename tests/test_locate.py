"""Finding definitions with tree-sitter in every supported language."""

import re
from pathlib import Path

import pytest

from editspec.locate import (
    LANGUAGES,
    LocateError,
    definitions,
    file_context,
    find_at,
    find_by_name,
    import_insertion,
    language_for,
    leading_imports,
    nested_names,
    new_imports,
    offset_of_line,
    outside_code,
    parse,
    sharing_lines,
    syntax_errors,
)

SAMPLES = Path(__file__).resolve().parents[1] / "samples"

# file -> (a name to find, the first line of its region, its last line, a line inside it)
EXPECTED = {
    "shapes.py": ("Rect.perimeter", 15, 18, 18),
    "cart.js": ("Cart.total", 13, 19, 16),
    "users.ts": ("displayName", 28, 30, 29),
    "stack.go": ("Stack.Pop", 15, 23, 20),
    "inventory.rs": ("Inventory.count", 15, 18, 17),
    "Account.java": ("Account.toString", 25, 28, 27),
    "vec.c": ("vec_push", 10, 23, 14),
    "matrix.cpp": ("Matrix.transpose", 18, 25, 21),
    "Library.cs": ("Library.Add", 11, 14, 13),
    "ledger.rb": ("Ledger.add", 14, 18, 16),
    "Ledger.php": ("Ledger.add", 16, 24, 20),
    "Ledger.kt": ("Ledger.add", 9, 14, 12),
    "ledger.lua": ("Ledger.add", 11, 15, 13),
    "Ledger.swift": ("Ledger.balance", 18, 22, 20),
    "deploy.sh": ("log", 6, 9, 8),
}


def load(name):
    path = SAMPLES / name
    spec = language_for(path)
    data = path.read_bytes()
    return spec, data, definitions(data, spec)


def test_every_language_has_a_sample():
    covered = {language_for(SAMPLES / name).name for name in EXPECTED}
    assert covered == set(LANGUAGES) - {"tsx"}


def test_the_editor_clients_start_the_server_for_every_language():
    """VS Code's language ids and Neovim's file types for every language the server reads (the server goes by a
    file's name; an editor that does not start it for a language's files offers nothing there)."""
    import re

    root = SAMPLES.parent
    vscode = {name: [name] for name in LANGUAGES} | {
        "javascript": ["javascript", "javascriptreact"],
        "tsx": ["typescriptreact"],
        "bash": ["shellscript"],
    }
    nvim = vscode | {"csharp": ["cs"], "bash": ["sh", "bash"]}
    ids = {i for names in vscode.values() for i in names}
    extension = (root / "extension/vscode/src/extension.ts").read_text()
    listed = re.search(r"const LANGUAGES = \[(.*?)\];", extension, re.DOTALL).group(1)
    assert set(re.findall(r'"([a-z]+)"', listed)) == ids
    activation = (root / "extension/vscode/package.json").read_text()
    assert set(re.findall(r'"onLanguage:([a-z]+)"', activation)) == ids
    lua = (root / "extension/nvim/lua/editspec/init.lua").read_text()
    filetypes = re.search(r"filetypes = \{(.*?)\}", lua, re.DOTALL).group(1)
    assert set(re.findall(r"'([a-z]+)'", filetypes)) == {i for names in nvim.values() for i in names}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_find_by_name_and_by_line(name):
    qualified, first, last, inside = EXPECTED[name]
    spec, data, defs = load(name)
    assert syntax_errors(data, spec) == []
    found = find_by_name(defs, qualified)
    assert (found.line, found.end_line) == (first, last)
    assert find_at(defs, offset_of_line(data, inside)) is found
    region = data[found.start : found.end].decode()
    assert region.endswith("\n") and data[found.start - 1 : found.start] in (b"\n", b"")


def test_decorators_and_leading_comments_belong_to_the_definition():
    _, data, defs = load("shapes.py")
    region = data[find_by_name(defs, "Rect.perimeter").start :].decode()
    assert region.startswith("    # Perimeter of the rectangle.\n    @property\n")
    assert data[find_by_name(defs, "Rect").start :].decode().startswith("@dataclass\nclass Rect")
    _, data, defs = load("inventory.rs")
    assert data[find_by_name(defs, "Inventory").start :].decode().startswith("/// Stock levels")
    _, data, defs = load("Library.cs")
    lend = find_at(defs, offset_of_line(data, 18))
    assert lend.line == 16 and data[lend.start :].decode().lstrip().startswith('[Obsolete("Use TryLend")]')


def test_nesting_picks_the_innermost_definition():
    _, data, defs = load("shapes.py")
    assert find_at(defs, offset_of_line(data, 26, 9)).name == "Circle.area"
    assert find_at(defs, offset_of_line(data, 21)).name == "Circle"


def test_overloads_are_ambiguous_by_name_and_distinct_by_line():
    _, data, defs = load("Account.java")
    with pytest.raises(
        LocateError, match=r"2 definitions match 'Account.deposit'.*: overloads: pick one with --line, e.g. --line \d+$"
    ):
        find_by_name(defs, "Account.deposit")  # overloads: the same whole name, so only a line tells them apart
    assert find_at(defs, offset_of_line(data, 22)).line == 21
    _, data, defs = load("Library.cs")
    with pytest.raises(LocateError, match="overloads: pick one with --line"):
        find_by_name(defs, "Lend")


def test_typescript_overload_signatures_belong_to_their_implementation():
    _, data, defs = load("users.ts")
    find = find_by_name(defs, "find")  # one definition, not three to choose between by line
    assert (find.name, find.kind, find.line, find.end_line) == ("UserRepository.find", "method_definition", 14, 21)
    assert find_at(defs, offset_of_line(data, 15)) == find  # on an overload signature: the whole group
    source = b"""/** Parse. */
export function parse(text: string): number;
// with a radix
export function parse(text: string, radix: number): number;
export function parse(text: string, radix = 10): number {
  return parseInt(text, radix);
}

interface Shape {
  area(scale: number): number;
  area(): number;
  name(): string;
}
declare function g(a: number): void;
const x = 1;
declare function g(a: string): void;
"""
    defs = definitions(source, language_for("a.ts"))
    assert [(d.name, d.line, d.end_line) for d in defs] == [
        ("parse", 1, 7),  # the implementation's leading comment, its signatures and the comment between them
        ("Shape", 9, 13),
        ("Shape.area", 10, 11),  # signatures alone (an interface): still one group
        ("Shape.name", 12, 12),
        ("g", 14, 14),  # code between: not one group
        ("g", 16, 16),
    ]
    listed = file_context(source, language_for("a.ts"), defs[:1])[-1]
    assert listed.startswith("function parse(text: string, radix = 10)")  # the implementation's line


def test_python_overload_stubs_and_property_setters_belong_to_their_definition():
    source = b"""import typing


class Store:
    @typing.overload
    def get(self, key: int) -> str: ...
    @overload  # by key
    def get(self, key: str) -> str: ...
    def get(self, key):
        return str(key)

    @property
    def size(self):
        return 1

    @size.setter
    def size(self, value):
        pass

    @other.setter
    def size(self, value):
        pass


def get(key):
    return key


def get(key):
    return key
"""
    defs = definitions(source, language_for("a.py"))
    assert [(d.name, d.line, d.end_line) for d in defs] == [
        ("Store", 4, 22),
        ("Store.get", 5, 10),
        ("Store.size", 12, 18),  # a property with its setter
        ("Store.size", 20, 22),  # another property's setter: not this one's
        ("get", 25, 26),  # redefined, not overloaded: two definitions
        ("get", 29, 30),
    ]


def test_a_comment_ending_a_line_of_code_is_not_the_next_definition_s():
    """`LIMIT = 10  # the most` right above `def f`: the comment is that line's, and the line is not f's to rewrite."""
    source = b"import os\nLIMIT = 10  # the most\ndef f(x):\n    return min(x, LIMIT)\n"
    (f,) = definitions(source, language_for("a.py"))
    assert source[f.start : f.end] == b"def f(x):\n    return min(x, LIMIT)\n"
    source = b"let n = 1; // one\n// Doubles.\nfunction g(x) {\n  return 2 * x;\n}\n"
    (g,) = definitions(source, language_for("a.js"))
    assert source[g.start : g.end].startswith(b"// Doubles.\nfunction g")


@pytest.mark.parametrize("file", ["a.js", "a.ts"])
def test_functions_given_as_values_are_definitions_when_alone_on_their_lines(file):
    source = b"""class Button extends Component {
  handleClick = (event) => {
    this.setState({ clicked: true });
  };
  static create = function () {
    return new Button();
  };
  label = "ok";
}
const api = {
  fetch(url) {
    return get(url);
  },
  post: async (url, body) => {
    return send(url, body);
  }, // posts
  "delete": function (url) {
    return drop(url);
  },
  retries: 3,
};
const short = { a: () => 1, b: () => 2 };
module.exports.helper = function (x) {
  return x + 1;
};
Button.prototype.size = () => 1;
x.y = function () {}; x.z = () => 1;
if (ok) handlers.go = () => run();
"""
    defs = definitions(source, language_for(file))
    assert [(d.name, d.line, d.end_line) for d in defs] == [
        ("Button", 1, 9),
        ("Button.handleClick", 2, 4),  # a class field holding a function
        ("Button.create", 5, 7),
        ("fetch", 11, 13),
        ("post", 14, 16),  # an object's key holding one
        ("delete", 17, 19),
        ("module.exports.helper", 23, 25),  # a property given one, in a statement of its own
        ("Button.prototype.size", 26, 26),
    ]  # not `label`, `retries` (no functions); not `a`, `b`, `x.y`, `x.z`, `handlers.go` (their lines hold more)
    assert find_by_name(defs, "helper").name == "module.exports.helper"
    assert find_at(defs, offset_of_line(source, 3)).name == "Button.handleClick"  # not the whole class


def test_go_methods_of_generic_types_are_named_by_their_type():
    source = b"""package main

func (s *Stack[T]) Pop() (T, bool) {
\treturn s.items[0], true
}

func (m Map[K, V]) Get(k K) V { return m.data[k] }

func (Stack[T]) Name() string { return "stack" }
"""
    defs = definitions(source, language_for("a.go"))
    assert [d.name for d in defs] == ["Stack.Pop", "Map.Get", "Stack.Name"]  # was Stack[T].Pop, V].Get
    assert find_by_name(defs, "Map.Get").line == 7


def test_rust_impls_and_cpp_templates_are_named_without_type_arguments():
    rust = b"""impl<T: Clone> Stack<T> {
    fn pop(&mut self) -> Option<T> {
        self.items.pop()
    }
}

impl<T> std::fmt::Display for Stack<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        write!(f, "stack")
    }
}

impl Iterator for &mut Counter {
    fn next(&mut self) -> Option<u32> { None }
}
"""
    assert [d.name for d in definitions(rust, language_for("a.rs"))] == ["Stack.pop", "Stack.fmt", "Counter.next"]
    cpp = b"""template <typename T>
T Matrix<T>::get(int i) {
  return data[i];
}
template <typename T>
bool Vec<T>::operator<(const Vec<T>& o) const { return n < o.n; }
std::ostream& operator<<(std::ostream& os, const Vec<int>& v) { return os; }
"""
    assert [d.name for d in definitions(cpp, language_for("a.cpp"))] == ["Matrix.get", "Vec.operator<", "operator<<"]


def test_csharp_members_with_code_are_definitions():
    source = b"""namespace Shop
{
    public class Cart<T>
    {
        public int Count
        {
            get { return items.Count; }
        }

        public decimal Total => items.Sum(i => i.Price);

        public int Size { get; set; }

        public T this[int i] => items[i];

        public static Cart<T> operator +(Cart<T> a, T b) { a.items.Add(b); return a; }

        ~Cart() { Dispose(); }
    }
}
"""
    defs = definitions(source, language_for("a.cs"))
    assert [(d.name, d.line, d.end_line) for d in defs] == [
        ("Shop.Cart", 3, 19),
        ("Shop.Cart.Count", 5, 8),  # a cursor in its getter rewrites the property, not the whole class
        ("Shop.Cart.Total", 10, 10),
        ("Shop.Cart.this", 14, 14),  # not `Size { get; set; }`: no code to rewrite
        ("Shop.Cart.operator+", 16, 16),
        ("Shop.Cart.~Cart", 18, 18),
    ]
    assert find_at(defs, offset_of_line(source, 7)).name == "Shop.Cart.Count"


def test_lua_functions_given_as_values_keep_their_leading_comments():
    source = b"local M = {}\n\n-- Adds one.\nM.helper = function(x)\n  return x + 1\nend\n\n"
    source += b"local t = { f = function() end }\n"
    defs = definitions(source, language_for("a.lua"))
    assert [(d.name, d.line, d.end_line) for d in defs] == [("M.helper", 3, 6)]


def test_simple_names_and_suffixes_find_methods():
    _, _, defs = load("matrix.cpp")
    assert find_by_name(defs, "transpose").name == "linalg.Matrix.transpose"
    assert find_by_name(defs, "clamp").line == 27
    _, _, defs = load("cart.js")
    assert find_by_name(defs, "describe").kind == "variable_declarator"


def test_a_place_outside_every_definition_names_the_nearest():
    """Between two definitions: the one ending last above and the one starting first below, the enclosing one of
    those ending or starting alike (a class, not its last method); after the last, the last; none at all, said."""
    _, data, defs = load("shapes.py")
    lines = data.decode().splitlines()
    gap = next(i for i, line in enumerate(lines, 1) if line.startswith("class Circle")) - 1
    with pytest.raises(
        LocateError, match=r"there; the nearest: Rect \(lines 7-18\) above and Circle \(lines 21-26\) below$"
    ):
        find_at(defs, offset_of_line(data, gap))
    with pytest.raises(LocateError, match=r"there; the nearest: total_area \(lines 29-33\) above$"):
        find_at(defs, len(data))
    with pytest.raises(LocateError, match="there; the file has none$"):
        find_at([], 0)
    # A range over parts of several: the outermost of those it crosses, not the nearest.
    circle = data.index(b"class Circle")
    with pytest.raises(LocateError, match="holds the whole range: it crosses Rect, Circle, total_area$"):
        find_at(defs, circle - 20, data.index(b"def total_area") + 10)
    with pytest.raises(LocateError, match="it crosses Circle, total_area$"):
        find_at(defs, circle, len(data))


NESTED = b"""def outer(x):
    def helper(y):
        return y + 1
    return helper(x)


def other(x):
    def helper(y):
        return y * 2

    class Local:
        def m(self):
            return 3

    return helper(x)


class K:
    def m(self):
        def helper():
            return 1
        return helper()
"""


def test_a_nested_function_is_named_with_the_functions_around_it():
    """Only classes qualify a definition's name (`helper`, `Local.m`, `K.helper`); `--function` also takes the
    functions around it, which tell two nested functions of one name apart, and the errors name them so."""
    defs = definitions(NESTED, language_for("x.py"))
    assert [d.name for d in defs] == ["outer", "helper", "other", "helper", "Local", "Local.m", "K", "K.m", "K.helper"]
    assert nested_names(defs) == [
        *("outer", "outer.helper", "other", "other.helper", "other.Local", "other.Local.m"),
        *("K", "K.m", "K.m.helper"),
    ]
    assert find_by_name(defs, "outer.helper").line == 2
    assert find_by_name(defs, "other.helper").line == 8
    assert find_by_name(defs, "K.m.helper").line == 20
    assert find_by_name(defs, "m.helper").line == 20
    assert find_by_name(defs, "other.Local.m").line == 12
    assert find_by_name(defs, "K.m").line == 19  # its own name first: not other.Local.m
    with pytest.raises(
        LocateError,
        match=r"2 definitions match 'helper' \(outer.helper at line 2, other.helper at line 8\): use --line, or ",
    ):
        find_by_name(defs, "helper")
    with pytest.raises(LocateError, match="did you mean outer.helper or other.helper"):
        find_by_name(defs, "outr.helper")


def test_helpful_errors():
    _, data, defs = load("stack.go")
    with pytest.raises(LocateError, match="no function, method or class named 'Peek'.*Stack.Pop"):
        find_by_name(defs, "Peek")
    with pytest.raises(
        LocateError, match=r"no function, method or class there; the nearest: Stack \(lines 5-8\) below$"
    ):
        find_at(defs, offset_of_line(data, 1))
    with pytest.raises(LocateError, match="past the end"):
        offset_of_line(data, 999)
    with pytest.raises(LocateError, match="--language"):
        language_for("notes.txt")
    with pytest.raises(LocateError, match="unknown language 'cobol'"):
        language_for("x.py", "cobol")
    assert language_for("x", "ts").name == "typescript"


def test_columns_count_characters_not_bytes():
    data = "def f():\n    s = 'héllo'; return s\n".encode()
    assert data[offset_of_line(data, 2, 12) :].startswith(b"llo")


def test_the_file_context_shows_short_python_functions_whole_on_one_line():
    source = (
        b"import math\n\n\n"
        b"class Grid:\n"
        b"    def __init__(self, rows):\n"
        b'        """The rows."""\n'
        b"        self.rows = rows\n"
        b"        self.seen = set()  # visited\n\n"
        b"    def height(self):\n"
        b"        return len(self.rows)\n\n"
        b"    def walk(self):\n"
        b"        for row in self.rows:\n"
        b"            yield row\n\n"
        b"    def wide(self,\n"
        b"             n):\n"
        b"        return n\n"
    )
    spec = language_for("grid.py")
    lines = file_context(source, spec, definitions(source, spec))
    assert lines == [
        "import math",
        "class Grid:",
        "def __init__(self, rows): self.rows = rows; self.seen = set()",
        "def height(self): return len(self.rows)",
        "def walk(self):",  # a compound body: the signature only
        "def wide(self,",  # a signature over several lines: as before
    ]
    for line in lines[2:4]:
        compile(line, "<context>", "exec")  # each shown whole is valid Python on its own
    js = b"function f(a) {\n  return a;\n}\n"
    assert file_context(js, language_for("f.js"), definitions(js, language_for("f.js"))) == ["function f(a) {"]
    # a CommonJS file's requires are its imports: the model is shown them
    js = b'const fs = require("fs");\nconst n = 1;\n' + js
    shown = file_context(js, language_for("f.js"), definitions(js, language_for("f.js")))
    assert shown == ['const fs = require("fs");', "function f(a) {"]


def test_the_file_context_lists_the_rest_of_the_file_not_the_code_to_edit():
    """The code to edit shows the target whole, a class's methods with it: the file context leaves them out (a
    method's class stays, as its scope) and keeps them for the file's other definitions."""
    from editspec.rewrite import Rewriter, SourceFile
    from tests.scripted import scripted_decoder

    source = SourceFile.from_bytes(
        b"import math\n\n\nclass Grid:\n    def __init__(self, rows):\n        self.rows = rows\n\n"
        b"    def height(self):\n        return len(self.rows)\n\n\ndef area(g):\n    return g.height()\n"
    )
    spec = language_for("grid.py")
    defs = definitions(source.text.encode(), spec)
    rewriter = Rewriter(scripted_decoder())

    def context(name):
        prompt, _, _, n = rewriter.prompt_tokens(source, spec, find_by_name(defs, name), "Add type hints.")
        text = rewriter.backend.detokenize(prompt)
        listed = text.split("among others:\n", 1)[1].split("\n\n", 1)[0].splitlines()
        assert len(listed) == n
        return [line.removeprefix("- `").removesuffix("`") for line in listed]

    init, height = "def __init__(self, rows): self.rows = rows", "def height(self): return len(self.rows)"
    assert context("Grid") == ["import math", "def area(g): return g.height()"]
    assert context("area") == ["import math", "class Grid:", init, height]
    assert context("Grid.height") == ["import math", "class Grid:", init, "def area(g): return g.height()"]


# (file name, the file, an answer opening with imports, the file with those imports where they go)
IMPORTS = [
    (
        "a.py",
        "import os\n\n\ndef f():\n    pass\n",
        "from typing import Any\nimport re\n\ndef f() -> Any:\n    pass\n",
        "import os\nfrom typing import Any\nimport re\n\n\ndef f():\n    pass\n",
    ),
    (
        "a.py",
        '"""Doc."""\nimport os\n\n\ndef f():\n    pass\n',
        "from __future__ import annotations\n\ndef f():\n    pass\n",
        '"""Doc."""\nfrom __future__ import annotations\nimport os\n\n\ndef f():\n    pass\n',
    ),
    (
        "a.js",
        "import fs from 'fs';\n\nfunction f() {}\n",
        "import path from 'path';\n\nfunction f() { return path.sep; }\n",
        "import fs from 'fs';\nimport path from 'path';\n\nfunction f() {}\n",
    ),
    (  # CommonJS: a require is an import, and goes after the file's
        "a.js",
        '"use strict";\nconst fs = require("fs");\nconst { sep } = require("path");\n\nfunction f() {}\n',
        "const os = require('os').constants;\n\nfunction f() { return os; }\n",
        '"use strict";\nconst fs = require("fs");\nconst { sep } = require("path");\n'
        "const os = require('os').constants;\n\nfunction f() {}\n",
    ),
    (  # with none, after "use strict", which must stay the first statement (else strict mode is off)
        "a.js",
        '"use strict";\n\nconst N = 1;\n\nfunction f() {}\n',
        "const { sumBy } = require('lodash');\n\nfunction f() {}\n",
        "\"use strict\";\nconst { sumBy } = require('lodash');\n\nconst N = 1;\n\nfunction f() {}\n",
    ),
    (
        "a.go",
        "package main\n\nfunc f() {}\n",
        'import "strings"\n\nfunc f() { strings.ToUpper("") }\n',
        'package main\nimport "strings"\n\nfunc f() {}\n',
    ),
    (
        "a.rs",
        "use std::fmt;\n\nfn f() {}\n",
        "use std::collections::HashMap;\n\nfn f() {}\n",
        "use std::fmt;\nuse std::collections::HashMap;\n\nfn f() {}\n",
    ),
    (
        "a.kt",
        "package a\n\nimport java.io.File\n\nfun f() {}\n",
        "import kotlin.math.abs\n\nfun f() = abs(-1)\n",
        "package a\n\nimport java.io.File\nimport kotlin.math.abs\n\nfun f() {}\n",
    ),
    (
        "a.php",
        "<?php\n\nuse A\\B;\n\nfunction f() {}\n",
        "use A\\C;\n\nfunction f() { return new C(); }\n",
        "<?php\n\nuse A\\B;\nuse A\\C;\n\nfunction f() {}\n",
    ),
]


@pytest.mark.parametrize(("name", "text", "answer", "expected"), IMPORTS)
def test_an_answer_s_leading_imports_go_where_the_file_s_imports_are(name, text, answer, expected):
    spec = language_for(name)
    imports, rest = leading_imports(answer, spec)
    assert imports and rest.startswith(("def ", "function ", "func ", "fn ", "fun "))
    data = text.encode()
    target = data.rindex(b"\n", 0, data.index(b" f(")) + 1
    at, block = import_insertion(data, parse(data, spec), spec, target, imports)
    assert (data[:at] + block.encode() + data[at:]).decode() == expected


@pytest.mark.parametrize(
    "answer",
    [
        "import math\n",  # only imports: nothing to rewrite the function with
        "def f():\n    import math\n",  # inside the function: the function's own business
        "# uses math\nimport math\n\ndef f():\n    pass\n",  # a comment first: not an answer that opens with imports
        "package main\n\nfunc f() {}\n",  # a package line is no import
        "package a\n\nfun f() {}\n",  # (Kotlin's)
        "const N = require('n') + 1;\n\nfunction f() {}\n",  # a value made of a require is no import
    ],
)
def test_answers_that_do_not_open_with_imports_are_left_as_they_are(answer):
    name = (
        "a.kt" if "fun " in answer else "a.go" if answer.startswith("package") else "a.js" if "{" in answer else "a.py"
    )
    assert leading_imports(answer, language_for(name)) == ([], answer)


@pytest.mark.parametrize(
    ("name", "present", "answer", "added"),
    [
        # names the file imports already are left out of a statement; one that brings nothing new goes
        (
            "a.py",
            ["from typing import List, Union"],
            ["from typing import List, Union, Dict"],
            ["from typing import Dict"],
        ),
        ("a.py", ["from typing import Dict, List"], ["from typing import List,  Dict"], []),
        ("a.py", ["import os"], ["import os, sys", "import sys"], ["import sys"]),
        # an alias is a name of its own; another module's name is another name
        ("a.py", ["import numpy"], ["import numpy as np"], ["import numpy as np"]),
        ("a.py", ["from a import x"], ["from b import x", "from .a import x"], ["from b import x", "from .a import x"]),
        # what the answer itself repeats, once
        (
            "a.py",
            [],
            ["from typing import List", "from typing import List, Dict"],
            ["from typing import List", "from typing import Dict"],
        ),
        # a star import is taken as it is, unless the file has it word for word
        ("a.py", ["from m import *"], ["from m import *", "from n import *"], ["from n import *"]),
        # JavaScript: a statement binding only names the file's imports bind already (binding one twice does not
        # load), whatever its quotes or kind
        (
            "a.js",
            ['const fs = require("fs");', 'import { join as j } from "path";'],
            ["const fs = require('fs');", "import fs from 'fs';", "import { join as j } from 'path';"],
            [],
        ),
        (
            "a.ts",
            ['import * as path from "path";'],
            ["const { sep, join: j } = require('path');", "import { x } from 'path';"],
            ["const { sep, join: j } = require('path');", "import { x } from 'path';"],
        ),
        # other languages: word for word only
        ("a.go", ['import "fmt"'], ['import "fmt"', 'import "os"'], ['import "os"']),
    ],
)
def test_an_answer_adds_only_the_imports_the_file_lacks(name, present, answer, added):
    assert new_imports(answer, present, language_for(name)) == added


@pytest.mark.parametrize("name", ["a.py", "a.js", "a.go"])
def test_a_byte_order_mark_is_in_no_definition(name):
    # A model shown the first definition writes it without the mark: the mark must not be in what it replaces.
    code = {
        "a.py": "def f(x):\n    return x\n",
        "a.js": "function f(x) {\n  return x;\n}\n",
        "a.go": "func f() int {\n\treturn 1\n}\n",
    }[name]
    data = "\ufeff".encode() + code.encode()
    spec = language_for(name)
    (first,) = definitions(data, spec)
    assert first.start == 3 and data[first.start : first.end] == code.encode()
    assert offset_of_line(data, 1) == 3 and offset_of_line(data, 1, 2) == 4
    assert find_at(definitions(data, spec), offset_of_line(data, 1)) == first


def test_definitions_sharing_a_target_s_lines_are_its_parent_and_neighbours_not_what_it_holds():
    spec = language_for("x.ts")
    data = (
        b"function total(xs) { const price = (x) => x.cost; return xs.map(price); } function none() {}\n"
        b"function f(a: string): string;\n"
        b"function f(a: any) { const g = () => 1; return g(); }\n"
        b"function h() {}\n"
        b"class K {\n  m() { return 1; }\n  n() {\n    return 2; } }\n"
    )
    python = (
        b"class P:\n    def a(self):\n        return 1\n\n    @property\n    def b(self):\n        return 2  # two\n"
    )
    pdefs = definitions(python, language_for("p.py"))
    assert [sharing_lines(pdefs, d, python) for d in pdefs] == [[], [], []]  # P ends where b does
    defs = definitions(data, spec)
    names = {d.name: d for d in defs}

    def sharing(name):
        return [d.name for d in sharing_lines(defs, names[name], data)]

    assert sharing("price") == ["total", "none"]
    assert sharing("total") == ["none"]  # price is part of total
    assert sharing("none") == ["total", "price"]
    assert sharing("f") == [] and sharing("h") == []  # its overload signature and what it holds are its own
    assert sharing("g") == ["f"]
    assert sharing("K.m") == [] and sharing("K.n") == ["K"]  # the class's last line is n's

    def at(text):  # the definition at a piece of the first line (the cursor of an editor)
        return find_at(defs, data.index(text.encode())).name

    assert [at("function total"), at("price ="), at("x.cost"), at("xs.map"), at("none")] == [
        "total",
        "price",
        "price",
        "total",
        "none",
    ]
    assert find_at(defs, 0).name == "total"  # the line's start: its first definition (what --line takes)

    # The prompt asks for the code shown whole when it holds other definitions: "`price` and nothing else" is
    # what a model obeys by leaving its parent out.
    from editspec.rewrite import Rewriter, SourceFile
    from tests.scripted import scripted_decoder

    rewriter = Rewriter(scripted_decoder())

    def last_line(name):
        prompt = rewriter.prompt_tokens(SourceFile.from_bytes(data), spec, names[name], "Round it.")[0]
        return rewriter.backend.detokenize(prompt).split("Instruction: Round it.\n", 1)[1].split("<|im_end|>", 1)[0]

    whole = "Write the complete edited code: `price` edited, everything else in it exactly as it is."
    assert last_line("price") == whole
    assert last_line("h") == "Write the complete edited code of `h` and nothing else."


@pytest.mark.parametrize(
    "name,text,target,before,after",
    [
        ("a.js", "function a(x){\n  return x + 1\n} a(1); // call it\n", "a", "", "a ( 1 ) ;"),
        ("a.js", "let n = 0; /* then */ function a(x){ return x + n }\n", "a", "let n = 0 ;", ""),
        ("a.js", "const a = () => 1, b = 2;\n", "a", "const", ", b = 2 ;"),  # the declaration is more than a
        ("a.js", "const a = () => 1 // one\n;\n", "a", "", ""),  # a comment inside it does not make it more
        ("a.js", "export function a(x) {\n  return x\n};  // ends\n", "a", "", ""),  # a closing semicolon is its
        ("a.d.ts", "export declare function a(x: number): void;\n", "a", "", ""),  # `declare` is its own
        ("a.go", "package m\n\nfunc a() int { return 1 }; var v = 2\n", "a", "", "; var v = 2"),
        ("a.c", "typedef struct P {\n  int x;\n} P, *PP;\n", "P", "typedef", "P , * PP ;"),
        ("a.py", "@cache\ndef a(): return 1; x = 2\n", "a", "", ""),  # x = 2 is a's body: Python shares no line
    ],
)
def test_the_code_on_a_definition_s_lines_that_is_not_its_own(name, text, target, before, after):
    """A rewrite replaces the target's whole lines, so the code on them that is not the target's (a call after
    its closing brace, a statement before it, the rest of a declaration) is in the code shown, and an answer must
    keep it (see tests/test_cli_exact.py)."""
    data = text.encode()
    spec = language_for(name)
    tree = parse(data, spec)
    found = find_by_name(definitions(data, spec, tree), target)
    assert [b" ".join(part).decode() for part in outside_code(tree, found, data)] == [before, after]
    # and the prompt asks for the code shown whole, not for "`a` and nothing else", which a model obeys by
    # leaving that code out
    from editspec.rewrite import Rewriter, SourceFile
    from tests.scripted import scripted_decoder

    rewriter = Rewriter(scripted_decoder())
    prompt = rewriter.backend.detokenize(rewriter.prompt_tokens(SourceFile.from_bytes(data), spec, found, "Go.")[0])
    whole = f"`{target}` edited, everything else in it exactly as it is." in prompt
    assert whole == bool(before or after)


@pytest.mark.parametrize(
    "sample, written, meant",
    [
        ("matrix.cpp", "Matrix::transpose", "linalg.Matrix.transpose"),
        ("matrix.cpp", "linalg::Matrix::at", "linalg.Matrix.at"),
        ("inventory.rs", "Inventory::count", "Inventory.count"),
        ("Ledger.php", "Ledger::balance", "Ledger.balance"),
        ("ledger.lua", "Ledger:balance", "Ledger.balance"),
        ("ledger.rb", "Ledger#add", "Books.Ledger.add"),
        ("ledger.rb", "Books::Ledger.balance", "Books.Ledger.balance"),
    ],
)
def test_a_name_in_the_languages_own_notation(sample, written, meant):
    _, _, defs = load(sample)
    assert find_by_name(defs, written).name == meant
    with pytest.raises(LocateError, match=re.escape(repr(written + "x"))):
        find_by_name(defs, written + "x")  # the error names what the user wrote


def test_a_mistyped_name_gets_the_nearest_names_in_full():
    _, _, defs = load("shapes.py")
    for typed, meant in [("totl_area", "total_area"), ("perimetr", "Rect.perimeter"), ("Circl.area", "Circle.area")]:
        with pytest.raises(LocateError, match=re.escape(f"named {typed!r}; did you mean {meant}? (found: Circle,")):
            find_by_name(defs, typed)
    with pytest.raises(LocateError, match=r"named 'areaa'; did you mean Rect\.area or Circle\.area\?"):
        find_by_name(defs, "areaa")  # a method's name: every method of that name
    with pytest.raises(LocateError, match=r"named 'zzz' \(found:"):
        find_by_name(defs, "zzz")  # nothing near: no guess
    many = "".join(f"def f{i}():\n    pass\n" for i in range(15)).encode()
    with pytest.raises(LocateError, match=r"f5, f6 and 3 more\)"):
        find_by_name(definitions(many, language_for("x.py")), "g")
