"""AgentOPSD's self-teacher: the privileged prompt, per-turn evidence by hand, skill texts."""

import pytest

from arl.data.textworld_skills import GENERAL, SKILLS, skills_for
from arl.rl.self_teacher import PRIVILEGED, credit_metrics, per_token, teacher_prompt, turn_evidence
from arl.rollout.multiturn import Trajectory, Turn


def two_turns() -> Trajectory:
    # turn 1: 2 action tokens then 3 template/observation tokens; turn 2: 1 action token
    return Trajectory([1, 2], [Turn([10, 11, 12, 13, 14], "AATOT", [-1.0, -2.0, 0.0, 0.0, 0.0], "a"),
                               Turn([20], "A", [-0.5], "b")], reward=1.0)


def test_turn_evidence_sums_teacher_minus_student_over_action_tokens_only():
    teacher = [-0.5, -1.0, -9.0, -9.0, -9.0, -2.0]  # observation tokens' logprobs must not count
    assert turn_evidence(two_turns(), teacher) == pytest.approx([(-0.5 + 1.0) + (-1.0 + 2.0), -2.0 + 0.5])
    with pytest.raises(ValueError, match="5 teacher logprobs for 6 tokens"):
        turn_evidence(two_turns(), teacher[:5])


def test_per_token_spreads_a_turn_value_over_its_tokens():
    assert per_token(two_turns(), [1.1, 0.9]) == [1.1] * 5 + [0.9]
    with pytest.raises(ValueError, match="1 values for 2 turns"):
        per_token(two_turns(), [1.0])


class FakeChat:
    def prompt(self, messages, tools):
        return messages


def test_teacher_prompt_prepends_the_skills_to_the_system_message():
    opening = [{"role": "system", "content": "You play."}, {"role": "user", "content": "Goal: x"}]
    messages = teacher_prompt(FakeChat(), opening, (), "Skill A")
    assert messages[0]["content"] == "[Privileged Skill Information]\nSkill A\n\nYou play." == PRIVILEGED.format(
        skills="Skill A") + "You play."
    assert messages[1] == opening[1] and opening[0]["content"] == "You play."  # the student's opening is untouched
    with pytest.raises(ValueError, match="system message"):
        teacher_prompt(FakeChat(), opening[1:], (), "Skill A")


def test_skills_follow_the_kinds_of_command_and_never_name_the_answer():
    text = skills_for(["go east", "open box", "take key from box", "unlock chest with key"])
    assert text.splitlines() == [GENERAL, SKILLS["go"], SKILLS["open"], SKILLS["unlock"], SKILLS["take"]]
    assert "chest" not in text.split(SKILLS["go"])[0]  # general skill is game-free
    assert skills_for(["eat apple"]).splitlines() == [GENERAL, SKILLS["eat"]]


def test_credit_metrics_over_trained_episodes():
    credit = [[{"adv": [1.1, 0.9], "delta_b": [0.2, -0.1], "weight": [1.2, 0.8], "multiplier": [1.1, 0.9]},
               {"adv": [0.0], "delta_b": [0.3], "weight": [1.0], "multiplier": [1.0]}]]
    out = credit_metrics([[[1.0, -3.0], [2.0]]], credit, [[1.0, 0.0]], [[[0.0] * 6, [0.0] * 4]])
    assert out["opsd/evidence_mean"] == 0.0 and out["opsd/evidence_abs_mean"] == 2.0
    assert out["opsd/delta_b_abs_mean"] == pytest.approx(0.15)  # the untrained episode's 0.3 is left out
    assert (out["opsd/weight_min"], out["opsd/weight_max"]) == (0.8, 1.2)
    assert out["opsd/teacher_tokens"] == 10 and out["opsd/teacher_requests"] == 2
