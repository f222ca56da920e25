"""Four-choice questions about rendered figures: the mini task of the Vision GRPO chapter.

Why these figures: the chapter's model has 2M parameters (Qwen2-VL layout, a 2-layer vision tower,
14x14 patches merged 2x2, so one image token sees a 28x28-pixel block) and learns from scratch in
minutes on a CPU. Every question is therefore decided by coarse, local features at 112x112 pixels:

    count     1-4 black dots far apart                 How many dots are in the figure?       1 / 2 / 3 / 4
    relation  a red and a blue shape, apart on one     Where is the red shape relative to     left / right /
              axis and nearly aligned on the other     the blue one?                          above / below
    length    four thick lines, one >= 1.4x the next   Which line is the longest?             colour names
    area      four squares or circles, one >= 1.6x     Which shape is the largest?            colour names
    angle     two black rays from one vertex, rotated  What kind of angle is drawn?           acute / right /
                                                                                              obtuse / straight

Drawing rules that keep those features easy to see: white background, four flat saturated colours,
no anti-aliasing (ImageDraw draws none, so every pixel is white or one of `COLOURS` and a colour's
pixels can be counted exactly), strokes >= 3 px, shapes never touching and >= 4 px (`BORDER`) from the
edge, no text in the image. Geometry is designed at 112 px (`DESIGN_SIZE`) and scaled to `size`.

Balanced answers: within each split and kind the gold letters come in shuffled blocks of A-D, so
always answering one letter scores 25%. Every kind keeps a fixed option order (the letter names the
answer; the colour kinds list red, green, blue, black), so the letter depends on the figure alone: with
options shuffled per figure, a model learning from scratch must also learn to look its answer up among
them, a second skill on top of seeing.

`facts` states the figure in words and numbers (measurements, positions, never the letter): the
text-instead-of-image control, which tells whether the vision tower or the language model is the
bottleneck. `blank_png` is the blank-image control.

Splits: one `random.Random(f"figures-{seed}")`, test then dev then train, so train size does not
change the held-out figures. A scene is the sorted tuple of its drawn shapes in integer pixels; a scene
already drawn is drawn again, so no figure occurs in two splits (`check_disjoint` checks it again).
"""

from __future__ import annotations

import io
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

from PIL import Image, ImageDraw

from arl.data.problem import check_split_sizes

KINDS = ("count", "relation", "length", "area", "angle")
LETTERS = "ABCD"
COLOURS = {"red": (230, 0, 0), "green": (0, 150, 0), "blue": (0, 0, 230), "black": (0, 0, 0)}
"""The fill of each colour name; the colour kinds use all four, in this order in `facts`."""
DESIGN_SIZE = 112
MIN_SIZE = 64
"""Below this, scaled dots and gaps shrink under a few pixels and four shapes no longer fit."""
BORDER = 4

QUESTIONS = {
    "count": "How many dots are in the figure?",
    "relation": "Where is the red shape relative to the blue one?",
    "length": "Which line is the longest?",
    "area": "Which shape is the largest?",
    "angle": "What kind of angle is drawn?",
}
COUNTS = ("1", "2", "3", "4")
RELATIONS = ("left", "right", "above", "below")
ANGLES = ("acute", "right", "obtuse", "straight")
ANGLE_DEGREES = {"acute": (25, 65), "right": (90, 90), "obtuse": (115, 155), "straight": (180, 180)}
SHAPE_WORDS = {"disc": "circle", "square": "square"}


@dataclass(frozen=True)
class Figure:
    id: str
    """Stable for a given seed, e.g. `fig-s0-test-00007`."""
    kind: str
    question: str
    choices: tuple[str, str, str, str]
    """The option texts, shown as `A. ...` to `D. ...`."""
    answer: str
    """The gold letter, A-D."""
    facts: str
    """What the figure shows in words and numbers, enough to answer without the image; never the letter."""
    scene: tuple
    """The drawn shapes, sorted: `(shape, colour, *integer pixels)` (see `render_scene`); the key for disjoint splits."""
    size: int
    """Image side in pixels."""

    def image(self) -> Image.Image:
        return render_scene(self.scene, self.size)

    def png(self) -> bytes:
        return _png(self.image())

    def solution(self) -> str:
        """The SFT target: one short sentence naming the gold option, then `\\boxed{letter}`."""
        gold = self.choices[LETTERS.index(self.answer)]
        return f"{_reason(self.kind, gold)}, so the answer is {self.answer}. \\boxed{{{self.answer}}}"


def _reason(kind: str, gold: str) -> str:
    if kind == "count":
        return "There is 1 dot" if gold == "1" else f"There are {gold} dots"
    if kind == "relation":
        return f"The red shape is {gold + ' of' if gold in ('left', 'right') else gold} the blue one"
    if kind == "length":
        return f"The {gold} line is the longest"
    if kind == "area":
        return f"The {gold} shape is the largest"
    return f"It is {'an' if gold[0] in 'aeiou' else 'a'} {gold} angle"


def question_text(fig: Figure) -> str:
    """The question, then the four options on their own lines: `A. ...` to `D. ...`."""
    return "\n".join([fig.question] + [f"{letter}. {choice}" for letter, choice in zip(LETTERS, fig.choices)])


def render_scene(scene: tuple, size: int) -> Image.Image:
    """Draw a scene on white. Shapes: `("disc", colour, cx, cy, r)` fills the 2r x 2r box from
    (cx - r, cy - r), so its area is about pi r^2; `("square", colour, x0, y0, side)`;
    `("line", colour, width, x0, y0, x1, y1, ...)` a polyline with rounded joints."""
    image = Image.new("RGB", (size, size), "white")
    draw = ImageDraw.Draw(image)
    for shape, colour, *numbers in scene:
        fill = COLOURS[colour]
        if shape == "disc":
            cx, cy, r = numbers
            draw.ellipse((cx - r, cy - r, cx + r - 1, cy + r - 1), fill=fill)
        elif shape == "square":
            x0, y0, side = numbers
            draw.rectangle((x0, y0, x0 + side - 1, y0 + side - 1), fill=fill)
        else:
            width, *points = numbers
            draw.line(points, fill=fill, width=width, joint="curve")
    return image


def _png(image: Image.Image) -> bytes:
    # No metadata is written, so the bytes depend only on the pixels (and the zlib build).
    buffer = io.BytesIO()
    image.save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def blank_png(size: int = DESIGN_SIZE) -> bytes:
    """A plain white image of the figures' size: the blank-image control."""
    _check_size(size)
    return _png(Image.new("RGB", (size, size), "white"))


# -- the kinds: each draws (shapes, choices, facts) with the gold option at position `gold` -----------


class _Redraw(Exception):
    """A random layout failed a constraint (no room left for a shape, a margin lost to rounding); the
    figure is drawn again."""


def _px(pixels: float, size: int) -> int:
    """A length designed at DESIGN_SIZE, scaled to `size`."""
    return max(1, round(pixels * size / DESIGN_SIZE))


def _stroke(size: int) -> int:
    return max(3, _px(4, size))


def _spot(draw, fits, tries: int = 200):
    """The first of `tries` candidates from `draw()` that `fits`; `_Redraw` when none does."""
    for _ in range(tries):
        candidate = draw()
        if fits(candidate):
            return candidate
    raise _Redraw


def _count(rng: random.Random, size: int, gold: int):
    n = gold + 1
    gap = _px(12, size)  # at least ~half a 28-px token block of white between dots
    dots: list[tuple[int, int, int]] = []
    for _ in range(n):
        r = rng.randint(_px(6, size), _px(8, size))
        lo, hi = BORDER + r, size - BORDER - r

        def draw():
            return rng.randint(lo, hi), rng.randint(lo, hi), r

        dots.append(_spot(draw, lambda d: all(math.dist(d[:2], e[:2]) >= d[2] + e[2] + gap for e in dots)))
    shapes = [("disc", "black", *dot) for dot in dots]
    return shapes, COUNTS, f"The figure shows {n} black dot{'s' if n > 1 else ''}."


def _blob(shape: str, colour: str, cx: int, cy: int, half: int) -> tuple:
    """A disc or square filling the 2*half box centred on (cx, cy)."""
    if shape == "disc":
        return ("disc", colour, cx, cy, half)
    return ("square", colour, cx - half, cy - half, 2 * half)


def _relation(rng: random.Random, size: int, gold: int):
    direction = RELATIONS[gold]
    red_half, blue_half = rng.randint(_px(8, size), _px(12, size)), rng.randint(_px(8, size), _px(12, size))
    red_shape, blue_shape = rng.choice(("disc", "square")), rng.choice(("disc", "square"))
    # Along the main axis the first shape sits lower (left / above); across it they nearly align.
    first, second = (red_half, blue_half) if direction in ("left", "above") else (blue_half, red_half)
    separation = max(_px(40, size), first + second + _px(12, size))

    def draw():
        return rng.randint(BORDER + first, size - BORDER - first), rng.randint(BORDER + second, size - BORDER - second)

    a_first, a_second = _spot(draw, lambda pair: pair[1] - pair[0] >= separation)
    offset, widest = _px(6, size), max(red_half, blue_half)
    across = rng.randint(BORDER + widest + offset, size - BORDER - widest - offset)
    across_first, across_second = across, across + rng.randint(-offset, offset)
    (red_main, red_across), (blue_main, blue_across) = (
        ((a_first, across_first), (a_second, across_second)) if direction in ("left", "above")
        else ((a_second, across_second), (a_first, across_first)))
    horizontal = direction in ("left", "right")
    red_xy = (red_main, red_across) if horizontal else (red_across, red_main)
    blue_xy = (blue_main, blue_across) if horizontal else (blue_across, blue_main)
    shapes = [_blob(red_shape, "red", *red_xy, red_half), _blob(blue_shape, "blue", *blue_xy, blue_half)]
    facts = (f"The red {SHAPE_WORDS[red_shape]} is centred at x={red_xy[0]}, y={red_xy[1]}; the blue "
             f"{SHAPE_WORDS[blue_shape]} at x={blue_xy[0]}, y={blue_xy[1]} (x grows rightward, y downward).")
    return shapes, RELATIONS, facts


def _point_segment(p, a, b) -> float:
    ab = (b[0] - a[0], b[1] - a[1])
    t = ((p[0] - a[0]) * ab[0] + (p[1] - a[1]) * ab[1]) / max(ab[0] ** 2 + ab[1] ** 2, 1e-9)
    t = min(1.0, max(0.0, t))
    return math.dist(p, (a[0] + t * ab[0], a[1] + t * ab[1]))


def _segment_gap(p, q, r, s) -> float:
    """Shortest distance between segments pq and rs: 0 when they cross, else from an endpoint."""
    def side(a, b, c):
        return (b[0] - a[0]) * (c[1] - a[1]) - (b[1] - a[1]) * (c[0] - a[0])

    if side(p, q, r) * side(p, q, s) < 0 and side(r, s, p) * side(r, s, q) < 0:
        return 0.0
    return min(_point_segment(p, r, s), _point_segment(q, r, s), _point_segment(r, p, q), _point_segment(s, p, q))


def _length(rng: random.Random, size: int, gold: int):
    order = tuple(COLOURS)
    longest = rng.randint(_px(48, size), _px(88, size))
    lengths = {c: longest if c == order[gold] else rng.randint(_px(14, size), int(longest / 1.4)) for c in COLOURS}
    width = _stroke(size)
    margin = BORDER + width // 2 + 1  # a wide line reaches width/2 beyond its centreline
    gap = width + _px(8, size)
    segments: dict[str, tuple[int, int, int, int]] = {}
    for colour in sorted(COLOURS, key=lambda c: -lengths[c]):  # longest first, while there is room
        length = lengths[colour]
        diagonal = round(length / math.sqrt(2))
        dx, dy = rng.choice(((length, 0), (0, length), (diagonal, diagonal), (diagonal, -diagonal)))

        def draw():
            x0 = rng.randint(margin, size - 1 - margin - dx)
            y0 = rng.randint(margin - min(dy, 0), size - 1 - margin - max(dy, 0))
            return x0, y0, x0 + dx, y0 + dy

        segments[colour] = _spot(draw, lambda seg: all(
            _segment_gap(seg[:2], seg[2:], other[:2], other[2:]) >= gap for other in segments.values()))
    drawn = {c: round(math.dist(segments[c][:2], segments[c][2:])) for c in COLOURS}
    first, second = sorted(drawn.values(), reverse=True)[:2]
    if first < 1.4 * second:  # rounding the diagonals can eat the margin
        raise _Redraw
    shapes = [("line", c, width, *segments[c]) for c in COLOURS]
    red, green, blue, black = (drawn[c] for c in COLOURS)
    facts = f"The red line is {red} pixels long, the green {green}, the blue {blue}, the black {black}."
    return shapes, order, facts


def _area(rng: random.Random, size: int, gold: int):
    order = tuple(COLOURS)
    scale = (size / DESIGN_SIZE) ** 2
    largest = rng.uniform(750 * scale, 1500 * scale)
    forms: dict[str, tuple[str, int]] = {}
    for colour in COLOURS:
        target = largest if colour == order[gold] else rng.uniform(150 * scale, largest / 1.6)
        shape = rng.choice(("disc", "square"))
        forms[colour] = (shape, round(math.sqrt(target / math.pi)) if shape == "disc" else round(math.sqrt(target)))
    areas = {c: round(math.pi * n * n) if shape == "disc" else n * n for c, (shape, n) in forms.items()}
    first, second = sorted(areas.values(), reverse=True)[:2]
    if first < 1.6 * second:  # rounding to whole pixels can eat the margin
        raise _Redraw
    gap = _px(8, size)
    boxes: dict[str, tuple[int, int, int]] = {}  # colour -> (x0, y0, side of the bounding box)
    for colour in sorted(COLOURS, key=lambda c: -areas[c]):
        shape, n = forms[colour]
        side = 2 * n if shape == "disc" else n

        def draw():
            return rng.randint(BORDER, size - BORDER - side), rng.randint(BORDER, size - BORDER - side), side

        boxes[colour] = _spot(draw, lambda box: all(
            box[0] + box[2] + gap <= x or x + s + gap <= box[0] or box[1] + box[2] + gap <= y or y + s + gap <= box[1]
            for x, y, s in boxes.values()))
    shapes = []
    for colour, (shape, n) in forms.items():
        x0, y0, side = boxes[colour]
        shapes.append(("disc", colour, x0 + n, y0 + n, n) if shape == "disc" else ("square", colour, x0, y0, n))
    red, green, blue, black = (f"{c} {SHAPE_WORDS[forms[c][0]]}" for c in COLOURS)
    facts = (f"The {red} covers {areas['red']} square pixels, the {green} {areas['green']}, "
             f"the {blue} {areas['blue']}, the {black} {areas['black']}.")
    return shapes, order, facts


def _angle(rng: random.Random, size: int, gold: int):
    name = ANGLES[gold]
    degrees = rng.randint(*ANGLE_DEGREES[name])
    rotation = rng.randrange(360)
    width = _stroke(size)
    margin = BORDER + width // 2 + 1
    ends = []
    for direction in (rotation, rotation + degrees):
        length = rng.randint(_px(30, size), _px(40, size))
        ends.append((round(length * math.cos(math.radians(direction))), -round(length * math.sin(math.radians(direction)))))
    xs, ys = (0,) + tuple(e[0] for e in ends), (0,) + tuple(e[1] for e in ends)
    vx = rng.randint(margin - min(xs), size - 1 - margin - max(xs))
    vy = rng.randint(margin - min(ys), size - 1 - margin - max(ys))
    (dx1, dy1), (dx2, dy2) = ends
    shapes = [("line", "black", width, vx + dx1, vy + dy1, vx, vy, vx + dx2, vy + dy2)]
    return shapes, ANGLES, f"Two black rays meet at a {degrees}-degree angle."


GENERATORS = {"count": _count, "relation": _relation, "length": _length, "area": _area, "angle": _angle}


# -- splits ---------------------------------------------------------------------------------------


def _check_size(size: int) -> None:
    if not isinstance(size, int) or size < MIN_SIZE:
        raise ValueError(f"size must be an integer >= {MIN_SIZE} (pixels per image side), got {size!r}")


def check_disjoint(splits: dict[str, Sequence[Figure]]) -> None:
    """Raise if a scene occurs twice, within a split or across splits."""
    seen: dict[tuple, str] = {}
    for split, figures in splits.items():
        for fig in figures:
            if fig.scene in seen:
                raise ValueError(f"duplicate scene: figure {fig.id} of {split!r} draws the same scene as a figure of "
                                 f"{seen[fig.scene]!r}; splits must be disjoint by scene")
            seen[fig.scene] = split


def draw_figures(rng: random.Random, n: int, seen: set[tuple], id_prefix: str, size: int,
                 kinds: tuple[str, ...]) -> list[Figure]:
    """`n` figures whose scenes are not in `seen` (and are added to it), kinds in turn, each kind's gold
    letters in shuffled blocks of A-D."""
    figures: list[Figure] = []
    pending = {kind: [] for kind in kinds}  # gold positions left in each kind's current block
    attempts = 0
    while len(figures) < n:
        attempts += 1
        if attempts > 100 * n + 1000:
            raise RuntimeError(f"could not draw {n} distinct figures; ask for fewer")
        kind = kinds[len(figures) % len(kinds)]
        if not pending[kind]:
            pending[kind] = rng.sample(range(len(LETTERS)), len(LETTERS))
        gold = pending[kind][-1]
        try:
            shapes, choices, facts = GENERATORS[kind](rng, size, gold)
        except _Redraw:
            continue
        scene = tuple(sorted(shapes))
        if scene in seen:
            continue
        seen.add(scene)
        pending[kind].pop()
        figures.append(Figure(f"{id_prefix}-{len(figures):05d}", kind, QUESTIONS[kind], tuple(choices),
                              LETTERS[gold], facts, scene, size))
    return figures


def make_split(n_train: int, n_dev: int, n_test: int, seed: int = 0, size: int = DESIGN_SIZE,
               kinds: Sequence[str] = KINDS) -> tuple[list[Figure], list[Figure], list[Figure]]:
    """Return `(train, dev, test)`: fixed for a given seed, size and kinds, disjoint by scene; test and
    dev are drawn first, so they do not depend on `n_train`."""
    check_split_sizes(n_train, n_test)
    if not isinstance(n_dev, int) or n_dev < 0:
        raise ValueError(f"n_dev must be a non-negative integer, got {n_dev!r}")
    _check_size(size)
    kinds = tuple(kinds)
    if not kinds or any(kind not in KINDS for kind in kinds):
        raise ValueError(f"kinds={kinds!r}: choose a non-empty sequence of {KINDS}")
    rng = random.Random(f"figures-{seed}")
    seen: set[tuple] = set()
    test = draw_figures(rng, n_test, seen, f"fig-s{seed}-test", size, kinds)
    dev = draw_figures(rng, n_dev, seen, f"fig-s{seed}-dev", size, kinds)
    train = draw_figures(rng, n_train, seen, f"fig-s{seed}-train", size, kinds)
    check_disjoint({"train": train, "dev": dev, "test": test})
    return train, dev, test
