"""Names a Python rewrite reads that nothing defines (editspec/names.py)."""

from __future__ import annotations

import pytest

from editspec import names
from editspec.names import EAGER_ANNOTATIONS, brought_in


def names_brought_in(*spans) -> list[str]:
    return brought_in(*spans)[0]


def names_read_too_early(*spans) -> list[str]:
    return brought_in(*spans)[1]


FILE = (
    "import os\n"
    "from json import loads as parse\n"
    "LIMIT = 10\n"
    "\n"
    "\n"
    "def setup():\n"
    "    global CONFIG\n"
    "    CONFIG = {}\n"
    "\n"
    "\n"
    "class Box:\n"
    "    size = 3\n"
    "\n"
    "    def grow(self, n):\n"
    "        return self.size + n\n"
    "\n"
    "\n"
    "def total(xs):\n"
    "    return sum(xs)\n"
)
TOTAL = (18, 19)  # total's lines
GROW = (14, 15)


def rewritten(old: str, new: str) -> tuple[str, tuple[int, int]]:
    """The file with `old` replaced by `new`, and the replaced lines' span in the new file."""
    start = FILE.index(old)
    first = FILE.count("\n", 0, start) + 1
    return FILE.replace(old, new), (first, first + new.rstrip("\n").count("\n"))


def test_a_name_nothing_defines_is_reported_and_one_the_file_has_is_not():
    text, lines = rewritten("    return sum(xs)\n", "    return clamp(sum(xs), LIMIT) + len(os.sep) + len(CONFIG)\n")
    assert names_brought_in(FILE, TOTAL, text, (TOTAL[0], lines[1])) == ["clamp"]
    # Imports (as another name too), builtins, the module's and a `global`'s assignments are defined.
    text, lines = rewritten("    return sum(xs)\n", "    return parse(os.sep) or min(LIMIT, len(CONFIG))\n")
    assert names_brought_in(FILE, TOTAL, text, (TOTAL[0], lines[1])) == []


def test_a_helper_the_answer_writes_beside_it_defines_its_name():
    helper = "def clamp(x, top):\n    return min(x, top)\n\n\n"
    new = "def total(xs):\n    return clamp(sum(xs), LIMIT)\n"
    text = FILE.replace("def total(xs):\n    return sum(xs)\n", helper + new)
    first = TOTAL[0]
    assert names_brought_in(FILE, TOTAL, text, (first, first + 5)) == []


def test_a_method_reading_a_class_attribute_by_its_bare_name_is_reported():
    text, _ = rewritten("        return self.size + n\n", "        return size + n\n")
    assert names_brought_in(FILE, GROW, text, GROW) == ["size"]


def test_names_the_code_read_undefined_before_are_not_the_rewrites():
    old = FILE.replace("    return sum(xs)\n", "    return sum(xs) + OFFSET\n")
    new = old.replace("sum(xs)", "sum(x for x in xs if x)")
    assert names_brought_in(old, TOTAL, new, TOTAL) == []
    # ... and inside a comprehension, a new undefined name still counts.
    newer = old.replace("sum(xs)", "sum(x for x in xs if x > FLOOR)")
    assert names_brought_in(old, TOTAL, newer, TOTAL) == ["FLOOR"]


def test_nothing_is_reported_where_it_cannot_be_told():
    star = "from math import *\n" + FILE
    text = star.replace("    return sum(xs)\n", "    return floor(sum(xs))\n")
    shifted = (TOTAL[0] + 1, TOTAL[1] + 1)
    assert names_brought_in(star, shifted, text, shifted) == []  # floor may come from the star import
    broken = FILE.replace("    return sum(xs)\n", "    return clamp(sum(xs)\n")
    assert names_brought_in(FILE, TOTAL, broken, TOTAL) == []  # does not parse: the syntax check says so
    deep = "def f(x=" + "+".join(["1"] * 20000) + "):\n    return x\n"  # deeper than Python's parser recurses
    assert names_brought_in(deep, (1, 2), deep.replace("return x", "return y"), (1, 2)) == []


def test_other_definitions_of_the_file_are_not_the_rewrites_business():
    old = FILE.replace("        return self.size + n\n", "        return self.size + n + MISSING\n")
    assert names_brought_in(old, TOTAL, old, TOTAL) == []  # the undefined name is in grow, not in total


def test_a_signature_is_read_where_the_definition_stands():
    """Annotations, defaults and decorators are evaluated when the `def` runs, in the module (or the class body):
    `List` unimported fails at import time. A lambda's own parameter is its own; a class attribute is visible to a
    method's signature; postponed annotations are never evaluated."""
    hinted = "def total(xs: List[int], key=lambda v: v, sep=os.sep) -> Number:\n    return sum(xs)\n"
    text, lines = rewritten("def total(xs):\n    return sum(xs)\n", hinted)
    assert names_brought_in(FILE, TOTAL, text, lines) == ["List", "Number"]
    decorated, lines = rewritten("def total(xs):\n", "@cached\ndef total(xs):\n")
    assert names_brought_in(FILE, TOTAL, decorated, (TOTAL[0], TOTAL[1] + 1)) == ["cached"]
    postponed = "from __future__ import annotations\n" + text
    assert names_brought_in(FILE, TOTAL, postponed, (TOTAL[0] + 1, TOTAL[1] + 1)) == []
    text, _ = rewritten("    def grow(self, n):\n", "    def grow(self, n: int = size) -> int:\n")
    assert names_brought_in(FILE, GROW, text, GROW) == []  # `size` is the class body's, where this is read


def test_what_python_defines_out_of_sight_is_not_reported():
    """A function that declares a name global and imports it defines it; a file that calls globals(), vars() or
    exec can define any name (the standard library's ssl and re do), so it gets no note; and a function named
    `top`, which Python 3.11's symtable takes for the module, still has its parameters."""
    lazy = FILE.replace("    global CONFIG\n", "    global CONFIG, json\n    import json\n")
    text = lazy.replace("    return sum(xs)\n", "    return json.dumps(sum(xs))\n")
    lines = (TOTAL[0] + 1, TOTAL[1] + 1)
    assert names_brought_in(lazy, lines, text, lines) == []
    magic = FILE + "globals().update(RED=1)\n"
    text = magic.replace("    return sum(xs)\n", "    return sum(xs) + RED\n")
    assert names_brought_in(magic, TOTAL, text, TOTAL) == []
    named_top = FILE.replace("def total(xs):\n    return sum(xs)\n", "def top(xs, n):\n    return xs[:n]\n")
    text = named_top.replace("return xs[:n]", "return sorted(xs)[:n] + spare")
    assert names_brought_in(named_top, TOTAL, text, TOTAL) == ["spare"]


def test_a_method_signature_sees_every_name_its_class_body_binds():
    """Python evaluates a method's defaults and annotations in the class body, so whatever binds a name there
    (under an `if`, a `try`, a `for`, a `with`, a walrus) defines it for the signature; a name bound only in
    another method does not."""
    old = (
        "import sys\n"
        "\n"
        "\n"
        "class Units:\n"
        "    if sys.platform == 'win32':\n"
        "        unit = 'pt'\n"
        "    else:\n"
        "        unit = 'px'\n"
        "    try:\n"
        "        from decimal import Decimal as Exact\n"
        "    except ImportError:\n"
        "        Exact = float\n"
        "    for scale in (1, 2):\n"
        "        pass\n"
        "    with open(__file__) as source:\n"
        "        pass\n"
        "    limit = (depth := 3)\n"
        "\n"
        "    def other(self):\n"
        "        hidden = 1\n"
        "        return hidden\n"
        "\n"
        "    def show(self, n):\n"
        "        return n\n"
    )
    lines = (22, 23)
    new = old.replace(
        "    def show(self, n):\n",
        "    def show(self, n: Exact = scale, u=unit, s=source, d=depth, h=hidden) -> str:\n",
    )
    assert names_brought_in(old, lines, new, lines) == ["hidden"]


def test_a_nested_class_body_does_not_see_its_enclosing_class():
    old = "class Outer:\n    size = 3\n\n    class Inner:\n        def grow(self, n):\n            return n\n"
    new = old.replace("def grow(self, n):", "def grow(self, n=size):")
    assert names_brought_in(old, (5, 6), new, (5, 6)) == ["size"]


def test_python_s_view_of_a_file_shows_none_of_its_warnings():
    """The file's warnings are its own, not the rewrite's: an invalid escape sequence (a SyntaxWarning on stderr from
    Python 3.12 on, printed under the rewrite's diff) is not shown when the checks parse or compile it."""
    import warnings

    from editspec import pysource

    text = 'PATTERN = "\\d+"\n'
    with warnings.catch_warnings(record=True) as shown:
        warnings.simplefilter("always")
        assert pysource.tables(text) is not None and pysource.compile_error(text) is None
        assert names_brought_in(text, (1, 1), text + "x = PATTERN\n", (2, 2)) == []
    assert shown == []
    assert pysource.compile_error("def f():\n\tif 1:\n\t\treturn 1\n        return 2\n") == (
        "line 4: inconsistent use of tabs and spaces in indentation"
    )


EARLY = (
    "import typing\n"
    "\n"
    "\n"
    "class Point:\n"
    "    def __init__(self, x):\n"
    "        self.x = x\n"
    "\n"
    "    def add(self, other):\n"
    "        return Point(self.x + other.x)\n"
    "\n"
    "\n"
    "def make(p, n=3):\n"
    "    return p\n"
    "\n"
    "\n"
    "LIMIT = 3\n"
)
ADD = (8, 9)
MAKE = (12, 13)


def early(old: str, new: str, lines: tuple[int, int], prefix: str = "") -> list[str]:
    text = prefix + EARLY
    shift = prefix.count("\n")
    return names_read_too_early(text, lines, text.replace(old, new), (lines[0] + shift, lines[1] + shift))


@pytest.mark.skipif(not EAGER_ANNOTATIONS, reason="from Python 3.14 on, annotations are read when asked for")
def test_a_signature_that_reads_a_class_before_it_is_defined_is_reported():
    # Inside its own class, `Point` is not yet a name: the class is bound once its body has run.
    assert early("def add(self, other):", "def add(self, other: Point) -> Point:", ADD) == ["Point"]
    # Further down the file: `LIMIT` is bound after `make`'s `def` has run (its default is read then).
    assert early("def make(p, n=3):", "def make(p: Point, n=LIMIT):", MAKE) == ["LIMIT"]
    # Quoted, postponed, or read only in the body (when it runs, the module is done): nothing to report.
    assert early("def add(self, other):", 'def add(self, other: "Point") -> "Point":', ADD) == []
    postponed = "from __future__ import annotations\n"
    assert early("def add(self, other):", "def add(self, other: Point) -> Point:", ADD, postponed) == []
    assert early("        return p\n", "        return p if LIMIT else Point(0)\n", MAKE) == []


def test_a_default_read_too_early_is_reported_on_any_python():
    assert early("def make(p, n=3):", "def make(p, n=LIMIT):", MAKE) == ["LIMIT"]


def test_what_only_a_type_checker_reads_is_not_reported():
    text = (
        "from typing import TYPE_CHECKING\n\n"
        "if TYPE_CHECKING:\n    class Alias(Later):\n        pass\n\n\n"
        "class Later:\n    pass\n"
    )
    assert names.read_too_early(text, 1, 9) == set()
    assert names.read_too_early(text.replace("if TYPE_CHECKING:", "if True:"), 1, 9) == {"Later"}


def test_a_name_read_too_early_before_the_rewrite_is_not_the_rewrites():
    before = EARLY.replace("def add(self, other):", "def add(self, other) -> Point:")
    after = before.replace("def add(self, other) -> Point:", "def add(self, other: Point) -> Point:")
    assert names_read_too_early(before, ADD, after, ADD) == []


def test_vars_of_an_object_and_a_class_private_name_leave_the_check_on():
    """`vars(obj)` cannot define module names (a bare `vars()` or `globals()` can: no note then), and a class's
    `__marker` is its own though Python keeps it mangled."""
    text = (
        "class Box:\n"
        "    __marker = object()\n\n"
        "    def pop(self, key, default=__marker):\n"
        "        return vars(self).get(key, default)\n\n\n"
        "def total(xs):\n"
        "    return clamp(sum(xs))\n"
    )
    assert names.undefined(text, 1, 9) == {"clamp"}
    assert names.undefined(text.replace("vars(self)", "vars()"), 1, 9) is None


def test_a_star_import_becomes_the_names_the_code_reads():
    from editspec.names import explicit_stars, public_names

    assert "Optional" in public_names("typing") and "sqrt" in public_names("math")
    assert public_names("antigravity") is None and public_names("shapes_lib") is None  # not run to be listed
    text = "import os\n\n\ndef f(x: Optional[int] = None) -> List[str]:\n    return [sqrt(x), getcwd()]\n"
    stars = ["from typing import *", "from math import *", "from os import *", "from m import *"]
    # os's getcwd is there, but `from os import *` would bind it: it is read, so imported by name
    assert explicit_stars(stars, text, (4, 5)) == [
        "from typing import List, Optional",
        "from math import sqrt",
        "from os import getcwd",
        "from m import *",
    ]
    # a name an answer's own import binds is not asked of a star import
    assert explicit_stars(["from typing import List", "from typing import *"], text, (4, 5)) == [
        "from typing import List",
        "from typing import Optional",
    ]
    assert explicit_stars(["from math import *"], "def f():\n    return 1\n", (1, 2)) == []
    # a file whose names cannot all be told (bisect.py ends with `from _bisect import *`): by name all the same
    text = "def f(a: List) -> Any:\n    return sqrt(a[0])\n\n"
    text += "try:\n    from _bisect import *\nexcept ImportError:\n    pass\n"
    assert explicit_stars(
        ["from typing import *", "from math import *", "from collections import *"], text, (1, 2)
    ) == [
        "from typing import Any, List",
        "from math import sqrt",
    ]


def test_an_import_of_a_name_the_file_binds_itself_and_its_module_lacks_is_left_out():
    from editspec.names import without_own_names

    text = "import math\n\n\nclass TextWrapper:\n    pass\n\n\nShort = int\n\n\ndef shorten(s): return s\n"
    imports = ["from typing import List, TextWrapper", "from typing import Short as Short", "from os import path"]
    assert without_own_names(imports, text) == (
        ["from typing import List", "from os import path"],
        ["`TextWrapper` from typing", "`Short` from typing"],
    )
    # a name the module has stays, though the file binds it too
    assert without_own_names(["from os import path"], "path = 1\n") == (["from os import path"], [])
    # a name the module lacks and the file does not bind stays, for the missing-import note; a file that does not
    # parse: nothing can be told
    assert without_own_names(["from typing import Nope"], text) == (["from typing import Nope"], [])
    assert without_own_names(["from typing import TextWrapper"], "class TextWrapper(:\n") == (
        ["from typing import TextWrapper"],
        [],
    )


def test_an_import_of_a_name_a_standard_module_lacks():
    from editspec.names import missing_imports

    assert missing_imports(
        ["from os import normcase, path", "from collections import abc, OrderedDict", "import os", "from m import x"]
    ) == ["`normcase` from os (os.path has it)"]
    assert missing_imports(["from json import nope", "from . import x", "from typing import *"]) == ["`nope` from json"]
