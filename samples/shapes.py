"""Geometry helpers used by the layout engine."""

import math
from dataclasses import dataclass


@dataclass
class Rect:
    width: float
    height: float

    def area(self):
        return self.width * self.height

    # Perimeter of the rectangle.
    @property
    def perimeter(self):
        return 2 * (self.width + self.height)


class Circle:
    def __init__(self, radius):
        self.radius = radius

    def area(self):
        return math.pi * self.radius**2


def total_area(shapes):
    total = 0
    for shape in shapes:
        total = total + shape.area()
    return total
