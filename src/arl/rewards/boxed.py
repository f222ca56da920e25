"""The `\\boxed{}` answer verifier shared by every math chapter (GRPO, DAPO, GSPO, OPD, ReTool).

One extractor for all chapters on purpose: the reference lab used three different ones (a regex
without nested braces in GRPO, the last brace-matched box in ReTool, the last *complete* box with a
fallback in DAPO/GSPO), so the same completion could score differently between chapters.
Here the rule is: the LAST `\\boxed{` decides; if it is never closed the answer is missing (a
truncated completion does not get credit for an earlier, abandoned answer).
"""

from __future__ import annotations

import re
import threading

try:
    import math_verify
except ImportError:  # optional: without it only normalised exact matches count
    math_verify = None

_OPEN = "\\boxed{"
_THOUSANDS_COMMA = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def extract_boxed(text: str) -> str | None:
    """Content of the last `\\boxed{...}`, nested braces included; None if absent or unclosed.

    Escaped braces (`\\{`, `\\}`) do not count towards the nesting depth.
    """
    start = text.rfind(_OPEN)
    if start < 0:
        return None
    depth, i = 1, start + len(_OPEN)
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2  # skip the escaped character
            continue
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return text[start + len(_OPEN):i]
        i += 1
    return None


def normalize_answer(s: str) -> str:
    """Canonical text of a short answer: "$1,000." -> "1000", " +5 " -> "5".

    Only presentation is removed (whitespace, `$` signs, one trailing period, thousands commas, a
    leading `+`); anything with meaning, such as "x = 5", is kept as is.
    """
    s = s.replace("\\$", "").replace("$", "").strip()
    s = s.removesuffix(".").strip()
    s = _THOUSANDS_COMMA.sub("", s)
    return s.removeprefix("+").strip()


def boxed_reward(completion_text: str, answer: str) -> float:
    """1.0 if the last boxed answer equals `answer`, else 0.0.

    Equality is first the normalised text (fast, covers almost every integer answer); only on a
    mismatch, and when math-verify is installed, symbolic equivalence decides (`0.5` vs
    `\\frac{1}{2}`), called gold first as math-verify expects.
    """
    boxed = extract_boxed(completion_text)
    if boxed is None:
        return 0.0
    if normalize_answer(boxed) == normalize_answer(answer):
        return 1.0
    if math_verify is None:
        return 0.0
    # math-verify times out with signal.alarm, which only the main thread may use; in rollout
    # worker threads it runs without a timeout (the inputs are short boxed strings).
    timeout = 5 if threading.current_thread() is threading.main_thread() else None
    gold = math_verify.parse(answer, parsing_timeout=timeout)
    pred = math_verify.parse(_OPEN + boxed + "}", parsing_timeout=timeout)
    return 1.0 if math_verify.verify(gold, pred, timeout_seconds=timeout) else 0.0


_NUMBER = re.compile(r"[-+]?\d[\d,]*(?:\.\d+)?")


def any_format_reward(completion_text: str, answer: str) -> float:
    """1.0 if the last number in the completion, boxed or not, equals `answer`: a diagnostic, not a
    training reward. Set beside `boxed_reward` it tells a model that cannot do the task from one that
    does it but ignores the requested format."""
    numbers = _NUMBER.findall(completion_text)
    return float(bool(numbers) and normalize_answer(numbers[-1]) == normalize_answer(answer))
