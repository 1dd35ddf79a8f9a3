"""editspec.generators: a Python function made a generator (or a generator made ordinary), and the calls whose use
of its value no longer fits."""

from __future__ import annotations

from editspec.generators import generator_change, generator_misuses

LIST = "def evens(xs):\n    out = []\n    for x in xs:\n        out.append(x)\n    return out\n"
GEN = "def evens(xs):\n    for x in xs:\n        yield x\n"


def test_which_changes_are_judged():
    assert generator_change(LIST, GEN) == "generator"
    assert generator_change(GEN, LIST) == "ordinary"
    assert generator_change(LIST, LIST.replace("out", "found")) == ""
    # a nested function's yield is its own
    assert generator_change(LIST, "def evens(xs):\n    def g():\n        yield 1\n    return list(g())\n") == ""
    # a decorator may make anything of a generator (`@contextmanager`), and an async one is awaited
    assert generator_change(LIST, "@contextmanager\n" + GEN) == ""
    assert generator_change(LIST, GEN.replace("def", "async def")) == ""
    assert generator_change(LIST, "def h():\n    pass\n\n\n" + GEN, ("evens", "evens")) == "generator"  # a helper first
    assert generator_change(LIST, "def evens(:\n") == ""  # does not parse


def test_the_uses_that_no_longer_fit_a_generator():
    text = GEN + (
        "\n\n"
        "def report(xs):\n"  # 6
        "    found = evens(xs)\n"
        "    if not found:\n"  # 8: always true now
        "        return 'none'\n"
        "    return f'{len(found)} first {found[0]}'\n"  # 10
        "\n\n"
        "def fine(xs):\n"
        "    for x in evens(xs):\n"
        "        print(x)\n"
        "    total = sum(evens(xs))\n"
        "    some = [x for x in evens(xs)]\n"
        "    first = next(evens(xs))\n"
        "    yield from evens(xs)\n"
        "    return list(evens(xs)), 3 in evens(xs), helper(evens(xs)), (*evens(xs),)\n"
        "\n\n"
        "def twice(xs):\n"  # 23
        "    found = evens(xs)\n"
        "    a = max(found)\n"
        "    b = min(found)\n"  # 26: used up by max
        "    return a, b\n"
        "\n\n"
        "def branches(xs, fast):\n"
        "    found = evens(xs)\n"
        "    if fast:\n"
        "        return sorted(found)\n"
        "    else:\n"
        "        return sum(found)\n"  # not both run
        "\n\n"
        "evens(range(3))\n"  # 38: a statement of its own runs nothing
        "print(evens(range(3)))\n"  # 39
        "n = evens(range(4)) + [5]\n"  # 40
        "evens(range(5)).sort()\n"  # 41
        "\n\n"
        "def shadowed():\n"
        "    def evens(xs):\n"
        "        return [1]\n"
        "    return len(evens([]))\n"  # its own evens
    )
    assert generator_misuses(text, "evens", (1, 3), method=False, now_generator=True) == [8, 10, 26, 38, 39, 40, 41]
    # made ordinary again: next() on it fails; iterating it does not
    assert generator_misuses(text, "evens", (1, 3), method=False, now_generator=False) == [18]
    assert generator_misuses("def evens(:\n", "evens", (1, 1), method=False, now_generator=True) == []


def test_a_method_s_calls_are_through_self():
    text = (
        "class Shop:\n"
        "    def items(self):\n"
        "        yield 1\n"
        "\n"
        "    def count(self):\n"
        "        return len(self.items())\n"  # 6
        "\n"
        "    def each(self):\n"
        "        return [i for i in self.items()]\n"
        "\n\n"
        "print(len(items()))\n"  # another function's
    )
    assert generator_misuses(text, "items", (2, 3), method=True, now_generator=True) == [6]
