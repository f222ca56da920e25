"""The Spec-o3 mini task's synthetic spectra: determinism, splits, the tool, and the design requirement
that the deciding feature is hard to read in the full view and plain in the deciding-window zoom."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image

from arl.data import spectra as S

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def curve_rows(png: bytes) -> np.ndarray:
    """Per pixel column, the mean row of the curve as drawn (NaN where no ink), row 0 at the top (high
    flux). The area under the curve is filled, so a column's curve runs from the top of its ink down to
    where its neighbours' curve starts (a steep segment spans many rows of one column): the mean of the
    two, as the line's own pixels gave it before the fill."""
    a = np.asarray(Image.open(io.BytesIO(png)).convert("L"), dtype=float)
    dark = a < 128
    top = np.where(dark.any(axis=0), dark.argmax(axis=0).astype(float), np.nan)
    padded = np.pad(top, 1, mode="edge")
    lowest = np.fmax(np.fmax(padded[:-2], padded[2:]), top)
    return (top + lowest) / 2


def test_same_seed_same_questions_and_bytes():
    a = S.make_split(10, 5, 5, seed=3)
    b = S.make_split(10, 5, 5, seed=3)
    for split_a, split_b in zip(a, b):
        assert [(q.id, q.answer, q.spectrum.id, q.spectrum.cls, q.spectrum.z) for q in split_a] == \
               [(q.id, q.answer, q.spectrum.id, q.spectrum.cls, q.spectrum.z) for q in split_b]
        for qa, qb in zip(split_a, split_b):
            assert qa.spectrum.flux.tobytes() == qb.spectrum.flux.tobytes()
            assert S.full_view(qa.spectrum) == S.full_view(qb.spectrum)
            window = list(qa.deciding_window)
            assert S.visualize(qa.spectrum, window) == S.visualize(qb.spectrum, window)
            assert S.demonstration(qa) == S.demonstration(qb)
    other = S.make_split(10, 5, 5, seed=4)
    assert [q.spectrum.flux.tobytes() for q in other[2]] != [q.spectrum.flux.tobytes() for q in a[2]]


def test_train_size_does_not_change_held_out_splits():
    _, dev_small, test_small = S.make_split(5, 5, 5)
    _, dev_big, test_big = S.make_split(40, 5, 5)
    for small, big in ((dev_small, dev_big), (test_small, test_big)):
        assert [(q.id, q.spectrum.id, q.spectrum.flux.tobytes()) for q in small] == \
               [(q.id, q.spectrum.id, q.spectrum.flux.tobytes()) for q in big]


def test_splits_disjoint_and_balanced():
    train, dev, test = S.make_split(40, 20, 20, seed=1)
    ids = [{q.spectrum.id for q in split} for split in (train, dev, test)]
    assert sum(len(s) for s in ids) == 80 and len(set.union(*ids)) == 80
    for split in (train, dev, test):
        for task in S.TASKS:
            answers = [q.answer for q in split if q.task == task]
            assert len(answers) == len(split) // len(S.TASKS)
            assert answers.count("YES") == answers.count("NO")
        for q in split:
            assert (q.spectrum.cls == q.task) == (q.answer == "YES")
    with pytest.raises(ValueError, match="disjoint"):
        S.check_disjoint({"train": train[:2], "test": [train[1]]})
    only_gm, _, _ = S.make_split(6, 0, 0, tasks=("gm",))
    assert {q.task for q in only_gm} == {"gm"} and [q.answer for q in only_gm].count("YES") == 3


@pytest.mark.parametrize("kwargs, field", [
    (dict(n_train=-1, n_dev=1, n_test=1), "n_train"),
    (dict(n_train=1, n_dev="2", n_test=1), "n_dev"),
    (dict(n_train=1, n_dev=1, n_test=1.5), "n_test"),
    (dict(n_train=1, n_dev=1, n_test=1, seed=-2), "seed"),
    (dict(n_train=1, n_dev=1, n_test=1, tasks=("gm", "xx")), "tasks"),
    (dict(n_train=1, n_dev=1, n_test=1, tasks=()), "tasks"),
])
def test_bad_split_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=field):
        S.make_split(**kwargs)


def test_render_checks_its_arguments():
    wave, flux = np.linspace(4000, 5000, 100), np.ones(100)
    for size in ((0, 56), (224,), (224.0, 56), "224x56"):
        with pytest.raises(ValueError, match="size"):
            S.render(wave, flux, 4000, 5000, size)
    with pytest.raises(ValueError, match="lo < hi"):
        S.render(wave, flux, 5000, 4000)
    png = S.render(wave, flux, 4000, 5000, (112, 28))
    assert Image.open(io.BytesIO(png)).size == (112, 28)


def test_visualize_image_text_and_errors():
    q = S.make_split(0, 0, 5, seed=2)[2][0]
    full = S.full_view(q.spectrum)
    assert full[:8] == PNG_MAGIC and Image.open(io.BytesIO(full)).size == S.FULL_SIZE
    zoom = S.visualize(q.spectrum, list(q.deciding_window))
    assert zoom[:8] == PNG_MAGIC and Image.open(io.BytesIO(zoom)).size == S.ZOOM_SIZE
    assert S.visualize(q.spectrum, (4000, 4300.5))[:8] == PNG_MAGIC  # a tuple, a float
    few = S.visualize(q.spectrum, [5000, 5006])  # 3-4 points at 2 A sampling
    assert isinstance(few, str) and "points" in few and "3800-9000" in few
    assert S.visualize(q.spectrum, [1000, 2000]).startswith("Only 0 points")
    for bad in ("4000-5000", [4000], [4000, 5000, 6000], None, ["4000", "5000"], [True, 5000],
                [5000, 4000], [4000, 4000], [float("nan"), 5000], [4000, math.inf]):
        message = S.visualize(q.spectrum, bad)
        assert isinstance(message, str) and message.startswith("Error: wavelength_range"), (bad, message)


def test_tool_corrects_for_redshift():
    rest = np.arange(5000.0, 7000.0, 2.0)
    flux = 1.0 + 0.5 * np.exp(-0.5 * ((rest - 6000.0) / 1.5) ** 2)  # an emission line at rest 6000 A
    z = 0.03
    spectrum = S.Spectrum("spec-test", "cv", z, rest * (1 + z), flux)
    rows = curve_rows(S.visualize(spectrum, [5900, 6100]))
    expected = (6000 - 5900) / 200 * (S.ZOOM_SIZE[0] - 1)
    assert abs(int(np.nanargmin(rows)) - expected) <= 2
    # The observed line sits at 6180 A: a window there in the rest frame holds only flat continuum.
    flat = curve_rows(S.visualize(spectrum, [6100, 6260]))
    assert np.nanmax(flat) - np.nanmin(flat) <= 2


def test_question_text_demonstration_and_schema():
    _, _, test = S.make_split(0, 0, 20, seed=5)
    assert S.TOOL_SCHEMA["function"]["name"] == S.TOOL_NAME
    assert S.TOOL_SCHEMA["function"]["parameters"]["required"] == ["wavelength_range"]
    for q in test:
        text = q.question_text()
        assert text.startswith("Is this object ") and q.guidance in text
        assert text.endswith("Answer with <answer>\\boxed{YES}</answer> or <answer>\\boxed{NO}</answer>.")
        call, tool, final = S.demonstration(q)
        assert call["role"] == "assistant" and tool == {"role": "tool", "content": S.IMAGE_PLACEHOLDER}
        (tc,) = call["tool_calls"]
        lo, hi = tc["arguments"]["wavelength_range"]
        assert tc["name"] == S.TOOL_NAME
        assert abs(lo - q.deciding_window[0]) <= 20 and abs(hi - q.deciding_window[1]) <= 20
        assert S.visualize(q.spectrum, [lo, hi])[:8] == PNG_MAGIC
        assert final["role"] == "assistant" and final["content"].endswith(f"<answer>\\boxed{{{q.answer}}}</answer>")
        assert len(call["content"].split()) < 25 and len(final["content"].split()) < 25


# -- the design requirement: hard to see at full view, plain when zoomed ------------------------------

# Per task: rest-frame bands (A) of the deciding feature, continuum bands beside it, and the sign that
# makes the statistic larger for YES. The statistic is the feature's depth in pixels on the rendered
# image (probe row minus continuum row; rows grow downward), so an emission line gives a negative depth.
PROBES = {
    "cv": ([(4858, 4865)], [(4800, 4840), (4880, 4905)], -1),              # H-beta: emission vs absorption
    "wd": ([(4326, 4332), (4349, 4355)], [(4250, 4290), (4390, 4430)], 1),  # H-gamma's wings 8-14 A out
    "cc": ([(5150, 5164)], [(5070, 5100), (5200, 5250)], 1),               # blueward of the C2 5165 head
    "ss": ([(6345, 6350), (6474, 6479)], [(6300, 6335), (6420, 6465)], 1),  # redward of the ZrO heads
    "gm": ([(8181, 8186), (8193, 8198)], [(8140, 8170), (8210, 8240)], -1),  # Na I: weak in giants
}


def _band_row(rows: np.ndarray, rest_of_column: np.ndarray, bands) -> float:
    picked = []
    for lo, hi in bands:
        inside = (rest_of_column >= lo) & (rest_of_column <= hi)
        if not inside.any():  # a band narrower than a full-view column: the column holding its centre
            inside = np.abs(rest_of_column - (lo + hi) / 2) == np.abs(rest_of_column - (lo + hi) / 2).min()
        picked.append(rows[inside])
    return float(np.nanmean(np.concatenate(picked)))


def _statistic(q: S.Question, zoom: bool) -> float:
    s = q.spectrum
    probe, continuum, sign = PROBES[q.task]
    if zoom:
        lo, hi = q.deciding_window
        png, shift = S.visualize(s, [lo, hi]), 1.0
    else:
        lo, hi = float(s.wave[0]), float(s.wave[-1])
        png, shift = S.full_view(s), 1.0 + s.z
    rows = curve_rows(png)
    rest_of_column = (lo + np.arange(len(rows)) / (len(rows) - 1) * (hi - lo)) / shift
    return sign * (_band_row(rows, rest_of_column, probe) - _band_row(rows, rest_of_column, continuum))


def _separation(yes, no) -> tuple[float, float]:
    """(d', AUC) of YES against NO; AUC 0.5 is chance."""
    yes, no = np.asarray(yes), np.asarray(no)
    d = (yes.mean() - no.mean()) / math.sqrt((yes.var() + no.var()) / 2)
    auc = (yes[:, None] > no[None, :]).mean() + 0.5 * (yes[:, None] == no[None, :]).mean()
    return float(d), float(auc)


def test_deciding_feature_needs_the_zoom(capsys):
    """A depth detector that knows the feature's rest wavelength and the redshift, run on the rendered
    full view and on the deciding-window zoom, for the positives against their look-alikes (the
    negatives that only the deciding feature tells apart). At seed 1, 300 questions (d' / AUC, full
    -> zoom): cv 2.18/0.92 -> 5.70/1.00, cc 0.49/0.66 -> 6.47/1.00, ss 0.55/0.64 -> 5.29/1.00,
    gm 0.33/0.59 -> 2.32/0.97, wd 1.96/0.90 -> 4.62/1.00 (`pytest -s` prints them). The full-view AUCs
    are those of an ideal observer that knows where to look."""
    _, _, test = S.make_split(0, 0, 300, seed=1)
    lines = []
    for task in S.TASKS:
        pairs = [q for q in test if q.task == task and (q.answer == "YES" or q.spectrum.cls in S.LOOKALIKES[task])]
        stats = {zoom: {a: [_statistic(q, zoom) for q in pairs if q.answer == a] for a in ("YES", "NO")}
                 for zoom in (False, True)}
        d_full, auc_full = _separation(stats[False]["YES"], stats[False]["NO"])
        d_zoom, auc_zoom = _separation(stats[True]["YES"], stats[True]["NO"])
        lines.append(f"{task}: n={len(pairs)} full d'={d_full:5.2f} AUC={auc_full:.3f} | "
                     f"zoom d'={d_zoom:5.2f} AUC={auc_zoom:.3f}")
        assert auc_zoom >= 0.97, lines[-1]
        assert d_zoom >= 2.0 * abs(d_full), lines[-1]
        assert max(auc_full, 1 - auc_full) <= 0.97, lines[-1]
    with capsys.disabled():
        print("\nfull view vs deciding-window zoom (look-alike negatives):\n" + "\n".join(lines))


def test_spec_env_zooms_into_an_image_and_grades_the_answer():
    """The tool answers a window with the rendered PNG as an image observation (text when the window is
    empty), the answer is graded 1 / 0 / -0.2, and the no-tool control offers no tool."""
    from arl.envs import format_tool_call
    from arl.envs.spec_o3 import SpecEnv

    _, _, test = S.make_split(0, 0, 2)
    q = test[0]
    env = SpecEnv(q)
    opening = env.initial_messages()[-1]["content"]
    assert opening[0] == {"type": "image", "image": S.full_view(q.spectrum)} and "Is this object" in opening[1]["text"]
    window = list(q.deciding_window)
    result = env.step({"role": "assistant", "content": format_tool_call("spectral_visualization_tool",
                                                                         {"wavelength_range": window})})
    assert result.messages == [{"role": "tool", "content": [{"type": "image", "image": S.visualize(q.spectrum, window)}]}]
    empty = env.step({"role": "assistant", "content": format_tool_call("spectral_visualization_tool",
                                                                        {"wavelength_range": [100, 110]})})
    assert isinstance(empty.messages[0]["content"], str) and empty.messages[0]["content"].startswith("Only 0 points")
    other = "NO" if q.answer == "YES" else "YES"
    for text, reward, prediction in [(f"<answer>\\boxed{{{q.answer}}}</answer>", 1.0, q.answer),
                                     (f"<answer>\\boxed{{{other}}}</answer>", 0.0, other), ("I think so.", -0.2, None)]:
        env = SpecEnv(q)
        graded = env.step({"role": "assistant", "content": text})
        assert graded.done and graded.reward == reward and env.prediction == prediction
    assert SpecEnv(q, tool=False).tools == ()
