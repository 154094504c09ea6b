"""A success-rate chart as plain geometry: one bar per point, its 95% interval as a whisker.

The page draws it as inline SVG from these numbers in its template (autoescaped like the rest),
so there is no plotting library and no script; the axis runs 0-100%.
"""

from __future__ import annotations

from dataclasses import dataclass

WIDTH = 640
HEIGHT = 220
LEFT = 40  # room for the axis labels
TOP = 10
BOTTOM = 40  # room for the point labels
MAX_BAR = 48


@dataclass(slots=True)
class Point:
    """One value to plot: a label, a rate and its interval, all in 0..1."""

    label: str
    sublabel: str
    rate: float
    low: float
    high: float
    title: str  # the tooltip: the point's figures in words


@dataclass(slots=True)
class Bar:
    """Where one point is drawn, in SVG units."""

    x: float
    y: float
    width: float
    height: float
    centre: float
    whisker_top: float
    whisker_bottom: float
    label: str
    sublabel: str
    title: str


@dataclass(slots=True)
class Chart:
    """The bars and the gridlines (y, percent) of one chart."""

    width: int
    height: int
    left: int
    base: float
    bars: list[Bar]
    grid: list[tuple[float, int]]


def chart(points: list[Point]) -> Chart:
    """Lay ``points`` out left to right, oldest first."""
    plot_h = HEIGHT - TOP - BOTTOM
    base = TOP + plot_h

    def y(value: float) -> float:
        return round(base - max(0.0, min(1.0, value)) * plot_h, 1)

    slot = (WIDTH - LEFT) / max(1, len(points))
    width = min(MAX_BAR, slot * 0.6)
    bars = []
    for i, p in enumerate(points):
        centre = LEFT + slot * (i + 0.5)
        bars.append(
            Bar(
                x=round(centre - width / 2, 1),
                y=y(p.rate),
                width=round(width, 1),
                height=round(base - y(p.rate), 1),
                centre=round(centre, 1),
                whisker_top=y(p.high),
                whisker_bottom=y(p.low),
                label=p.label,
                sublabel=p.sublabel,
                title=p.title,
            )
        )
    grid = [(y(pct / 100), pct) for pct in (0, 25, 50, 75, 100)]
    return Chart(WIDTH, HEIGHT, LEFT, base, bars, grid)
