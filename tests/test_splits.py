"""Every chapter has train, dev and test splits, none empty, and no item in two of them: presets, cold
starts and reward shaping can be chosen on dev (`eval_split=dev`) and the test split read once.

An item is keyed by what the model would see of it (a problem's question, a game's quest, a figure's
scene, a spectrum's flux, a record's state), so two items that only differ in their id still collide.
"""

from __future__ import annotations

import hashlib
import itertools

import pytest

from arl.config import resolve
from arl.data import decisions, encyclopedia, figures, spectra
from arl.data.calculation import Calculation
from arl.data.problem import Problem
from arl.data.textworld_games import Game
from arl.extras import MissingExtra
from arl.recipes import CHAPTERS, check_needs, load


def item_key(item) -> tuple:
    if isinstance(item, (Problem, Calculation, encyclopedia.Question)):
        return ("question", item.question)
    if isinstance(item, Game):
        return ("game", item.objective, item.walkthrough, item.room)
    if isinstance(item, figures.Figure):
        return ("scene", item.scene)
    if isinstance(item, spectra.Question):
        return ("spectrum", hashlib.sha256(item.spectrum.flux.tobytes()).hexdigest())
    if isinstance(item, decisions.Record):
        return ("state", decisions.state_hash(item.state))
    raise TypeError(f"no key for a {type(item).__name__}: add one to item_key")


def chapter_config(chapter: str, **overrides):
    try:
        check_needs(chapter)
    except MissingExtra as e:
        pytest.skip(str(e))
    module = load(chapter)
    return module, resolve(module.Config, module.PRESETS, "smoke", {"n_dev": 3, **overrides})


@pytest.mark.parametrize("chapter", sorted(CHAPTERS))
def test_every_chapter_has_disjoint_train_dev_and_test_splits(chapter):
    _, cfg = chapter_config(chapter)
    splits = cfg.data_splits()
    domains = {name.rpartition("/")[0] for name in splits}  # opd-specialist: its two domains, each with all three
    for domain in domains:
        for split in ("train", "dev", "test"):
            assert splits[f"{domain}/{split}" if domain else split], f"{chapter}: {domain or ''} {split} is empty"
    keys = {name: {item_key(x) for x in items} for name, items in splits.items()}
    for a, b in itertools.combinations(keys, 2):
        assert not keys[a] & keys[b], f"{chapter}: {len(keys[a] & keys[b])} items in both {a} and {b}"
    assert len(keys["dev"]) == 3


def test_a_math_chapter_evaluates_the_dev_split_when_asked():
    module, cfg = chapter_config("grpo", eval_split="dev")
    splits = cfg.data_splits()
    assert cfg.load_task() == (splits["train"], splits["dev"])
    assert module.Config().load_task()[1] == resolve(module.Config, module.PRESETS, "mini", {}).data_splits()["test"]


def test_dev_is_drawn_beside_train_and_test_without_changing_them():
    """Adding the dev split changed no training or test item, so no earlier result moved."""
    from arl.data import arithmetic

    train, test = arithmetic.make_split(seed=0, n_train=300, n_test=40, level="small")
    splits = resolve(load("grpo").Config, {"x": {}}, "x", {"n_train": 300, "n_test": 40, "n_dev": 7}).data_splits()
    assert (splits["train"], splits["test"]) == (train, test)
    assert len(splits["dev"]) == 7


def test_the_search_r1_dev_questions_ask_about_the_held_out_world():
    _, _, test = encyclopedia.make_encyclopedia(seed=0, n_train=10, n_test=200)
    dev = encyclopedia.make_dev(seed=0, n_dev=100, n_test=200)
    held_out_world = {p.title for p in encyclopedia.make_encyclopedia(seed=0, n_train=0, n_test=0)[0]
                      if p.id.startswith("enc-test")}
    assert held_out_world and all(any(t in q.question for t in held_out_world) for q in dev[:20])
    assert not {q.question for q in dev} & {q.question for q in test}
    with pytest.raises(ValueError, match="n_dev"):
        encyclopedia.make_dev(seed=0, n_dev=300, n_test=200)


@pytest.mark.parametrize("overrides, message", [
    ({"eval_split": "valid"}, "eval_split='valid'"),
    ({"eval_split": "dev", "n_dev": 0}, "eval_split=dev: set n_dev"),
    ({"n_dev": -1}, "n_dev=-1"),
])
def test_a_bad_eval_split_is_refused_naming_the_field(overrides, message):
    module = load("grpo")
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        resolve(module.Config, module.PRESETS, "smoke", overrides)


def test_a_bad_dev_size_names_n_dev():
    from arl.data import arithmetic, calculation, dosage
    from arl.data.problem import hold_back

    for make_dev in (arithmetic.make_dev, calculation.make_dev, dosage.make_dev):
        with pytest.raises(ValueError, match="n_dev must be a non-negative integer, got -1"):
            make_dev([], [], -1)
    assert hold_back([1, 2, 3, 4], 1, "train.jsonl") == ([1, 2, 3], [4])
    with pytest.raises(ValueError, match=r"n_dev=4: train.jsonl has 4 training items; hold back fewer as dev"):
        hold_back([1, 2, 3, 4], 4, "train.jsonl")
