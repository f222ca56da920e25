"""ReTool: the calculation task, the code environment over the real sandbox, and the chapter's config."""

import contextlib
import io
import re

import pytest

from arl import config
from arl.data.calculation import KINDS, demonstration, make_split
from arl.envs.retool import CodeEnv, opening
from arl.tools.calls import format_tool_call
from arl.models import load_tokenizer
from arl.recipes import load
from arl.rewards import FORMAT_PENALTY
from arl.rollout import Budgets, ChatTokens, rollout_groups
from arl.tools import Sandbox, SandboxConfig, make_code_interpreter, sandbox_metrics

from conftest import TINY
from test_envs import ScriptedSampler


def printed(code: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(code, {})
    return out.getvalue().strip()


def test_split_is_fixed_disjoint_and_every_program_prints_its_answer():
    train, test = make_split(seed=0, n_train=300, n_test=60)
    again_train, again_test = make_split(seed=0, n_train=300, n_test=60)
    assert (train, test) == (again_train, again_test)
    assert not {c.question for c in train} & {c.question for c in test}
    assert {c.kind for c in train} == set(KINDS)
    for c in train + test:
        assert printed(c.code) == c.answer, c
        assert 4 <= len(c.answer) or c.kind == "remainder"
        # the program only copies numbers from the question: no arithmetic left to the model
        assert all(n in c.question for n in re.findall(r"\d+", c.code) if n != "1")
    assert make_split(seed=1, n_train=5, n_test=5) != make_split(seed=0, n_train=5, n_test=5)
    with pytest.raises(ValueError, match="n_test"):
        make_split(n_test=-1)


@pytest.fixture(scope="module")
def results_and_tool():
    results = []
    return results, make_code_interpreter(Sandbox(SandboxConfig(wall_timeout_s=5.0)), on_result=results.append)


def test_demonstrated_output_is_what_the_sandbox_returns(results_and_tool):
    results, tool = results_and_tool
    calc = make_split(seed=0, n_train=3, n_test=0)[0][0]
    with_tool, direct = demonstration(calc, True), demonstration(calc, False)
    assert direct == [{"role": "assistant", "content": f"\\boxed{{{calc.answer}}}"}]
    assert with_tool[0]["content"] == format_tool_call("code_interpreter", {"code": calc.code})
    assert with_tool[1] == {"role": "tool", "content": tool(calc.code)} and with_tool[2] == direct[0]
    assert results[-1].outcome == "ok"


def test_grade_by_hand(results_and_tool):
    env = CodeEnv("What is 4817 * 392?", "1888264", results_and_tool[1])
    assert env.initial_messages() == opening("What is 4817 * 392?")
    for text, reward, stop in [("\\boxed{1888264}", 1.0, "answered"), ("so \\boxed{1,888,264}.", 1.0, "answered"),
                               ("\\boxed{1888265}", 0.0, "answered"), ("1888264", FORMAT_PENALTY, "answered"),
                               ("<tool_call>{oops</tool_call>", FORMAT_PENALTY, "malformed_call")]:
        result = env.step({"role": "assistant", "content": text})
        assert (result.reward, result.done, result.stop_reason) == (reward, True, stop), text


def test_an_episode_runs_the_code_in_the_sandbox_and_never_trains_its_output(results_and_tool):
    results, tool = results_and_tool
    chat = ChatTokens(load_tokenizer(TINY), tool_schemas=False)
    calls = [format_tool_call("code_interpreter", {"code": "print(4817 * 392)"}),
             format_tool_call("code_interpreter", {"code": "print(1 / 0)"}), "\\boxed{1888264}"]
    results.clear()
    envs = [[CodeEnv("What is 4817 * 392?", "1888264", tool)]]
    (traj,), = rollout_groups(ScriptedSampler(chat, calls), envs, chat, Budgets(max_turns=3), 1.0, 0)
    assert (traj.reward, traj.stop_reason, traj.metrics["tool_calls"]) == (1.0, "answered", 2.0)
    assert traj.metrics["printed_answer"] == 1.0
    assert traj.turns[0].observations == ["1888264"]
    assert "ZeroDivisionError" in traj.turns[1].observations[0] and traj.turns[1].observations[0].startswith("Error")
    assert [r.outcome for r in results] == ["ok", "error"]
    metrics = sandbox_metrics(results)
    assert (metrics["sandbox/ok"], metrics["sandbox/error"], metrics["sandbox/calls"]) == (1.0, 1.0, 2.0)
    # the printed result sits in observation tokens, which the mask leaves out of training
    observed = chat.encode("1888264")
    source, tokens = traj.source, traj.tokens
    starts = [i for i in range(len(tokens)) if tokens[i:i + len(observed)] == observed and source[i] == "O"]
    assert starts and all(m == 0 for m in traj.mask[starts[0]:starts[0] + len(observed)])


@pytest.mark.parametrize("overrides, field", [
    ({"sft_direct_fraction": 1.5}, "sft_direct_fraction"),
    ({"sandbox_timeout_s": 0}, "sandbox_timeout_s"),
    ({"data": "gsm8k/train.jsonl"}, "sft_steps"),
    ({"max_turns": 0}, "max_turns"),
])
def test_bad_config_names_the_field(overrides, field):
    with pytest.raises(ValueError, match=field):
        recipe = load("retool")
        config.resolve(recipe.Config, recipe.PRESETS, "mini", overrides)
