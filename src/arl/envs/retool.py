"""ReTool's environment: solve a calculation, running Python in the sandbox when it helps.

One episode per problem. The model may call `code_interpreter(code)` (a fresh sandboxed interpreter
per call, `arl.tools.Sandbox`; the observation is what the code printed, or its error); a turn
without a call is its final answer, graded by math equivalence of its last `\\boxed{}` with the gold
answer (`arl.rewards.boxed_reward`): 1 correct, 0 wrong, `FORMAT_PENALTY` for no box. An unreadable
tool call or a budget running out also gets `FORMAT_PENALTY`.
"""

from __future__ import annotations

from collections.abc import Callable

from ..data.calculation import make_split
from ..rewards import FORMAT_PENALTY, boxed_reward
from ..rewards.boxed import extract_boxed
from ..tools.sandbox import Sandbox, SandboxConfig, make_code_interpreter
from .base import StepResult, ToolEnv, register

SYSTEM_PROMPT = "You can run Python with the code_interpreter tool. Put the final answer in \\boxed{}."


class CodeEnv(ToolEnv):
    truncation_reward = FORMAT_PENALTY
    malformed_reward = FORMAT_PENALTY

    def __init__(self, question: str, answer: str, code_interpreter: Callable[[str], str]):
        self.question, self.answer, self.printed = question, answer, False
        self.tools = (code_interpreter,)

    def initial_messages(self) -> list[dict]:
        return opening(self.question)

    def step(self, message: dict) -> StepResult:
        """ToolEnv's turn, plus `printed_answer` (1 in the first turn whose program printed exactly the gold
        answer): it tells a wrong program from a right result copied wrongly into the box."""
        result = super().step(message)
        if any(m["content"].strip() == self.answer for m in result.messages) and not self.printed:
            self.printed = True
            result.metrics["printed_answer"] = 1.0
        return result

    def grade(self, answer: str) -> tuple[float, dict[str, float]]:
        if extract_boxed(answer) is None:
            return FORMAT_PENALTY, {"correct": 0.0, "answered": 0.0}
        correct = boxed_reward(answer, self.answer)
        return correct, {"correct": correct, "answered": 1.0}


def opening(question: str) -> list[dict]:
    """The system prompt and the question: the messages every episode (and demonstration) starts from."""
    return [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": question}]


def _examples() -> list[CodeEnv]:
    train, test = make_split(seed=0, n_train=2, n_test=2)
    tool = make_code_interpreter(Sandbox(SandboxConfig(wall_timeout_s=5.0)))
    return [CodeEnv(c.question, c.answer, tool) for c in train + test]


register("retool", _examples, "calculations answered in \\boxed{}, with a sandboxed Python code_interpreter tool")

