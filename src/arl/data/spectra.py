"""Synthetic stellar spectra and YES/NO vetting questions: the mini task of the Spec-o3 chapter.

The reference lab vets real LAMOST-like spectra for five rare classes (`cv` cataclysmic variables,
`cc` carbon stars, `ss` S-type stars, `gm` M-type giants, `wd` white dwarfs) with a vision-language
model that sees the full spectrum image and may zoom with `spectral_visualization_tool`. Here the
model is a 2M-parameter Qwen2-VL-shaped toy reading 224x56 images (16 tokens), so the spectra are
generated, from rules chosen so that the zoom is what decides:

- A spectrum is a rest-frame grid 3800-9000 A sampled every 2 A (2,601 points), a blackbody
  continuum (temperature drawn per class, times a mild linear tilt standing in for extinction and
  flux calibration), the class's features, and Gaussian noise at a constant S/N per point (35-60; a
  simplification of photon noise that keeps every window equally legible).
- Every class-specific feature is narrow: Gaussian lines of sigma 1-1.4 A (A-star Balmer lines
  1.8-2.6 A, white-dwarf ones 6-9 A) and band heads whose absorption decays over 2-4 A (C2: 5-10 A).
  Real molecular bands (TiO, ZrO, C2) span hundreds of A and real A-star and white-dwarf lines are
  far broader; they are narrowed here so that what decides a class sits below the full view's
  resolution (5,200 A over 224 px, 23 A per pixel, drawn as the mean flux of each pixel column,
  which is what a low-resolution spectrum shows), while a 200-350 A window over the same 224 px
  (about 1 A per pixel) shows it plainly. Where a look-alike's lines differ in width rather than
  sign (white dwarf vs A star), the narrower lines are deeper, so that both have similar equivalent
  widths (about 4.7 and 3.3 A) and the full view shows much the same dip for both. `tests/test_spectra.py` measures all this with a depth detector on the
  rendered images: an ideal observer that knows where to look still separates YES from look-alike
  NO at full view (d' 0.3-2.2, AUC 0.59-0.92), but far better zoomed in (d' 2.3-6.5, AUC 0.97-1.00).
- A task's negatives are mostly (70%) a look-alike with the positive's continuum (same temperature
  range) that differs only in the deciding feature (a B star with Balmer absorption where a CV has
  emission, an A star with narrow Balmer lines where a white dwarf's are broad, M stars with Mg b
  lines where a carbon star has the C2 head, M stars without the S star's ZrO, an M dwarf with
  strong Na I where a giant's is weak), and otherwise (30%) another class. Every negative is
  decidable from the task's deciding window alone, which is why S stars (giants with TiO 8432 and
  weak Na I, told from M giants only by ZrO outside that window) are not `gm` negatives.
- The observed wavelength is rest * (1 + z) with z uniform in [0, 0.02]. Real Galactic stars have
  |z| < 0.001 (300 km/s); the larger range makes the tool's rest-frame correction matter: without
  it, a line would move by up to 130 A at H-alpha, out of a zoom window.

Splits are by object: each question has its own spectrum, drawn from a generator seeded by
(seed, object number); test objects are numbered first, then dev, then train, so the train size
changes neither held-out split. `check_disjoint` refuses a spectrum (by id or by its flux values)
that occurs in two splits. Questions go round-robin over the tasks and alternate YES/NO per task.
"""

from __future__ import annotations

import hashlib
import io
import math
import numbers
import random
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from PIL import Image, ImageDraw

TASKS = ("cv", "cc", "ss", "gm", "wd")
FULL_SIZE = (224, 56)
"""Width, height of the full-view image: multiples of 28, so 8x2 = 16 image tokens after the 2x2 merge."""
ZOOM_SIZE = (224, 56)
MIN_POINTS = 8
"""Fewer points than this in a window and the tool answers with a text message instead of an image."""

REST_LO, REST_HI, STEP = 3800.0, 9000.0, 2.0
REST_WAVE = np.arange(REST_LO, REST_HI + STEP / 2, STEP)
Z_MAX = 0.02
SNR = (35.0, 60.0)
LOOKALIKE_FRACTION = 0.7
TOOL_NAME = "spectral_visualization_tool"
IMAGE_PLACEHOLDER = "IMAGE"
"""The tool turn's content in a `demonstration`: the caller puts the image of the call's window there."""

_MARGIN = 3
"""Pixels kept free above and below the curve, so that a 2-px line at an extreme is drawn whole."""
_INK, _TICK_INK, _PAPER = 0, 200, 255


@dataclass(frozen=True)
class Feature:
    rest: float
    """Line centre or band head (A, rest frame, air)."""
    shape: str
    """`line` (Gaussian), `head_red` (sharp head, absorption decaying to the red: TiO, ZrO) or
    `head_blue` (decaying to the blue: C2 Swan bands are degraded to the violet)."""
    width: tuple[float, float]
    """Range of the Gaussian sigma or of the band's e-folding length (A)."""
    strength: tuple[float, float]
    """Range of the peak relative to the continuum: > 0 emission, < 0 absorption."""


@dataclass(frozen=True)
class Kind:
    temperature: tuple[float, float]
    """Range of the continuum's blackbody temperature (K); a task's look-alikes share its positives'."""
    features: tuple[Feature, ...]


def _lines(rests: Sequence[float], width: tuple[float, float], strength: tuple[float, float]) -> tuple[Feature, ...]:
    return tuple(Feature(r, "line", width, strength) for r in rests)


def _heads(rests: Sequence[float], shape: str, width: tuple[float, float],
           strength: tuple[float, float]) -> tuple[Feature, ...]:
    return tuple(Feature(r, shape, width, strength) for r in rests)


H_ALPHA, H_BETA, H_GAMMA, H_DELTA = 6562.8, 4861.3, 4340.5, 4101.7
HE_II = 4685.7
NA_I = (8183.3, 8194.8)
MG_B = (5167.3, 5172.7, 5183.6)
TIO = (6159.0, 7054.0, 7589.0, 8432.0)
ZRO = (5551.0, 6345.0, 6474.0)
C2 = (4737.0, 5165.0, 5636.0)
HOT, WARM, COOL = (12000.0, 25000.0), (8500.0, 16000.0), (2800.0, 3800.0)
NARROW = (1.0, 1.4)
HEAD = (2.0, 4.0)
HEAD_DEPTH = (-0.45, -0.3)
M_STAR = _heads(TIO, "head_red", HEAD, HEAD_DEPTH) + _lines(MG_B, NARROW, (-0.2, -0.1))
WEAK_NA = _lines(NA_I, NARROW, (-0.05, -0.01))

KINDS = {
    "cv": Kind(HOT, _lines((H_ALPHA, H_BETA), NARROW, (0.15, 0.28)) + _lines((HE_II,), NARROW, (0.12, 0.22))),
    "B-star": Kind(HOT, _lines((H_ALPHA, H_BETA, H_GAMMA), NARROW, (-0.28, -0.15))
                   + _lines((4471.5, 4713.1, 5875.6), NARROW, (-0.2, -0.1))),
    "wd": Kind(WARM, _lines((H_ALPHA, H_BETA, H_GAMMA, H_DELTA), (6.0, 9.0), (-0.3, -0.2))),
    "A-star": Kind(WARM, _lines((H_ALPHA, H_BETA, H_GAMMA, H_DELTA), (1.8, 2.6), (-0.7, -0.5))
                   + _lines((3933.7,), NARROW, (-0.5, -0.3)) + _lines((4481.2,), NARROW, (-0.2, -0.1))),
    "cc": Kind(COOL, _heads(C2, "head_blue", (5.0, 10.0), (-0.45, -0.3)) + WEAK_NA),
    "gm": Kind(COOL, M_STAR + WEAK_NA),
    "M-dwarf": Kind(COOL, M_STAR + _lines(NA_I, NARROW, (-0.25, -0.15))),
    "ss": Kind(COOL, _heads(ZRO, "head_red", HEAD, HEAD_DEPTH) + M_STAR + WEAK_NA),
}
LOOKALIKES = {"cv": ("B-star",), "wd": ("A-star",), "cc": ("gm", "M-dwarf"), "ss": ("gm", "M-dwarf"),
              "gm": ("M-dwarf",)}
OTHERS = {
    "cv": ("wd", "A-star", "cc", "gm", "ss", "M-dwarf"),
    "wd": ("cv", "B-star", "cc", "gm", "ss", "M-dwarf"),
    "cc": ("cv", "B-star", "wd", "A-star", "ss"),
    "ss": ("cv", "B-star", "wd", "A-star", "cc"),
    "gm": ("cv", "B-star", "wd", "A-star", "cc"),
}
DECIDING_WINDOW = {
    "cv": (4630.0, 4910.0),  # He II 4686 and H-beta
    "wd": (4230.0, 4450.0),  # H-gamma with room for its broad wings
    "cc": (5060.0, 5260.0),  # the C2 5165 head and its blueward absorption; Mg b of O-rich stars
    "ss": (6290.0, 6540.0),  # ZrO 6345 and 6474
    "gm": (8130.0, 8480.0),  # Na I 8183/8195 and TiO 8432
}
"""Rest-frame windows in which the deciding feature is clear, each with >= 40 A of continuum beyond
its features, so that `demonstration`'s +-20 A variations keep them inside."""

NAMES = {"cv": "a cataclysmic variable", "cc": "a carbon star", "ss": "an S-type star", "gm": "an M-type giant",
         "wd": "a white dwarf"}
GUIDANCE = {
    "cv": "Cataclysmic variables show narrow Balmer emission (H-beta 4861 A, H-alpha 6563 A) and He II 4686 A "
          "emission on a blue continuum. Hot B-type stars have the same continuum but these lines in absorption, "
          "with He I 4713 A. The lines are narrow: zoom in on He II 4686 and H-beta to see whether they point up.",
    "cc": "Carbon stars show C2 Swan band heads at 4737, 5165 and 5636 A: a sharp edge with absorption fading "
          "toward the blue. Oxygen-rich M stars have the same red continuum but only narrow Mg b lines "
          "(5167-5184 A) there. Zoom in on the 5165 A head.",
    "ss": "S-type stars show ZrO band heads at 5551, 6345 and 6474 A: a sharp edge with absorption fading toward "
          "the red. M giants and dwarfs have the same red continuum and TiO bands but no ZrO. Zoom in on the "
          "6345 and 6474 A heads.",
    "gm": "M-type giants show TiO band heads (6159, 7054, 7589, 8432 A; sharp edges, absorption fading to the red) "
          "and only weak Na I 8183/8195 A lines. M dwarfs have the same TiO bands but strong Na I (high surface "
          "gravity). Zoom in on Na I and TiO 8432 A.",
    "wd": "White dwarfs (DA) show broad, deep Balmer absorption (H-delta 4102, H-gamma 4340, H-beta 4861 A) on a "
          "blue continuum. A-type stars have the same lines but narrow, with Ca II K 3934 A. Zoom in on "
          "H-gamma and judge the line width.",
}
ANSWER_FORMAT = "Answer with <answer>\\boxed{YES}</answer> or <answer>\\boxed{NO}</answer>."
WAVELENGTH_NOTE = "Wavelengths are rest-frame; the tool corrects for redshift."

TOOL_SCHEMA: dict = {
    "type": "function",
    "function": {
        "name": TOOL_NAME,
        "description": "Plot the spectrum over a rest-frame wavelength window (the stored spectrum is corrected "
                       "for redshift first). Returns an image, or a text message when the window holds too "
                       "few points.",
        "parameters": {
            "type": "object",
            "properties": {
                "wavelength_range": {"type": "array", "items": {"type": "number"}, "minItems": 2, "maxItems": 2,
                                     "description": "[lo, hi] in Angstrom, rest frame, lo < hi"},
            },
            "required": ["wavelength_range"],
        },
    },
}

# One sentence before the call and one after, per task: a tiny model imitates them word for word.
LOOK = {
    "cv": "Emission or absorption? Zoom on He II 4686 and H-beta 4861.",
    "cc": "Look for the C2 Swan band head at 5165.",
    "ss": "Look for the ZrO band heads at 6345 and 6474.",
    "gm": "Check TiO 8432 and the gravity-sensitive Na I 8183/8195 lines.",
    "wd": "The Balmer line width decides; zoom on H-gamma 4340.",
}
SEEN_YES = {
    "cv": "H-beta and He II 4686 are narrow emission lines.",
    "cc": "A sharp C2 band head at 5165 with absorption to the blue.",
    "ss": "ZrO band heads at 6345 and 6474 are present.",
    "gm": "TiO 8432 is present and Na I is weak: an M giant.",
    "wd": "H-gamma is a broad, deep absorption trough.",
}
SEEN_NO = {
    "cv": "H-beta and He II 4686 show no emission.",
    "cc": "No C2 band head at 5165.",
    "ss": "No ZrO band heads at 6345 or 6474.",
    "gm": "No TiO band head at 8432: not an M star.",
    "wd": "No broad H-gamma trough.",
}
SEEN_NO_DWARF = "Na I 8183/8195 is strong: an M dwarf, not a giant."


@dataclass(frozen=True)
class Spectrum:
    id: str
    """The object, e.g. `spec-s0-00012`; equality and hashing use id, cls and z only."""
    cls: str
    """The true class: a task code for a positive, or a look-alike name (`B-star`, `A-star`, `M-dwarf`)."""
    z: float
    wave: np.ndarray = field(compare=False, repr=False)
    """Observed wavelengths (A), float32, ascending, read-only."""
    flux: np.ndarray = field(compare=False, repr=False)
    """Flux in arbitrary units (continuum peak about 1), float32, read-only."""

    def __post_init__(self) -> None:
        # Arrays rather than tuples: 1,300 spectra of 2,601 points are 27 MB as float32, 200 MB as tuples.
        for name in ("wave", "flux"):
            arr = np.array(getattr(self, name), dtype=np.float32)
            if arr.ndim != 1:
                raise ValueError(f"Spectrum.{name} must be one-dimensional, got shape {arr.shape}")
            arr.flags.writeable = False
            object.__setattr__(self, name, arr)
        if len(self.wave) != len(self.flux):
            raise ValueError(f"Spectrum.flux has {len(self.flux)} points but Spectrum.wave has {len(self.wave)}")
        if len(self.wave) > 1 and not np.all(np.diff(self.wave) > 0):
            raise ValueError("Spectrum.wave must be strictly ascending")
        if not (math.isfinite(self.z) and self.z > -1):
            raise ValueError(f"Spectrum.z must be a finite number > -1, got {self.z!r}")

    def rest_wave(self) -> np.ndarray:
        return self.wave.astype(np.float64) / (1.0 + self.z)


@dataclass(frozen=True)
class Question:
    id: str
    """e.g. `specq-s0-test-00003`."""
    task: str
    spectrum: Spectrum
    answer: str
    """YES or NO; a grading field, never shown to the model."""
    guidance: str
    deciding_window: tuple[float, float]
    """A rest-frame window (A) in which the deciding feature is clear: what a demonstration zooms into."""

    def question_text(self) -> str:
        return f"Is this object {NAMES[self.task]}? {self.guidance} {WAVELENGTH_NOTE} {ANSWER_FORMAT}"


# -- drawing a spectrum ------------------------------------------------------------------------------

def _blackbody(wave: np.ndarray, temperature: float) -> np.ndarray:
    """Planck's B_lambda up to a constant, normalised to peak 1 on the grid (hc/k = 1.4388e8 A K)."""
    b = wave ** -5 / np.expm1(1.4388e8 / (wave * temperature))
    return b / b.max()


def _profile(f: Feature, width: float, strength: float) -> np.ndarray:
    d = REST_WAVE - f.rest
    if f.shape == "line":
        return strength * np.exp(-0.5 * (d / width) ** 2)
    # A band head: full strength at the head, decaying away from it on one side only.
    side = d if f.shape == "head_red" else -d
    return np.where(side >= 0, strength * np.exp(-np.clip(side, 0, None) / width), 0.0)


def _draw(cls: str, rng: np.random.Generator, object_id: str) -> Spectrum:
    kind = KINDS[cls]
    temperature = rng.uniform(*kind.temperature)
    tilt = 1.0 + rng.uniform(-0.1, 0.1) * (REST_WAVE - 6400.0) / 2600.0
    continuum = _blackbody(REST_WAVE, temperature) * tilt
    relative = np.zeros_like(REST_WAVE)
    for f in kind.features:
        relative += _profile(f, rng.uniform(*f.width), rng.uniform(*f.strength))
    flux = continuum * np.clip(1.0 + relative, 0.02, None)
    flux = flux + continuum * rng.normal(0.0, 1.0 / rng.uniform(*SNR), len(REST_WAVE))
    z = float(rng.uniform(0.0, Z_MAX))
    return Spectrum(object_id, cls, z, REST_WAVE * (1.0 + z), flux)


# -- rendering ---------------------------------------------------------------------------------------

def _check_size(size) -> tuple[int, int]:
    if (not isinstance(size, (tuple, list)) or len(size) != 2
            or not all(isinstance(v, int) and not isinstance(v, bool) and v >= 2 * _MARGIN + 2 for v in size)):
        raise ValueError(f"size must be (width, height), two integers >= {2 * _MARGIN + 2}, got {size!r}")
    return int(size[0]), int(size[1])


def render(wave, flux, lo: float, hi: float, size=FULL_SIZE, fill: bool = True) -> bytes:
    """PNG bytes (grayscale) of `flux` against `wave` over [lo, hi], y scaled to the window's extremes.

    With more points than pixel columns each column shows the mean flux of its points (a line
    narrower than a column is diluted, as in a low-resolution spectrum); otherwise the points are
    joined as they are. The area under the curve is filled black on white (a silhouette: drawn as the
    2-px line alone, `fill=False`, zoomed windows left the tiny VLM at chance after 400 SFT steps, while
    filled they reached 62-100% per task: `scripts/spec_zoom_probe.py`), no text; light ticks at the
    bottom every 500 A when the window spans 1,000 A or more, every 50 A otherwise, so positions can be read.
    """
    width, height = _check_size(size)
    if not (isinstance(lo, numbers.Real) and isinstance(hi, numbers.Real) and math.isfinite(lo)
            and math.isfinite(hi) and lo < hi):
        raise ValueError(f"lo, hi must be finite numbers with lo < hi, got lo={lo!r}, hi={hi!r}")
    wave = np.asarray(wave, dtype=np.float64)
    flux = np.asarray(flux, dtype=np.float64)
    if wave.shape != flux.shape or wave.ndim != 1:
        raise ValueError(f"wave and flux must be one-dimensional and of the same length, got shapes {wave.shape} "
                         f"and {flux.shape}")
    inside = (wave >= lo) & (wave <= hi)
    if inside.sum() < 2:
        raise ValueError(f"render: {int(inside.sum())} point(s) in [{lo:g}, {hi:g}]; at least 2 are needed")
    x = (wave[inside] - lo) / (hi - lo) * (width - 1)
    y = flux[inside]
    if len(x) > width:
        column = np.rint(x).astype(int)
        counts = np.bincount(column, minlength=width)
        sums = np.bincount(column, weights=y, minlength=width)
        x = np.nonzero(counts)[0].astype(np.float64)
        y = sums[counts > 0] / counts[counts > 0]
    top, bottom = y.max(), y.min()
    span = height - 1 - 2 * _MARGIN
    rows = _MARGIN + (top - y) / (top - bottom) * span if top > bottom else np.full_like(y, (height - 1) / 2)

    image = Image.new("L", (width, height), _PAPER)
    draw = ImageDraw.Draw(image)
    curve = [(float(a), float(b)) for a, b in zip(x, rows)]
    if fill:
        draw.polygon([(curve[0][0], height - 1), *curve, (curve[-1][0], height - 1)], fill=_INK)
    draw.line(curve, fill=_INK, width=2, joint="curve")
    step = 500.0 if hi - lo >= 1000.0 else 50.0
    for tick in np.arange(math.ceil(lo / step) * step, hi + 1e-9, step):
        tx = round((tick - lo) / (hi - lo) * (width - 1))
        draw.line([(tx, height - 4), (tx, height - 1)], fill=_TICK_INK, width=1)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def full_view(spectrum: Spectrum) -> bytes:
    """The prompt image: the whole observed range (observed wavelengths, no redshift correction)."""
    return render(spectrum.wave, spectrum.flux, float(spectrum.wave[0]), float(spectrum.wave[-1]), FULL_SIZE)


def _range_error(wavelength_range) -> str | None:
    if isinstance(wavelength_range, (str, bytes)) or not isinstance(wavelength_range, Sequence) \
            or len(wavelength_range) != 2:
        return f"Error: wavelength_range must be two numbers [lo, hi] in Angstrom, got {wavelength_range!r}."
    if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in wavelength_range):
        return f"Error: wavelength_range must hold two numbers, got {list(wavelength_range)!r}."
    lo, hi = (float(v) for v in wavelength_range)
    if not (math.isfinite(lo) and math.isfinite(hi)):
        return f"Error: wavelength_range values must be finite, got [{lo}, {hi}]."
    if lo >= hi:
        return f"Error: wavelength_range needs lo < hi, got [{lo:g}, {hi:g}]."
    return None


def visualize(spectrum: Spectrum, wavelength_range) -> bytes | str:
    """The tool: PNG bytes of the rest-frame window, or a text message the model reads as its observation
    (a malformed range, or fewer than MIN_POINTS points in the window); never raises on model input."""
    error = _range_error(wavelength_range)
    if error:
        return error
    lo, hi = (float(v) for v in wavelength_range)
    rest = spectrum.rest_wave()
    n = int(((rest >= lo) & (rest <= hi)).sum())
    if n < MIN_POINTS:
        return (f"Only {n} points fall in {lo:g}-{hi:g} A (at least {MIN_POINTS} are needed); this spectrum "
                f"covers {rest[0]:.0f}-{rest[-1]:.0f} A in the rest frame.")
    return render(rest, spectrum.flux, lo, hi, ZOOM_SIZE)


# -- questions and splits ----------------------------------------------------------------------------

def _check_args(n_train: int, n_dev: int, n_test: int, seed: int, tasks) -> tuple[str, ...]:
    for name, value in (("n_train", n_train), ("n_dev", n_dev), ("n_test", n_test), ("seed", seed)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 0:
            raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    tasks = tuple(tasks)
    if not tasks or len(set(tasks)) != len(tasks) or not set(tasks) <= set(TASKS):
        raise ValueError(f"tasks must be distinct names from {TASKS}, at least one, got {tasks!r}")
    return tasks


def _question(seed: int, split: str, index: int, obj: int, task: str, answer: str) -> Question:
    rng = np.random.Generator(np.random.PCG64([seed, obj]))
    if answer == "YES":
        cls = task
    else:
        pool = LOOKALIKES[task] if rng.random() < LOOKALIKE_FRACTION else OTHERS[task]
        cls = pool[int(rng.integers(len(pool)))]
    spectrum = _draw(cls, rng, f"spec-s{seed}-{obj:05d}")
    return Question(f"specq-s{seed}-{split}-{index:05d}", task, spectrum, answer, GUIDANCE[task], DECIDING_WINDOW[task])


def _flux_hash(spectrum: Spectrum) -> str:
    return hashlib.sha256(spectrum.flux.tobytes()).hexdigest()


def check_disjoint(splits: dict[str, Sequence[Question]]) -> None:
    """Raise if a spectrum (by id or by its flux values) belongs to questions of two splits."""
    owner: dict[str, str] = {}
    for split, questions in splits.items():
        for q in questions:
            for key in (q.spectrum.id, _flux_hash(q.spectrum)):
                if owner.setdefault(key, split) != split:
                    raise ValueError(f"spectrum {q.spectrum.id} of question {q.id} ({split!r}) also occurs in "
                                     f"{owner[key]!r}; splits must be disjoint by object")


def make_split(n_train: int, n_dev: int, n_test: int, seed: int = 0,
               tasks=TASKS) -> tuple[list[Question], list[Question], list[Question]]:
    """(train, dev, test): question i of a split asks tasks[i % len(tasks)], answers alternating YES/NO
    per task; one new spectrum per question, test objects numbered first, then dev, then train."""
    tasks = _check_args(n_train, n_dev, n_test, seed, tasks)
    splits: dict[str, list[Question]] = {}
    obj = 0
    for split, n in (("test", n_test), ("dev", n_dev), ("train", n_train)):
        questions = []
        for i in range(n):
            task = tasks[i % len(tasks)]
            answer = "YES" if (i // len(tasks)) % 2 == 0 else "NO"
            questions.append(_question(seed, split, i, obj, task, answer))
            obj += 1
        splits[split] = questions
    check_disjoint(splits)
    return splits["train"], splits["dev"], splits["test"]


def demonstration(q: Question) -> list[dict]:
    """A tool-using SFT demonstration (the messages after the user turn): one sentence and a zoom into a
    window within +-20 A of the deciding window (fixed per question), the tool's image
    (IMAGE_PLACEHOLDER: the caller supplies `visualize(q.spectrum, window)`), one sentence and the answer."""
    rng = random.Random(f"spectra-demo-{q.id}")
    lo, hi = (round(edge) + rng.randrange(-20, 21, 5) for edge in q.deciding_window)
    if q.answer == "YES":
        seen = SEEN_YES[q.task]
    else:
        seen = SEEN_NO_DWARF if q.task == "gm" and q.spectrum.cls == "M-dwarf" else SEEN_NO[q.task]
    return [
        {"role": "assistant", "content": LOOK[q.task],
         "tool_calls": [{"name": TOOL_NAME, "arguments": {"wavelength_range": [lo, hi]}}]},
        {"role": "tool", "content": IMAGE_PLACEHOLDER},
        {"role": "assistant", "content": f"{seen} <answer>\\boxed{{{q.answer}}}</answer>"},
    ]

