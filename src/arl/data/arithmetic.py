"""Multi-step arithmetic word problems with integer answers: the mini task of the GRPO chapter.

Why a generated task: a tiny model learns only what it is taught, so the task has to be narrow
enough that a few minutes of SFT give partial competence, which RL can then raise. Each problem
chains 2-4 operations (+, -, small *) and every operand and intermediate value stays in
0..MAX_VALUE, so the difficulty lies in chaining the steps, not in big-number arithmetic.

Determinism: everything is drawn from one `random.Random(seed)`, whose sequence is the same on every
machine and Python 3 version (no `hash()`, no iteration over sets). The test split is drawn first,
so it stays the same when `n_train` changes, and a train problem is never a test question.
"""

from __future__ import annotations

import random

from arl.data.problem import Problem, check_split_size, check_split_sizes

MAX_VALUE = 199

NAMES = (
    ("Mia", "she"), ("Leo", "he"), ("Alice", "she"), ("Bob", "he"), ("Emma", "she"), ("Noah", "he"),
    ("Grace", "she"), ("Liam", "he"), ("Maria", "she"), ("Omar", "he"), ("Priya", "she"),
    ("Kenji", "he"), ("Sofia", "she"), ("Diego", "he"), ("Zoe", "she"), ("Sam", "he"),
    ("Hannah", "she"), ("Lucas", "he"), ("Fatima", "she"), ("Peter", "he"),
)
OBJECTS = (
    "pencils", "books", "marbles", "cookies", "stickers", "cupcakes", "tickets", "coins", "stamps",
    "flowers", "eggs", "cards", "candies", "balloons", "apples", "oranges", "toys", "shells",
)
PRICED_ITEMS = ("pens", "notebooks", "apples", "cupcakes", "stickers", "toys", "balloons", "books")
SINGLE_ITEMS = ("book", "hat", "ball", "kite", "cake", "lamp", "map")
PRICES_IN_HAND = (20, 25, 30, 40, 50, 60, 75, 80, 100, 120, 150)
CONTAINERS = (("boxes", "box"), ("bags", "bag"), ("jars", "jar"), ("baskets", "basket"))
GAINS = ("buys {n} more", "finds {n} more", "gets {n} more from {other}", "wins {n} more")
LOSSES = ("gives {n} to {other}", "loses {n}", "sells {n}", "gives away {n}")
# (verb, unit, optional way to lose some, question): a quantity that accumulates at a fixed rate.
RATES = (
    ("reads", "pages", None, "How many pages has {name} read in all?"),
    ("walks", "miles", None, "How many miles has {name} walked in all?"),
    ("saves", "dollars", "spends {n} of them on a {item}", "How many dollars does {name} have now?"),
    ("picks", "apples", "gives {n} of them to {other}", "How many apples does {name} have now?"),
    ("bakes", "cookies", "eats {n} of them", "How many cookies does {name} have now?"),
    ("collects", "shells", "loses {n} of them", "How many shells does {name} have now?"),
)


class OutOfRange(Exception):
    """A drawn problem left 0..MAX_VALUE somewhere (or divided unevenly); the generator draws another."""


class Steps:
    """The worked equations of one problem, in order; refuses any result outside 0..MAX_VALUE and any
    division with a remainder."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def __call__(self, a: int, op: str, b: int) -> int:
        if op == "/" and (b == 0 or a % b):
            raise OutOfRange
        result = {"+": a + b, "-": a - b, "*": a * b, "/": a // max(b, 1)}[op]
        if not 0 <= result <= MAX_VALUE:
            raise OutOfRange
        self.lines.append(f"{a} {op} {b} = {result}")
        return result


def _inventory(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """Mia has 12 pencils. She buys 7 more, then gives 5 to Leo. How many pencils ...?"""
    (name, pronoun), (other, _) = rng.sample(NAMES, 2)
    noun = rng.choice(OBJECTS)
    count = rng.randint(5, 60)
    start = count
    clauses = []
    for _ in range(rng.randint(2, 4)):
        kind = rng.choice(("gain", "gain", "loss", "loss", "times"))
        if kind == "gain":
            n = rng.randint(2, 30)
            count = steps(count, "+", n)
            clauses.append(rng.choice(GAINS).format(n=n, other=other))
        elif kind == "loss":
            n = rng.randint(1, max(1, count))
            count = steps(count, "-", n)
            clauses.append(rng.choice(LOSSES).format(n=n, other=other))
        else:
            k = rng.choice((2, 3))
            count = steps(count, "*", k)
            clauses.append(f"{('doubles', 'triples')[k - 2]} the number of {noun} {pronoun} has")
    # Pairs of clauses per sentence; ", then" and "After that" make the order of operations explicit.
    sentences = [f"{name} has {start} {noun}."]
    for i in range(0, len(clauses), 2):
        opener = pronoun.capitalize() if i == 0 else f"After that, {pronoun}"
        sentences.append(f"{opener} {', then '.join(clauses[i:i + 2])}.")
    sentences.append(f"How many {noun} does {name} have now?")
    return " ".join(sentences), count


def _shopping(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """Mia has 50 dollars. She buys 3 pens for 4 dollars each and a hat for 9 dollars. ...left?"""
    name, pronoun = rng.choice(NAMES)
    item, second_item = rng.sample(PRICED_ITEMS, 2)
    k, price = rng.randint(2, 6), rng.randint(2, 12)
    total = steps(k, "*", price)
    purchase = f"{k} {item} for {price} dollars each"
    extra = rng.choice(("none", "single", "pair"))
    if extra == "single":
        thing, cost = rng.choice(SINGLE_ITEMS), rng.randint(3, 25)
        total = steps(total, "+", cost)
        purchase += f" and a {thing} for {cost} dollars"
    elif extra == "pair":
        k2, price2 = rng.randint(2, 5), rng.randint(2, 10)
        total = steps(total, "+", steps(k2, "*", price2))
        purchase += f" and {k2} {second_item} for {price2} dollars each"
    affordable = [m for m in PRICES_IN_HAND if m >= total]
    if not affordable:
        raise OutOfRange
    money = rng.choice(affordable)
    left = steps(money, "-", total)
    question = (
        f"{name} has {money} dollars. {pronoun.capitalize()} buys {purchase}. "
        f"How many dollars does {name} have left?"
    )
    return question, left


def _relation(rng: random.Random, steps: Steps, base: int, base_name: str, noun: str) -> tuple[str, int]:
    """One person's count stated relative to another's: "3 times as many", "5 more", "4 fewer"."""
    kind = rng.choice(("times", "more", "fewer"))
    if kind == "times":
        k = rng.randint(2, 4)
        words = "twice" if k == 2 else f"{k} times"
        return f"{words} as many {noun} as {base_name}", steps(base, "*", k)
    n = rng.randint(1, 20)
    op = "+" if kind == "more" else "-"
    return f"{n} {kind} {noun} than {base_name}", steps(base, op, n)


def _comparison(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """Mia has 12 cards. Leo has 3 times as many cards as Mia. How many ... together?"""
    (a_name, _), (b_name, _), (c_name, _) = rng.sample(NAMES, 3)
    noun = rng.choice(OBJECTS)
    a = rng.randint(2, 40)
    b_text, b = _relation(rng, steps, a, a_name, noun)
    text = f"{a_name} has {a} {noun}. {b_name} has {b_text}."
    ask = rng.choice(("pair", "last", "last_pair", "all"))
    if ask == "pair":
        return f"{text} How many {noun} do {a_name} and {b_name} have together?", steps(a, "+", b)
    c_text, c = _relation(rng, steps, b, b_name, noun)
    text += f" {c_name} has {c_text}."
    if ask == "last":
        return f"{text} How many {noun} does {c_name} have?", c
    if ask == "last_pair":
        return f"{text} How many {noun} do {b_name} and {c_name} have together?", steps(b, "+", c)
    return f"{text} How many {noun} do the three of them have altogether?", steps(steps(a, "+", b), "+", c)


def _rate(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """Mia reads 6 pages every day for 5 days. Then she reads 8 more pages. How many ...?"""
    (name, pronoun), (other, _) = rng.sample(NAMES, 2)
    verb, unit, lose, question = rng.choice(RATES)
    period = rng.choice(("day", "week"))
    rate, times = rng.randint(2, 15), rng.randint(2, 7)
    total = steps(rate, "*", times)
    sentences = [f"{name} {verb} {rate} {unit} every {period} for {times} {period}s."]
    for i in range(rng.randint(1, 2)):
        opener = "Then" if i == 0 else "After that,"
        if lose is not None and rng.random() < 0.5:
            n = rng.randint(1, max(1, total))
            total = steps(total, "-", n)
            sentences.append(f"{opener} {pronoun} {lose.format(n=n, other=other, item=rng.choice(SINGLE_ITEMS))}.")
        else:
            n = rng.randint(2, 25)
            total = steps(total, "+", n)
            sentences.append(f"{opener} {pronoun} {verb} {n} more {unit}.")
    sentences.append(question.format(name=name))
    return " ".join(sentences), total


def _containers(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """There are 4 bags with 6 marbles in each bag. Leo takes out 5 marbles. How many ...?"""
    name, pronoun = rng.choice(NAMES)
    (plural, singular), noun = rng.choice(CONTAINERS), rng.choice(OBJECTS)
    k, per = rng.randint(2, 9), rng.randint(2, 15)
    count = steps(k, "*", per)
    taken = rng.randint(1, max(1, count))
    count = steps(count, "-", taken)
    text = f"There are {k} {plural} with {per} {noun} in each {singular}. {name} takes out {taken} {noun}"
    if rng.random() < 0.5:
        added = rng.randint(2, 20)
        count = steps(count, "+", added)
        text += f", then {pronoun} puts in {added} new ones"
    return f"{text}. How many {noun} are in the {plural} now?", count


def _small_inventory(rng: random.Random, steps: Steps, n_steps=(1, 2), start_max: int = 20,
                     operand_max: int = 12, capped_loss: bool = False) -> tuple[str, int]:
    """Zoe has 9 shells. She finds 4 more, then sells 6. How many shells ...? (a few steps of + and -,
    small numbers: few enough arithmetic facts that a tiny model learns some in minutes of SFT)."""
    (name, pronoun), (other, _) = rng.sample(NAMES, 2)
    noun = rng.choice(OBJECTS)
    count = start = rng.randint(2, start_max)
    clauses = []
    for _ in range(rng.randint(*n_steps)):
        if rng.random() < 0.5:
            n = rng.randint(1, operand_max)
            count = steps(count, "+", n)
            clauses.append(rng.choice(GAINS).format(n=n, other=other))
        else:
            n = rng.randint(1, max(1, min(count, operand_max) if capped_loss else count))
            count = steps(count, "-", n)
            clauses.append(rng.choice(LOSSES).format(n=n, other=other))
    question = f"{name} has {start} {noun}. {pronoun.capitalize()} {', then '.join(clauses)}. How many {noun} does {name} have now?"
    return question, count


def _chain(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """Two or three steps of + and - on numbers below 10: hard to answer without writing the steps."""
    return _small_inventory(rng, steps, n_steps=(2, 3), start_max=15, operand_max=9, capped_loss=True)


def _long_answers(rng: random.Random, steps: Steps) -> tuple[str, int]:
    """A `small` problem (1-2 steps of + and -) whose worked solution, for half the problems (drawn per
    problem), restates the question clause by clause before each equation: answers of about 20 or about 50
    tokens, so that a tight token budget truncates the long ones (DAPO's regime: uneven lengths, truncation)."""
    question, answer = _small_inventory(rng, steps)
    if rng.random() < 0.5:
        opening, _, rest = question.partition(". ")
        pronoun, _, first = rest.rpartition(". How many")[0].partition(" ")
        clauses = first.split(", then ")
        steps.lines = [f"{opening}."] + [f"{'Then ' + pronoun.lower() if i else pronoun} {clause}, so {line}."
                                         for i, (clause, line) in enumerate(zip(clauses, steps.lines))]
    return question, answer


TEMPLATES = (_inventory, _shopping, _comparison, _rate, _containers)
LEVELS = {"standard": TEMPLATES, "small": (_small_inventory,), "chain": (_chain,), "long": (_long_answers,)}
"""`standard`: all templates, 2-4 steps; `small`: 1-2 steps on small numbers; `chain`: 2-3 steps on
numbers below 10 (the mini chapters' level: tiny models learn its facts, but only by writing the steps);
`long`: `small` with half the solutions written out clause by clause, long and uneven enough for a tight
budget to truncate (the DAPO regime)."""


def draw_problems(rng: random.Random, n: int, seen: set[str], id_prefix: str, templates=TEMPLATES) -> list[Problem]:
    """Draw `n` problems from `templates` (each `(rng, steps) -> (question, answer)`) whose questions
    are not in `seen` (and add them to it); the worked solution is the steps' equations."""
    problems: list[Problem] = []
    attempts = 0
    while len(problems) < n:
        attempts += 1
        if attempts > 100 * n + 1000:
            raise RuntimeError(f"could not draw {n} distinct problems; ask for fewer")
        steps = Steps()
        try:
            question, answer = rng.choice(templates)(rng, steps)
        except OutOfRange:
            continue
        if question in seen:  # keeps train and test disjoint, and each split free of repeats
            continue
        seen.add(question)
        solution = "\n".join(steps.lines + [f"The answer is \\boxed{{{answer}}}"])
        problems.append(Problem(f"{id_prefix}-{len(problems):05d}", question, str(answer), solution))
    return problems


def make_split(seed: int = 0, n_train: int = 2000, n_test: int = 200,
               level: str = "standard") -> tuple[list[Problem], list[Problem]]:
    """Return `(train, test)`: fixed for a given seed and level on every machine, disjoint by question text."""
    if level not in LEVELS:
        raise ValueError(f"level={level!r}: choose one of {sorted(LEVELS)}")
    check_split_sizes(n_train, n_test)
    rng = random.Random(seed)
    seen: set[str] = set()
    prefix = f"arith-s{seed}" if level == "standard" else f"arith-{level}-s{seed}"
    test = draw_problems(rng, n_test, seen, f"{prefix}-test", LEVELS[level])
    train = draw_problems(rng, n_train, seen, f"{prefix}-train", LEVELS[level])
    return train, test


def make_dev(train: list[Problem], test: list[Problem], n_dev: int, seed: int = 0,
             level: str = "standard") -> list[Problem]:
    """`n_dev` development problems beside `make_split(seed, ..., level)`'s (train, test): drawn from a
    stream of their own, so neither of those changes, and sharing no question with either."""
    check_split_size("n_dev", n_dev)
    prefix = f"arith-s{seed}" if level == "standard" else f"arith-{level}-s{seed}"
    seen = {p.question for p in (*train, *test)}
    return draw_problems(random.Random(f"dev-{seed}"), n_dev, seen, f"{prefix}-dev", LEVELS[level])
