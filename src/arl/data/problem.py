"""The one record every math task yields, and the prompt the math chapters send for it.

A shared record lets a recipe switch between the mini arithmetic task and GSM8K by changing one
loader call: rewards read `answer`, SFT cold start reads `solution`, sampling reads `format_prompt`.
"""

from __future__ import annotations

from dataclasses import dataclass

INSTRUCTION = "Reason briefly, then put your final answer in \\boxed{}."


@dataclass(frozen=True)
class Problem:
    id: str
    """Stable across machines for a given source and seed, e.g. `arith-s0-test-00007`."""
    question: str
    answer: str
    """The gold final answer as text (`"14"`); rewards compare against it."""
    solution: str
    """A short worked solution ending with `\\boxed{answer}`: the SFT target for a cold start."""


def format_prompt(problem: Problem) -> list[dict]:
    """Chat messages for sampling: one user turn with the question and the answer-format instruction.

    No system prompt and no few-shot example: the tiny models learn the `\\boxed{}` format in the
    SFT cold start, and a short prompt keeps CPU rollouts cheap.
    """
    return [{"role": "user", "content": f"{problem.question}\n{INSTRUCTION}"}]


PRIVILEGED_HEADER = "Reference solution:"
PRIVILEGED_NOTE = "Use the reference solution to derive the same final answer."


def format_privileged_prompt(problem: Problem) -> list[dict]:
    """The OPSD teacher's prompt: the question, the reference solution (privileged information the
    student's prompt never has), a note on using it, and the same answer-format instruction."""
    return [{"role": "user", "content": f"{problem.question}\n{PRIVILEGED_HEADER}\n{problem.solution}\n"
                                        f"{PRIVILEGED_NOTE}\n{INSTRUCTION}"}]


def check_split_size(field: str, value) -> None:
    """A split's size: a non-negative integer, else a ValueError naming `field`."""
    if not isinstance(value, int) or value < 0:
        raise ValueError(f"{field} must be a non-negative integer, got {value!r}")


def check_split_sizes(n_train: int, n_test: int) -> None:
    """The sizes a generated task's `make_split` takes: non-negative integers, else a ValueError naming the field."""
    for field, value in (("n_train", n_train), ("n_test", n_test)):
        check_split_size(field, value)


def hold_back(train: list, n_dev: int, source: str) -> tuple[list, list]:
    """(train without its last `n_dev` items, those items): the dev split of a real data set, held back from
    its training file `source`."""
    if n_dev >= len(train):
        raise ValueError(f"n_dev={n_dev}: {source} has {len(train)} training items; hold back fewer as dev")
    return train[:len(train) - n_dev], train[len(train) - n_dev:]
