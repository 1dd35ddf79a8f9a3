"""editspec.properties: a Python method made a property (or a property made a method), and the uses that no longer
fit."""

from __future__ import annotations

from editspec.properties import property_change, property_misuses

METHOD = "    def area(self):\n        return 1.0\n"


def test_which_changes_are_judged():
    assert property_change(METHOD, "    @property\n" + METHOD) == "property"
    assert property_change(METHOD, "    @functools.cached_property\n" + METHOD) == "property"
    assert property_change("    @property\n" + METHOD, METHOD) == "method"
    assert property_change(METHOD, "    @staticmethod\n" + METHOD) == ""
    assert property_change(METHOD, "    def area(:\n") == ""


def test_the_uses_that_no_longer_fit():
    text = (
        "class Circle:\n"
        "    @property\n"
        "    def area(self):\n"  # 3
        "        return 1.0\n"
        "    def describe(self):\n"
        "        return f'{self.area():.2f} {self.area}'\n"  # 6: a call, and a read
        "\n"
        "def total(shapes):\n"
        "    return sum(s.area() for s in shapes)\n"  # 9: nothing else in the file is named area
        "\n"
        "print(Circle().area)\n"  # 11
    )
    assert property_misuses(text, "area", (2, 4), now_property=True) == [6, 9]
    assert property_misuses(text, "area", (2, 4), now_property=False) == [6, 11]
    # another class with an `area`: only the uses through self are this one's
    other = text + "\nclass Square:\n    def area(self):\n        return 4.0\n\nprint(Square().area())\n"
    assert property_misuses(other, "area", (2, 4), now_property=True) == [6]
    # a function, not a method: nothing to judge
    assert property_misuses("def area():\n    return 1\nx.area()\n", "area", (1, 2), now_property=True) == []
    assert property_misuses("class A(:\n", "area", (1, 1), now_property=True) == []
