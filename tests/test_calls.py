"""Calls a Python rewrite leaves that the called function cannot take (editspec/calls.py)."""

from __future__ import annotations

import pytest

from editspec.calls import async_change, calls_brought_in, coroutine_misuses, mismatches, parameter_changes

FILE = (
    "def area(w, h, *, unit='m'):\n"
    "    return w * h\n"
    "\n"
    "\n"
    "def total(boxes):\n"
    "    return sum(area(b.w, b.h) for b in boxes)\n"
    "\n"
    "\n"
    "class Box:\n"
    "    def grow(self, n, by=1):\n"
    "        return self.scale(n) + n * by\n"
    "\n"
    "    def scale(self, n):\n"
    "        return n\n"
    "\n"
    "    @staticmethod\n"
    "    def make(a):\n"
    "        return Box()\n"
    "\n"
    "    def again(self):\n"
    "        return self.make(1), self.grow(2, by=3)\n"
)


def texts(text: str) -> list[str]:
    found = mismatches(text)
    assert found is not None
    return [m.text() for m in found]


def test_a_well_called_file_has_no_mismatch():
    assert texts(FILE) == []


def test_every_way_a_call_can_miss_its_signature_is_named():
    calls = FILE.replace("area(b.w, b.h)", "area(b.w) + area(1, 2, 3) + area(1, 2, colour=1) + area(1, w=2)")
    assert texts(calls) == [
        "line 6: area(...) gets no `h`",
        "line 6: area(...) gets 3 positional arguments, takes at most 2",
        "line 6: area(...) gets keyword `colour`, which it does not take",
        "line 6: area(...) gets `w` twice",
    ]
    methods = FILE.replace("self.scale(n)", "self.scale(n, 2)").replace("self.make(1)", "self.make()")
    assert texts(methods) == [
        "line 11: self.scale(...) gets 2 positional arguments, takes at most 1",
        "line 21: self.make(...) gets no `a`",  # a staticmethod binds no `self`
    ]
    keyword_only = FILE.replace("*, unit='m'", "*, unit")
    assert texts(keyword_only) == ["line 6: area(...) gets no `unit`"]


def test_a_new_required_parameter_is_reported_at_the_file_s_calls():
    """The usual way: the rewrite gives a function a parameter without a default, and the file's other calls to it
    (which editspec did not touch) pass the old arguments."""
    new = FILE.replace("def area(w, h, *, unit='m'):", "def area(w, h, depth, *, unit='m'):")
    assert [m.text() for m in calls_brought_in(FILE, new)] == ["line 6: area(...) gets no `depth`"]
    defaulted = FILE.replace("def area(w, h, *, unit='m'):", "def area(w, h, depth=1, *, unit='m'):")
    assert calls_brought_in(FILE, defaulted) == []


def test_a_call_that_did_not_fit_before_is_not_the_rewrite_s():
    old = FILE.replace("self.scale(n)", "self.scale(n, 2)")
    new = old.replace("def grow(self, n, by=1):\n        return", "def grow(self, n, by=2):\n        return")
    assert texts(new) == ["line 11: self.scale(...) gets 2 positional arguments, takes at most 1"]
    assert calls_brought_in(old, new) == []
    moved = "import os\n\n\n" + new  # lines move: the same call all the same
    assert calls_brought_in(old, moved) == []


def test_what_cannot_be_told_is_not_judged():
    """`*args` or `**kwargs` in the call; a decorated function (the decorator may change what it takes); a name bound
    again (assigned, imported, a parameter of that name); a placeholder a subclass replaces; a method a subclass in the
    file defines again, or one set on an object (`self.scale = max`); a dunder; a class body's own binding of the
    name; an unparsable file."""
    for call in ("area(*sizes)", "area(**sizes)"):
        assert texts(FILE.replace("area(b.w, b.h)", call)) == []
    assert texts(FILE.replace("def area(", "@cache\ndef area(").replace("area(b.w, b.h)", "area(b.w)")) == []
    assert texts(FILE + "area = print\n" + "area(1)\n") == []
    assert texts(FILE.replace("def total(boxes):", "def total(boxes, area=print):").replace("b.w, b.h", "b")) == []
    placeholder = FILE.replace("        return n\n", "        raise NotImplementedError\n")
    assert texts(placeholder.replace("self.scale(n)", "self.scale(n, 2)")) == []
    overridden = FILE + "\n\nclass Crate(Box):\n    def scale(self, n, m):\n        return n * m\n"
    assert texts(overridden.replace("self.scale(n)", "self.scale(n, 2)")) == []
    instance = FILE.replace(
        "    def grow(self, n, by=1):\n", "    def grow(self, n, by=1):\n        self.scale = max\n"
    )
    assert texts(instance.replace("self.scale(n)", "self.scale(n, 2)")) == []
    dunder = (
        "class A:\n    def __init__(self, a):\n        self.a = a\n\n    def again(self):\n        self.__init__()\n"
    )
    assert texts(dunder) == []
    class_level = (
        "def size(a):\n    return a\n\n\nclass A:\n    def size(self):\n        return 1\n\n    s = size(0, 2)\n"
    )
    assert texts(class_level) == []
    assert mismatches("def f(:\n") is None


@pytest.mark.parametrize(
    ("old", "new", "in_class", "changes"),
    [
        # What a call passes: names, required ones, the order.
        ("def f(names, pat):\n    pass\n", "def f(names, pattern):\n    pass\n", False, ["renames `pat` to `pattern`"]),
        ("def f(a, b):\n    pass\n", "def f(b, a):\n    pass\n", False, ["reorders `a`, `b`"]),
        ("def f(a, b):\n    pass\n", "def f(a):\n    pass\n", False, ["drops `b`"]),
        ("def f(a, b):\n    pass\n", "def f(a, b, c):\n    pass\n", False, ["adds required `c`"]),
        ("def f(a):\n    pass\n", "def f(a, *, strict):\n    pass\n", False, ["adds required `strict`"]),
        # What no call can feel: types, formatting, a new optional one, a required one made optional.
        ("def f(a, b=1):\n    pass\n", "def f(a: int, b: int = 2) -> None:\n    pass\n", False, []),
        ("def f(\n    a,\n    b,\n):\n    pass\n", "def f(a, b):\n    pass\n", False, []),
        ("def f(a, b):\n    pass\n", "def f(a, b, c=None):\n    pass\n", False, []),
        ("def f(a, b):\n    pass\n", "def f(a, b=0):\n    pass\n", False, []),
        ("def f(a, b):\n    pass\n", "def f(a, **kw):\n    pass\n", False, []),  # `b` still taken
        # A method's own first parameter is not its callers'; a static method's is.
        ("    def m(self, x):\n        pass\n", "    def m(this, x):\n        pass\n", True, []),
        (
            "    @classmethod\n    def m(cls, x):\n        pass\n",
            "    @classmethod\n    def m(cls, x, y):\n        pass\n",
            True,
            ["adds required `y`"],
        ),
        (
            "    @staticmethod\n    def m(x):\n        pass\n",
            "    @staticmethod\n    def m(y):\n        pass\n",
            True,
            ["renames `x` to `y`"],
        ),
        # A method's string lines further left than its body; an answer that does not parse: nothing said.
        (
            '    def m(self, x):\n        s = """\nx\n"""\n',
            '    def m(self, y):\n        s = """\nx\n"""\n',
            True,
            ["renames `x` to `y`"],
        ),
        ("def f(a):\n    pass\n", "def f(a:\n    pass\n", False, []),
    ],
)
def test_parameter_changes_its_callers_can_feel(old, new, in_class, changes):
    assert parameter_changes(old, new, in_class) == changes


def test_a_function_made_async_or_not_and_the_calls_that_no_longer_fit():
    assert async_change("def f(x):\n    pass\n", "async def f(x):\n    pass\n") == "async"
    assert async_change("    async def m(self):\n        pass\n", "    def m(self):\n        pass\n") == "sync"
    assert async_change("def f(x):\n    pass\n", "def f(y):\n    pass\n") == ""
    assert async_change("def f(x):\n    pass\n", "async def f(x:\n    pass\n") == ""  # does not parse
    # a generator's calls are iterated, a decorated function's are the decorator's: not judged
    assert async_change("def f(x):\n    yield x\n", "async def f(x):\n    yield x\n") == ""
    assert async_change("@cache\ndef f(x):\n    pass\n", "@cache\nasync def f(x):\n    pass\n") == ""
    assert async_change("@staticmethod\ndef f(x):\n    pass\n", "@staticmethod\nasync def f(x):\n    pass\n") == "async"
    # the named function, not a helper the answer wrote before it
    helper_first = "async def g():\n    pass\n\n\ndef f(x):\n    pass\n"
    assert async_change("def f(x):\n    pass\n", helper_first, ("f", "f")) == ""
    assert async_change("def f(x):\n    pass\n", helper_first) == "async"
    text = (
        "import asyncio\n"
        "def report(xs):\n"
        "    print(total(xs))\n"  # 3: a coroutine, not the total
        "async def main(loop, group):\n"
        "    a = await total([1])\n"
        "    b = await asyncio.gather(*[total(x) for x in [[1]]])\n"
        "    asyncio.run(total([2]))\n"
        "    loop.run_until_complete(total([3]))\n"
        "    group.start_soon_with(coro=total([5]))\n"  # 9: handed to a wrapper (by name), which may await it
        "    return [y for y in total([4])]\n"  # 10: iterated, not awaited
        "async def total(xs):\n"
        "    return totals(1)\n"
    )
    assert coroutine_misuses(text, "total", (11, 12), method=False, now_async=True) == [3, 10]
    assert coroutine_misuses(text, "total", (11, 12), method=False, now_async=False) == [5, 6, 7, 8]
    assert coroutine_misuses(text, "total", (1, 10), method=False, now_async=True) == []  # not defined there
    # a function that binds the name of its own calls its own (a parameter, a local def, an import)
    shadowed = text + (
        "def local(total):\n    print(total(1))\n"
        "def nested():\n    def total(x):\n        return x\n    print(total(2))\n"
        "def imported():\n    from m import total\n    print(total(3))\n"
        "def declared():\n    global total\n    print(total(4))\n"  # 24: the module's
    )
    assert coroutine_misuses(shadowed, "total", (11, 12), method=False, now_async=True) == [3, 10, 24]
    methods = "class A:\n    async def run(self):\n        self.fetch()\n        await self.fetch()\n"
    methods += "        other.fetch()\n"  # another object's fetch: not this method's call
    methods += "    async def fetch(self):\n        pass\n"
    methods += "class B:\n    def fetch(self):\n        pass\n    def go(self):\n        self.fetch()\n"  # B's own
    assert coroutine_misuses(methods, "fetch", (6, 7), method=True, now_async=True) == [3]
    assert coroutine_misuses(methods, "fetch", (6, 7), method=True, now_async=False) == [4]
    assert coroutine_misuses("def f(:\n", "f", (1, 1), method=False, now_async=True) == []
