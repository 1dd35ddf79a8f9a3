"""Python: the uses a rewrite leaves that no longer fit its method after it made it a property (asked to "Make it a
property", the coder put `@property` above `def area(self)`, and the file's `self.area()` then called a float), or
made a property a method again (then `shape.area` gets the bound method, not the value, without a word).

A use is an attribute `.NAME`: through `self` or `cls` in the method's own class, or through anything where no
other definition in the file has that name (`s.area()` for `s` in `shapes`). Made a property, a use that calls
it; made a method, one that reads it without a call (assigning or deleting it is the property's setter's
business). Read with `ast`; a file that does not parse is not judged."""

from __future__ import annotations

import ast

from .calls import Function, _region_function, defined_at

# Decorators that make a method a property: `property`, `functools.cached_property` (either spelling).
PROPERTY = ("property", "cached_property")


def is_property(fn: Function) -> bool:
    for d in fn.decorator_list:
        name = d.attr if isinstance(d, ast.Attribute) else d.id if isinstance(d, ast.Name) else ""
        if name in PROPERTY:
            return True
    return False


def property_change(old_region: str, new_region: str, names: tuple[str, str] = ("", "")) -> str:
    """ "property" when a rewrite made its method a property, "method" when it made a property a method, else "" (also
    when a region does not parse). `names`: the method's name in each region."""
    old, new = _region_function(old_region, names[0]), _region_function(new_region, names[1])
    if old is None or new is None:
        return ""
    was, now = is_property(old), is_property(new)
    return "" if was == now else "property" if now else "method"


def property_misuses(text: str, name: str, lines: tuple[int, int], now_property: bool) -> list[int]:
    """The lines of `text` (a Python file) whose uses of the method `name`, defined on `lines` in a class, no longer
    fit it after `property_change`: made a property, a call of it; made a method, a read without a call. Empty
    when the file does not parse or no method of a class is defined there."""
    found = defined_at(text, name, lines)
    if found is None or not isinstance(found[1].get(found[2]), ast.ClassDef):
        return []
    tree, parent, own = found
    cls = parent[own]
    # Any receiver will do where nothing else in the file bears the name (a property's setter is the same one).
    others = [
        n
        for n in ast.walk(tree)
        if (isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) and n.name == name)
        or (isinstance(n, ast.Attribute) and n.attr == name and not isinstance(n.ctx, ast.Load))
        or (isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store))
    ]
    unique = all(n is own or parent.get(n) is cls for n in others)
    found: set[int] = set()
    for node in ast.walk(tree):
        if not (isinstance(node, ast.Attribute) and node.attr == name and isinstance(node.ctx, ast.Load)):
            continue
        through_self = (
            isinstance(node.value, ast.Name) and node.value.id in ("self", "cls") and _inside(node, cls, parent)
        )
        if not (through_self or unique):
            continue
        up = parent.get(node)
        called = isinstance(up, ast.Call) and up.func is node
        if called == now_property:
            found.add(node.lineno)
    return sorted(found)


def _inside(node: ast.AST, cls: ast.ClassDef, parent: dict) -> bool:
    while node is not None:
        if node is cls:
            return True
        node = parent.get(node)
    return False
