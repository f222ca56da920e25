"""Tasks with fixed train/test splits: generated mini tasks, and loaders for real datasets on disk."""

from pathlib import Path

from arl.data.arithmetic import make_split
from arl.data.gsm8k import load_gsm8k, load_gsm8k_cached
from arl.data.problem import INSTRUCTION, Problem, format_privileged_prompt, format_prompt


def load_math_task(data: str, level: str, n_train: int, n_test: int) -> tuple[list[Problem], list[Problem]]:
    """(train, held-out test) of the math chapters: `data="arithmetic"` generates the mini task at
    `level` (split seed 0, fixed); otherwise `data` is a GSM8K train jsonl with its test file beside it,
    and when that file is missing, GSM8K from the `datasets` cache."""
    if data == "arithmetic":
        return make_split(seed=0, n_train=n_train, n_test=n_test, level=level)
    if not Path(data).is_file():
        return load_gsm8k_cached("train"), load_gsm8k_cached("test")[:n_test]
    return load_gsm8k(data), load_gsm8k(data.replace("train", "test"))[:n_test]


__all__ = ["INSTRUCTION", "Problem", "format_privileged_prompt", "format_prompt", "load_gsm8k", "load_gsm8k_cached", "load_math_task", "make_split"]
