"""Tasks with fixed train/test splits: generated mini tasks, and loaders for real datasets on disk."""

from pathlib import Path

from arl.data.arithmetic import make_dev, make_split
from arl.data.gsm8k import load_gsm8k, load_gsm8k_cached
from arl.data.problem import INSTRUCTION, Problem, format_privileged_prompt, format_prompt, hold_back


def load_math_task(data: str, level: str, n_train: int, n_test: int,
                   n_dev: int = 0) -> tuple[list[Problem], list[Problem], list[Problem]]:
    """(train, dev, test) of the math chapters: `data="arithmetic"` generates the mini task at `level`
    (split seed 0, fixed; dev drawn beside train and test without changing them); otherwise `data` is a
    GSM8K train jsonl with its test file beside it (or GSM8K from the `datasets` cache when that file is
    missing), whose last `n_dev` training problems are held back as dev."""
    if data == "arithmetic":
        train, test = make_split(seed=0, n_train=n_train, n_test=n_test, level=level)
        return train, make_dev(train, test, n_dev, seed=0, level=level), test
    if not Path(data).is_file():
        train, test = load_gsm8k_cached("train"), load_gsm8k_cached("test")[:n_test]
    else:
        train, test = load_gsm8k(data), load_gsm8k(data.replace("train", "test"))[:n_test]
    return (*hold_back(train, n_dev, data), test)


__all__ = ["INSTRUCTION", "Problem", "format_privileged_prompt", "format_prompt", "load_gsm8k", "load_gsm8k_cached", "load_math_task", "make_dev", "make_split"]
