"""Search-R1's environment: answer a question, looking facts up with a `search` tool.

One episode per question. The model may call `search(query)` (BM25 over the collection, top k
passages as the observation); a turn without a call is its final answer, graded by exact match of
its `Answer:` line (`arl.rewards.em`): 1 correct, 0 wrong, `FORMAT_PENALTY` for a missing or
malformed answer; an unreadable tool call or a budget running out also gets `FORMAT_PENALTY`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..data.encyclopedia import Question, make_encyclopedia
from ..rewards.em import FORMAT_PENALTY, grade_answer
from ..tools.search import BM25Index, search_tool
from .base import ToolEnv, register

SYSTEM_PROMPT = ("Answer the question using the search tool: one search call per turn. "
                 "When you know the answer, reply with one line: Answer: <answer>")


class SearchEnv(ToolEnv):
    truncation_reward = FORMAT_PENALTY
    malformed_reward = FORMAT_PENALTY

    def __init__(self, question: Question, search: Callable[[str], str]):
        self.question = question
        self.tools = (search,)

    def initial_messages(self) -> list[dict]:
        return opening(self.question)

    def grade(self, answer: str) -> tuple[float, dict[str, float]]:
        grade = grade_answer(answer, self.question.answers)
        return grade.reward, {"em": float(grade.outcome == "correct"),
                              "answered": float(grade.outcome in ("correct", "wrong"))}


def opening(question: Question) -> list[dict]:
    """The system prompt and the question: the messages every episode (and demonstration) starts from."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question.question}]


def _examples() -> list[SearchEnv]:
    passages, train, test = make_encyclopedia(seed=0, n_train=8, n_test=4)
    search = search_tool(BM25Index(passages), k=2)
    return [SearchEnv(q, search) for q in train[:2] + test[:2]]


register("search-r1", _examples, "questions about a generated encyclopedia, answered with a BM25 search tool")
