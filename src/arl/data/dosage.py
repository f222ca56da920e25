"""Medication-dose word problems: the "specialist" domain of the specialist/general OPD chapter.

The reference lab's medical chapter fits a specialist ability (medical QA) and a general one (C-Eval)
into one model. In mini form both are generated tasks with the same answer format, and the specialist
one needs what the general arithmetic task never asks for: multiplying by a dose per kilogram, dividing
a daily dose into equal doses, counting tablets and vials. A model trained only on the general task
scores near zero here; SFT on this domain teaches it, and (the chapter shows) costs general accuracy.

Operands are small (factors up to 12 and 6), so that a 5M model learns the products and quotients it
needs in a few hundred SFT steps; every result stays in 0..MAX_VALUE and every division is exact. Deterministic like
`arl.data.arithmetic`: one `random.Random(seed)`, test split drawn first, train and test disjoint.
"""

from __future__ import annotations

import random

from arl.data.arithmetic import MAX_VALUE, OutOfRange, Steps, draw_problems
from arl.data.problem import Problem, check_split_size, check_split_sizes


PATIENTS = ("A patient", "A child", "An adult patient", "A baby", "An older patient")
DRUGS = ("amoxicillin", "ibuprofen", "paracetamol", "an antibiotic", "a syrup", "a vitamin", "insulin")
TABLET_DRUGS = ("amoxicillin", "ibuprofen", "paracetamol", "an antibiotic", "a vitamin")
WARDS = ("ward", "clinic", "pharmacy", "ambulance")


def _by_weight(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """A child weighs 12 kg. The dose of ibuprofen is 5 mg per kg[, given in 3 equal doses]. ...?"""
    who, drug = rng.choice(PATIENTS), rng.choice(DRUGS)
    kg, per_kg = rng.randint(2, 12), rng.randint(2, 6)
    total = steps(kg, "*", per_kg)
    text = f"{who} weighs {kg} kg. The dose of {drug} is {per_kg} mg per kg"
    if rng.random() < 0.5:
        return f"{text}. How many mg of {drug} should the patient get?", total
    n = rng.choice((2, 3, 4))
    each = steps(total, "/", n)
    return f"{text}, given in {n} equal doses. How many mg is each dose?", each


def _split_dose(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """The daily dose of paracetamol is 60 mg, given in 4 equal doses. How many mg is each dose?"""
    drug, n, each = rng.choice(DRUGS), rng.randint(2, 5), rng.randint(2, 12)
    daily = n * each
    if daily > MAX_VALUE:
        raise OutOfRange
    return f"The daily dose of {drug} is {daily} mg, given in {n} equal doses. How many mg is each dose?", steps(daily, "/", n)


def _tablets(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """Each tablet has 5 mg. The dose is 20 mg, twice a day. How many tablets a day?"""
    drug, per_tablet, count = rng.choice(TABLET_DRUGS), rng.randint(2, 12), rng.randint(1, 5)
    dose = per_tablet * count
    if dose > MAX_VALUE:
        raise OutOfRange
    text = f"Each tablet of {drug} has {per_tablet} mg. The dose is {dose} mg"
    if rng.random() < 0.5:
        return f"{text}. How many tablets make one dose?", steps(dose, "/", per_tablet)
    times = rng.choice((2, 3))
    tablets = steps(dose, "/", per_tablet)
    return f"{text}, {('twice', 'three times')[times - 2]} a day. How many tablets are needed each day?", steps(tablets, "*", times)


def _drip(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """A drip gives 12 ml per hour for 5 hours, then 8 ml more. How many ml in all?"""
    rate, hours = rng.randint(2, 12), rng.randint(2, 6)
    total = steps(rate, "*", hours)
    text = f"A drip gives {rate} ml per hour for {hours} hours"
    if rng.random() < 0.5:
        return f"{text}. How many ml does the patient get in all?", total
    extra = rng.randint(2, 20)
    return f"{text}, then {extra} ml more. How many ml does the patient get in all?", steps(total, "+", extra)


def _stock(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """The ward has 90 vials. It uses 7 vials a day for 6 days. How many vials are left?"""
    ward, per_day, days = rng.choice(WARDS), rng.randint(2, 9), rng.randint(2, 6)
    used = steps(per_day, "*", days)
    stock = rng.randint(used, min(MAX_VALUE, used + 30))
    return (f"The {ward} has {stock} vials. It uses {per_day} vials a day for {days} days. How many vials are left?",
            steps(stock, "-", used))


TEMPLATES = (_by_weight, _split_dose, _tablets, _drip, _stock)


def make_split(seed: int = 0, n_train: int = 2000, n_test: int = 200) -> tuple[list[Problem], list[Problem]]:
    """Return `(train, test)`: fixed for a given seed on every machine, disjoint by question text."""
    check_split_sizes(n_train, n_test)
    rng = random.Random(seed)
    seen: set[str] = set()
    test = draw_problems(rng, n_test, seen, f"dose-s{seed}-test", TEMPLATES)
    train = draw_problems(rng, n_train, seen, f"dose-s{seed}-train", TEMPLATES)
    return train, test


def make_dev(train: list[Problem], test: list[Problem], n_dev: int, seed: int = 0) -> list[Problem]:
    """`n_dev` development problems beside `make_split(seed)`'s (train, test): a stream of their own,
    so neither of those changes, sharing no question with either."""
    check_split_size("n_dev", n_dev)
    seen = {p.question for p in (*train, *test)}
    return draw_problems(random.Random(f"dev-{seed}"), n_dev, seen, f"dose-s{seed}-dev", TEMPLATES)


def make_splits(n_train: int, n_dev: int, n_test: int, seed: int = 0) -> dict[str, list[Problem]]:
    """{"train", "dev", "test"}: `make_split`'s two and `make_dev`'s, disjoint by question text."""
    train, test = make_split(seed, n_train, n_test)
    return {"train": train, "dev": make_dev(train, test, n_dev, seed), "test": test}


def mixed_into(train: list, doses: list, share: float) -> list:
    """`train` plus enough of `doses` (in order) that the dose problems are `share` of the whole: a
    broad SFT set in which a general model sees a little of the specialist domain."""
    return train + doses[:round(len(train) * share / (1.0 - share))]
