"""Tier 1: the held-out protocol's numbers on hand-made completions."""

import math
from concurrent.futures import Future
from types import SimpleNamespace

import pytest

from arl.eval import evaluate
from arl.rewards import any_format_reward, boxed_reward, extract_boxed


class ScriptedSampler:
    """Answers the i-th prompt with the i-th scripted completion; records the sampling params."""

    def __init__(self, completions):
        self.completions = completions
        self.params = []

    def sample(self, model_input, num_samples, params):
        self.params.append(params)
        text, stop_reason = self.completions[model_input.to_ints()[0]]
        future = Future()
        future.set_result(SimpleNamespace(sequences=[SimpleNamespace(text=text, tokens=text.split(), stop_reason=stop_reason)]))
        return future


def test_accuracy_format_rate_and_accuracy_among_formatted_answers():
    sampler = ScriptedSampler([
        ("3 + 4 = 7\nThe answer is \\boxed{7}", "stop"),   # right, boxed
        ("3 + 4 = 8\nThe answer is \\boxed{8}", "stop"),   # wrong, boxed
        ("3 + 4 = 7\nThe answer is 7", "stop"),            # right number, not in the requested format
        ("3 + 4 = 7 7 7 7", "length"),                     # truncated
    ])
    result = evaluate(sampler, [[0], [1], [2], [3]], ["7"] * 4, boxed_reward, max_tokens=16, extract=extract_boxed,
                      extra_rewards={"any_format": any_format_reward})
    assert (result.accuracy, result.format_rate, result.accuracy_given_format) == (0.25, 0.5, 0.5)
    assert result.extra == {"any_format": 0.75} and result.summary()["any_format"] == 0.75
    assert result.truncated == 0.25 and result.n == 4
    assert all(p.temperature == 0.0 and p.max_tokens == 16 for p in sampler.params)  # greedy, fixed budget
    assert result.summary()["accuracy_given_format"] == 0.5
    plain = evaluate(sampler, [[0], [2]], ["7", "7"], boxed_reward, max_tokens=16)
    assert plain.format_rate is None and "format_rate" not in plain.summary()


def test_any_format_reward_reads_the_last_number_boxed_or_not():
    assert any_format_reward("3 + 4 = 7\nThe answer is 7", "7") == 1.0
    assert any_format_reward("The answer is \\boxed{1,024}.", "1024") == 1.0
    assert any_format_reward("7 apples, then 8", "7") == 0.0
    assert any_format_reward("no number here", "7") == 0.0
    assert any_format_reward("it is -3", "-3") == 1.0


def test_items_to_resolve_by_hand():
    from arl.eval.stats import items_to_resolve
    # mean 0.1, sd 1 (diffs +-1 around 0.1 with n - 1 = 1): n = ((1.96 + 0.8416) / 0.1)^2 = 784.9 -> 785
    diffs = [0.1 + 1 / math.sqrt(2), 0.1 - 1 / math.sqrt(2)]
    assert items_to_resolve(diffs) == 785
    assert items_to_resolve(diffs, power=0.5) == math.ceil((1.959964 / 0.1) ** 2)
    assert items_to_resolve([0.0, 0.0]) is None and items_to_resolve([1.0]) is None


def test_positive_f1_and_macro_f1_by_hand():
    from arl.eval.stats import macro_f1, positive_f1

    # TP 1 (item 0), FN 2 (item 1 said NO, item 2 unreadable), FP 2 (item 3 said YES, item 4 unreadable): 2/(2+2+2)
    golds = ["YES", "YES", "YES", "NO", "NO", "NO"]
    preds = ["YES", "NO", None, "YES", None, "NO"]
    assert positive_f1(golds, preds) == 2 / 6
    assert positive_f1(["NO"], ["NO"]) == 0.0  # nothing to score
    overall, per_task = macro_f1(["cv", "cv", "wd", "wd"], ["YES", "NO", "YES", "NO"], ["YES", "NO", "NO", "NO"])
    assert per_task == {"cv": 1.0, "wd": 0.0} and overall == 0.5
    with pytest.raises(ValueError, match="3 tasks, 2 gold labels"):
        macro_f1(["a", "b", "c"], ["YES", "NO"], ["YES", "NO"])
