"""GSM8K from a local jsonl file or the `datasets` cache (the `full` preset of the math chapters);
nothing is downloaded.

Each line has `question` and `answer`; the answer is a worked solution with calculator annotations
(`<<48/2=24>>`) and a final line `#### 72`. The gold answer is the text after `####` with thousands
commas removed, as in the reference lab's GRPO chapter.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from arl.data.problem import Problem

_HOW_TO_GET = (
    "arl never downloads data. Get the file once, e.g.\n"
    "  curl -L -o {path} https://raw.githubusercontent.com/openai/grade-school-math/master/"
    "grade_school_math/data/test.jsonl   (or train.jsonl)\n"
    "or, with the `datasets` package:\n"
    "  python -c \"import datasets; datasets.load_dataset('openai/gsm8k', 'main')['test'].to_json('{path}')\""
)
_CALCULATOR = re.compile(r"<<[^>]*>>")


def load_gsm8k(path: str | Path) -> list[Problem]:
    """Read a GSM8K jsonl file into Problems with ids `gsm8k-<file stem>-<line index>`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"GSM8K file not found: {path}\n" + _HOW_TO_GET.format(path=path))
    problems = []
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    for i, line in enumerate(lines):
        problems.append(_problem(json.loads(line), f"gsm8k-{path.stem}-{i}", f"{path}: record {i}"))
    return problems


def _problem(row: dict, id_: str, where: str) -> Problem:
    worked, sep, final = row.get("answer", "").rpartition("####")
    if "question" not in row or not sep:
        raise ValueError(f"{where} needs a `question` and an `answer` ending in '#### N'")
    answer = final.strip().replace(",", "")
    solution = _CALCULATOR.sub("", worked).strip() + f"\nThe answer is \\boxed{{{answer}}}"
    return Problem(id_, row["question"].strip(), answer, solution)


def load_gsm8k_cached(split: str) -> list[Problem]:
    """GSM8K `split` ("train" or "test") from the `datasets` cache, offline; a clear error if absent."""
    import os

    os.environ.setdefault("HF_DATASETS_OFFLINE", "1")  # read before `datasets` is imported
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    try:
        import datasets

        rows = datasets.load_dataset("openai/gsm8k", "main", split=split)
    except Exception as e:  # not installed, not cached, or a broken cache entry
        raise FileNotFoundError(
            f"GSM8K {split} is neither a local file nor in the `datasets` cache ({type(e).__name__}: {e}).\n"
            + _HOW_TO_GET.format(path=f"gsm8k/{split}.jsonl")
        ) from None
    return [_problem(row, f"gsm8k-{split}-{i}", f"openai/gsm8k {split} row {i}") for i, row in enumerate(rows)]
