"""Calculations too large for a tiny model's head but one line of Python: ReTool's mini task.

Five kinds, each with the one-line program that answers it:

    product      What is 4817 * 392?                                     print(4817 * 392)
    power        What is 37 to the power of 5?                           print(37 ** 5)
    series       What is the sum of the integers from 37 to 912?         print(sum(range(37, 912 + 1)))
    squares      What is the sum of the squares of the integers from ...  print(sum(i * i for i in range(12, 85 + 1)))
    remainder    What is the remainder when 987654 is divided by 97?     print(987654 % 97)

Answers have 4 to 10 digits, so a model that answers from its head is almost always wrong, and one that
copies the numbers into the program and the printed result into `\\boxed{}` is right. The program only
copies numbers from the question (`hi + 1` is left to Python), which a tiny model can learn.
Deterministic like `arl.data.arithmetic`: one `random.Random(seed)`, test split drawn first, train
and test disjoint by question text.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from arl.data.problem import check_split_size, check_split_sizes
from arl.tools.calls import format_tool_call


@dataclass(frozen=True)
class Calculation:
    id: str
    """Stable for a given seed, e.g. `calc-s0-test-00007`."""
    kind: str
    """product, power, series, squares or remainder."""
    question: str
    answer: str
    """The exact result as text, what `code` prints."""
    code: str
    """A one-line program that prints the answer: the cold start's tool call."""


def _product(rng: random.Random) -> tuple[str, str, int]:
    a, b = rng.randint(101, 9999), rng.randint(11, 999)
    return f"What is {a} * {b}?", f"print({a} * {b})", a * b


def _power(rng: random.Random) -> tuple[str, str, int]:
    a, k = rng.randint(11, 99), rng.randint(3, 5)
    return f"What is {a} to the power of {k}?", f"print({a} ** {k})", a ** k


def _series(rng: random.Random) -> tuple[str, str, int]:
    lo = rng.randint(2, 99)
    hi = rng.randint(lo + 100, 999)
    return (f"What is the sum of the integers from {lo} to {hi}?", f"print(sum(range({lo}, {hi} + 1)))",
            sum(range(lo, hi + 1)))


def _squares(rng: random.Random) -> tuple[str, str, int]:
    lo = rng.randint(2, 50)
    hi = rng.randint(lo + 20, 120)
    return (f"What is the sum of the squares of the integers from {lo} to {hi}?",
            f"print(sum(i * i for i in range({lo}, {hi} + 1)))", sum(i * i for i in range(lo, hi + 1)))


def _remainder(rng: random.Random) -> tuple[str, str, int]:
    a, m = rng.randint(100_000, 9_999_999), rng.randint(13, 97)
    return f"What is the remainder when {a} is divided by {m}?", f"print({a} % {m})", a % m


KINDS: dict[str, Callable[[random.Random], tuple[str, str, int]]] = {
    "product": _product, "power": _power, "series": _series, "squares": _squares, "remainder": _remainder}


def _draw(rng: random.Random, n: int, seen: set[str], prefix: str) -> list[Calculation]:
    out: list[Calculation] = []
    while len(out) < n:
        kind = rng.choice(sorted(KINDS))
        question, code, value = KINDS[kind](rng)
        if question in seen:
            continue
        seen.add(question)
        out.append(Calculation(f"{prefix}-{len(out):05d}", kind, question, str(value), code))
    return out


def make_split(seed: int = 0, n_train: int = 2000, n_test: int = 200) -> tuple[list[Calculation], list[Calculation]]:
    """Return `(train, test)`: fixed for a given seed on every machine, disjoint by question text."""
    check_split_sizes(n_train, n_test)
    rng = random.Random(seed)
    seen: set[str] = set()
    test = _draw(rng, n_test, seen, f"calc-s{seed}-test")
    return _draw(rng, n_train, seen, f"calc-s{seed}-train"), test


def make_dev(train: list[Calculation], test: list[Calculation], n_dev: int, seed: int = 0) -> list[Calculation]:
    """`n_dev` development problems beside `make_split(seed)`'s (train, test): a stream of their own,
    so neither of those changes, sharing no question with either."""
    check_split_size("n_dev", n_dev)
    seen = {c.question for c in (*train, *test)}
    return _draw(random.Random(f"dev-{seed}"), n_dev, seen, f"calc-s{seed}-dev")


def demonstration(calc: Calculation, use_tool: bool) -> list[dict]:
    """The gold continuation of the user turn for the SFT cold start.

    With the tool: an assistant turn holding only the `code_interpreter` call with `calc.code`, the tool
    turn with what the sandbox returns for it (the printed answer), then `\\boxed{answer}`. Without: the
    answer boxed at once, which a tiny model can imitate in form but not in value (the direct solutions
    the cold start mixes in, so that RL has a choice to learn)."""
    final = {"role": "assistant", "content": f"\\boxed{{{calc.answer}}}"}
    if not use_tool:
        return [final]
    return [{"role": "assistant", "content": format_tool_call("code_interpreter", {"code": calc.code})},
            {"role": "tool", "content": calc.answer}, final]
