"""The TextWorld agent's games and environment: generated games, replay, rewards by hand, ALFWorld's error.

The games are real TextWorld games generated with fixed seeds (1 room, 3 objects, quests of 1-2
commands: about a second each, once per test session's cache).
"""

import copy
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from arl import settings
from arl.data.textworld_games import TEST_SEED, make_game, make_games
from arl.envs import check_env, format_tool_call
from arl.envs.alfworld import AlfWorldUnavailable, require_alfworld
from arl.envs.textworld import INVALID, TextWorldEnv, opening, walkthrough_messages

SIZE = dict(max_rooms=1, n_objects=3, max_quest_length=2)


def act(command):
    return {"role": "assistant", "content": format_tool_call("act", {"command": command})}


def two_step_game():
    """The first of seeds 0.. whose walkthrough has two commands (so the first does not win)."""
    return next(g for g in (make_game(s, **SIZE) for s in range(10)) if len(g.walkthrough) == 2)


def test_splits_are_disjoint_and_walkthroughs_win():
    train, test = make_games(3, 2, **SIZE)
    assert [g.seed for g in train] == [0, 1, 2] and [g.seed for g in test] == [TEST_SEED, TEST_SEED + 1]
    for game in train + test:
        env = TextWorldEnv(game)
        check_env(env)
        messages = walkthrough_messages(env)
        assert env.won and env.invalid == 0 and len(messages) == 2 * len(game.walkthrough) - 1


def test_a_game_regenerates_identically_from_its_seed(tmp_path):
    """The same seed in an empty cache builds the same game: objective, walkthrough, opening."""
    game = make_game(0, **SIZE)
    home = settings.get().home
    settings.configure(home=tmp_path)
    try:
        again = make_game(0, **SIZE)
    finally:
        settings.configure(home=home)
    assert again.path != game.path
    assert (again.objective, again.walkthrough, again.room, again.admissible) == \
        (game.objective, game.walkthrough, game.room, game.admissible)


def play(env, commands):
    return [(r.messages, r.reward, r.done, r.stop_reason) for r in (env.step(act(c)) for c in commands)]


def test_replay_from_the_action_history_is_deterministic():
    game = two_step_game()
    commands = ["dance wildly", *game.walkthrough]
    first = play(TextWorldEnv(game), commands)
    assert play(TextWorldEnv(game), commands) == first  # a fresh game, the same history
    env = TextWorldEnv(game)
    play(env, commands[:2])
    twin = copy.deepcopy(env)  # replays the history into a fresh game
    assert twin.history == env.history and twin.invalid == env.invalid == 1 and twin._game is not env._game
    assert play(twin, commands[2:]) == play(env, commands[2:]) == first[2:]
    assert first[-1][1:] == (1.0, True, "won")


def test_invalid_action_penalty_and_won_reward_by_hand():
    game = two_step_game()
    env = TextWorldEnv(game, invalid_penalty=0.1, max_steps=4)
    assert env.truncation_reward == pytest.approx(-0.4)  # cut before a turn: 4 turns not played
    bad = env.step(act("dance wildly"))  # not admissible: not sent to the game, penalised
    assert bad.reward == pytest.approx(-0.1) and not bad.done and bad.metrics["invalid_actions"] == 1
    assert bad.messages[0]["content"].startswith(INVALID + "\nCommands: ")
    assert env.truncation_reward == pytest.approx(-0.4)  # the penalty kept, 3 turns not played
    unknown = env.step({"role": "assistant", "content": format_tool_call("jump", {})})  # no such tool
    assert unknown.reward == pytest.approx(-0.1) and unknown.messages[0]["content"].startswith("Error:")
    first = env.step(act(game.walkthrough[0].upper()))  # case and spacing do not matter
    assert first.reward == 0.0 and not first.done and first.metrics["invalid_actions"] == 0
    assert "Invalid" not in first.messages[0]["content"]
    won = env.step(act(game.walkthrough[1]))
    assert (won.reward, won.done, won.stop_reason, won.messages, won.metrics["won"]) == (1.0, True, "won", [], 1.0)
    assert env.history == ["dance wildly", game.walkthrough[0].upper(), game.walkthrough[1]]  # the bad tool call sent nothing
    assert env.invalid == 2 and env.score == 1
    # the episode's reward as the rollout sums it: 1 for winning minus 0.1 per invalid action
    assert sum(r.reward for r in (bad, unknown, first, won)) == pytest.approx(0.8)


def test_a_turn_without_a_call_or_with_an_unreadable_one_ends_the_episode_and_never_pays():
    """Quitting is charged as an invalid action on this turn and every one left of max_steps: never
    better than trying every turn (-0.1 each) and losing."""
    game = two_step_game()
    quiet = TextWorldEnv(game, max_steps=4).step({"role": "assistant", "content": "I will take the key."})
    assert (quiet.done, quiet.stop_reason, quiet.reward) == (True, "no_action", pytest.approx(-0.4))
    env = TextWorldEnv(game, max_steps=4)
    tried = env.step(act("dance wildly"))
    broken = env.step({"role": "assistant", "content": "<tool_call>{oops</tool_call>"})
    assert (broken.done, broken.stop_reason, broken.reward) == (True, "malformed_call", pytest.approx(-0.3))
    assert tried.reward + broken.reward == pytest.approx(-0.4) and env.invalid == 2


def test_the_opening_lists_the_admissible_commands_but_examine_look_inventory():
    game = make_game(0, **SIZE)
    text = opening(game)[-1]["content"]
    listed = text.split("Commands: ")[1].split(", ")
    assert game.walkthrough[0] in listed
    assert not any(c.startswith(("examine", "look", "inventory")) for c in listed)


def test_alfworld_fails_clearly_without_the_package(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "alfworld" else real(name, *a))
    with pytest.raises(AlfWorldUnavailable, match="pip install 'alfworld"):
        require_alfworld()


def test_alfworld_fails_clearly_without_its_game_files(monkeypatch, tmp_path):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: object() if name == "alfworld" else real(name, *a))
    monkeypatch.setenv("ALFWORLD_DATA", str(tmp_path))
    with pytest.raises(AlfWorldUnavailable, match=f"alfworld-download --data-dir {tmp_path}") as e:
        require_alfworld(split="train")
    assert str(tmp_path / "json_2.1.1" / "train") in str(e.value) and "ALFWORLD_DATA" in str(e.value)
    with pytest.raises(AlfWorldUnavailable, match="split 'test'"):
        require_alfworld(split="test")


def test_alfworld_run_fails_before_any_work(tmp_path):
    root = Path(__file__).resolve().parents[1]
    out = subprocess.run([sys.executable, "-m", "arl.cli", "run", "textworld", "--preset", "smoke", "--out", str(tmp_path),
                          "games=alfworld", "sft_steps=0"], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PYTHONPATH": str(root / "src"), "ALFWORLD_DATA": str(tmp_path / "none")})
    assert out.returncode == 2, out.stderr[-2000:]
    assert "games=alfworld" in out.stderr and ("alfworld-download" in out.stderr or "pip install" in out.stderr)
    assert not (tmp_path / "textworld").exists()


def test_a_rollout_cut_by_a_budget_is_charged_for_the_turns_it_did_not_play():
    """Through the real rollout: an invalid command, then a turn that runs out of tokens (turn_too_long)
    gets the penalty so far plus one per turn not played; a won episode gets 1 minus its penalties."""
    from arl.models import load_tokenizer
    from arl.rollout import Budgets, ChatTokens, rollout_groups
    from conftest import TINY
    from test_envs import ScriptedSampler
    chat = ChatTokens(load_tokenizer(TINY), tool_schemas=False)
    game = two_step_game()
    budgets = Budgets(max_turns=4, max_tool_calls=4, max_tokens_per_turn=48, max_trajectory_tokens=2048,
                      max_observation_tokens=64)
    long_turn = "I am thinking " * 40
    sampler = ScriptedSampler(chat, [act("dance wildly")["content"], long_turn])
    [[cut]] = rollout_groups(sampler, [[TextWorldEnv(game, max_steps=4)]], chat, budgets, 1.0, 0)
    assert cut.stop_reason == "turn_too_long" and cut.reward == pytest.approx(-0.1 * (1 + 3))
    sampler = ScriptedSampler(chat, [act("dance wildly")["content"], *(act(c)["content"] for c in game.walkthrough)])
    [[won]] = rollout_groups(sampler, [[TextWorldEnv(game, max_steps=4)]], chat, budgets, 1.0, 0)
    assert won.stop_reason == "won" and won.reward == pytest.approx(0.9)
    assert won.metrics["won"] == 1 and won.metrics["invalid_actions"] == 1 and won.metrics["steps"] == 3


def test_splits_have_their_own_seeds_and_sizes_stay_in_range():
    """train, dev and test games come from disjoint seed ranges; a game's size is drawn within its ranges."""
    from arl.data.textworld_games import DEV_SEED, SPLITS, game_size, make_split
    assert [g.seed for g in make_split("dev", 2, **SIZE)] == [DEV_SEED, DEV_SEED + 1]
    assert sorted(SPLITS.values()) == [0, TEST_SEED, DEV_SEED] and DEV_SEED - TEST_SEED == TEST_SEED
    sizes = [game_size(s, 4, 5, min_rooms=2, min_quest_length=3) for s in range(200)]
    assert {r for r, _ in sizes} == {2, 3, 4} and {q for _, q in sizes} == {3, 4, 5}
    assert [game_size(s, 1, 2) for s in range(20)] == [game_size(s, 1, 2, 1, 1) for s in range(20)]
    with pytest.raises(ValueError, match="split='valid'"):
        make_split("valid", 1, **SIZE)
    with pytest.raises(ValueError, match="quest length 3..2"):
        game_size(0, 2, 2, min_quest_length=3)


def test_a_split_skips_games_whose_walkthrough_does_not_win():
    """Game 78 of the long-horizon size has two chests the parser cannot tell apart: its walkthrough
    does not win, so the training split goes on to the next seed instead."""
    from arl.data.textworld_games import make_game
    size = dict(min_rooms=2, max_rooms=4, n_objects=6, min_quest_length=3, max_quest_length=5)
    broken = make_game(78, **size)
    assert not broken.wins and "open chest" in broken.walkthrough
    with pytest.raises(ValueError, match="does not win"):
        walkthrough_messages(TextWorldEnv(broken))
    assert all(make_game(s, **SIZE).wins for s in range(3))


def test_the_cold_start_shows_a_share_of_walkthroughs_with_their_skills():
    """skill_fraction: that share of the cold start's walkthroughs (drawn per game) open with the game's
    skill text before the system prompt; the rest, the evaluation and the student's prompts never do."""
    from types import SimpleNamespace

    from arl.data.textworld_skills import skills_for
    from arl.rl.games import games_task
    from arl.rl.self_teacher import PRIVILEGED

    games = [make_game(s, **SIZE) for s in range(6)]
    seen = {}

    def demonstration_cold_start(key, conversations, stages):
        seen[key] = conversations
        return None

    def cfg(fraction):
        return SimpleNamespace(invalid_penalty=0.1, max_turns=4, sft_steps=10, skill_fraction=fraction, max_observation_tokens=64,
                               tool_schemas=False, sft_stages=1, budgets=lambda: None, demonstration_cold_start=demonstration_cold_start)

    for fraction in (0.0, 0.5, 1.0):
        games_task(cfg(fraction), games, games[:1]).cold_start()
    plain, half, every = seen.values()
    assert len(seen) == 3 and list(seen)[0].endswith("schemas0")  # a changed share is another cached cold start
    systems = [[o[0]["content"] for o, _, _ in c] for c in (plain, half, every)]
    assert systems[0] == [opening(g)[0]["content"] for g in games]
    assert systems[2] == [PRIVILEGED.format(skills=skills_for(g.walkthrough)) + opening(g)[0]["content"] for g in games]
    assert all(s in pair for s, pair in zip(systems[1], zip(systems[0], systems[2])))
    assert 0 < sum(a != b for a, b in zip(systems[0], systems[1])) < len(games)
    assert [m for _, _, m in half] == [m for _, _, m in plain]  # the same demonstrations, only the prompt differs
    assert [o[1:] for o, _, _ in half] == [o[1:] for o, _, _ in plain]


def test_a_game_shorter_than_its_size_asked_is_read_from_the_cache(monkeypatch):
    """Game 127 of the long-horizon size asks for a 3-command quest and TextWorld makes a 2-command one.
    Its manifest once recorded the 2 under the stamp's key, so the cache never matched and every run
    rebuilt the game (and two runs at once collided renaming it into place)."""
    from arl.data import textworld_games
    from arl.data.textworld_games import game_size

    size = dict(min_rooms=2, max_rooms=3, n_objects=4, min_quest_length=2, max_quest_length=4)
    game = make_game(127, **size)
    assert game.quest_length == len(game.walkthrough) == 2 < game_size(127, 3, 4, 2, 2)[1] == 3

    def rebuild(*args):
        raise AssertionError("a cached game was generated again")

    monkeypatch.setattr(textworld_games, "_generate", rebuild)
    assert make_game(127, **size) == game
