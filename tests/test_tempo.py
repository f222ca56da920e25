"""TEMPO's library pieces (`arl.rl.tempo`): the state store, resuming a game from its history, the
critic's answer parsing, and the control arm's equivalence with the TextWorld chapter."""

import json

import pytest

from arl.rl.tempo import MacroState, StateStore, correlation, parse_value, restore


def state(i: int, history=(), observation="") -> MacroState:
    return MacroState(game=i, history=list(history), feedback=[], prefix=[1, 2, i], round=len(history), macro=0,
                      observation=observation)


def test_store_is_a_fifo_of_its_capacity():
    store = StateStore(3)
    store.push([state(i) for i in range(5)])
    assert len(store) == 3 and [s.game for s in store.states] == [2, 3, 4]  # the two oldest left first
    with pytest.raises(ValueError, match="capacity"):
        StateStore(0)


def test_store_takes_uniformly_without_replacement_seeded_and_each_state_once():
    a, b = StateStore(10, [state(i) for i in range(10)]), StateStore(10, [state(i) for i in range(10)])
    taken = a.take(4, "tempo-store-0-3")
    assert [s.game for s in taken] == [s.game for s in b.take(4, "tempo-store-0-3")] and len({s.game for s in taken}) == 4
    left = [s.game for s in a.states]
    assert len(a) == 6 and set(left) == set(range(10)) - {s.game for s in taken} and left == sorted(left)  # FIFO order kept
    again = a.take(4, "tempo-store-0-3")
    assert not {s.game for s in again} & {s.game for s in taken}  # a taken state is never drawn again
    c = StateStore(10, [state(i) for i in range(10)])
    assert [s.game for s in c.take(4, "tempo-store-0-4")] != [s.game for s in taken]
    assert len(a.take(20, "x")) == 2 and len(a) == 0 and a.take(3, "x") == [] and StateStore(2).take(3, "x") == []
    a.push([state(11)])
    assert len(a) == 1 and a.states.maxlen == 10  # the capacity survives a take


def test_store_round_trips_through_json():
    store = StateStore(4, [state(i, ["open box"], "You open the box.") for i in range(3)])
    back = StateStore.from_json(json.loads(json.dumps(store.to_json())))
    assert back.capacity == 4 and list(back.states) == list(store.states)


def test_parse_value_by_hand():
    assert parse_value("<value>0.42</value>") == 0.42
    assert parse_value("<value>0.1</value> then <value> .75 </value>") == 0.75  # the last one
    assert parse_value("<value>1.7</value>") == 1.0 and parse_value("<value>-0.2</value>") == 0.0  # clamped
    assert parse_value("<value>1</value>") == 1.0
    assert parse_value("0.42") is None and parse_value("<value>high</value>") is None and parse_value("") is None


def test_correlation_by_hand():
    assert correlation([0.0, 1.0, 2.0], [1.0, 3.0, 5.0]) == pytest.approx(1.0)
    assert correlation([0.0, 1.0], [1.0, 0.0]) == pytest.approx(-1.0)
    assert correlation([0.5, 0.5], [0.0, 1.0]) == 0.0  # a constant side has no ranking


def test_restore_replays_the_history_and_checks_the_last_answer():
    from arl.data.textworld_games import make_game
    from arl.envs.textworld import TextWorldEnv

    game = make_game(0, max_rooms=1, n_objects=3, max_quest_length=2)
    played = TextWorldEnv(game, 0.0, 4)
    played.act(game.walkthrough[0])
    saved = MacroState(game.seed, list(played.history), [], [0], 1, 1, played.answers[-1])
    env = restore(saved, lambda seed: TextWorldEnv(game, 0.0, 4))
    assert env.history == played.history and env.turns == 1
    with pytest.raises(ValueError, match="replaying 1 commands ends in"):
        restore(MacroState(game.seed, list(played.history), [], [0], 1, 1, "something else"),
                lambda seed: TextWorldEnv(game, 0.0, 4))


CONTROL = ["max_tokens=48", "max_turns=4", "min_quest_length=2", "max_quest_length=3", "invalid_penalty=0", "steps=3", "skill_fraction=0.5"]


def test_the_control_arm_is_the_textworld_update(tmp_path):
    """`algorithm=grpo` (without the critic's cold-start stage, which the control otherwise shares) is whole-trajectory GRPO on
    fresh games: the TextWorld chapter's run, row for row, on the keys both log."""
    import smoke
    from arl.track import RunDir

    for chapter, extra in (("textworld", []), ("tempo", ["algorithm=grpo", "critic_sft_steps=0"])):
        done = smoke.run_smoke(chapter, tmp_path, "control", *CONTROL, *extra)
        assert done.returncode == 0, done.stderr[-3000:]
    tw, tempo = (smoke.comparable(RunDir.open(tmp_path / c / "control").read_metrics()) for c in ("textworld", "tempo"))
    shared = [{k: v for k, v in a.items() if k in b} for a, b in zip(tw, tempo)]
    assert len(tw) == len(tempo) == 4 and any(r.get("train/datums") for r in shared)
    assert smoke.differences([{k: v for k, v in b.items() if k in a} for a, b in zip(tw, tempo)], shared) == []
    assert {"eval/won", "reward/mean", "train/tokens", "loss/sum"} <= set().union(*shared)


def test_an_environment_step_budget_ends_the_run_evaluated(tmp_path):
    """env_steps: the run stops after the step whose turns reach the budget, evaluated and summarised
    there (arms compared at equal environment steps share the budget, not the step count)."""
    import json

    import smoke
    from arl.track import RunDir

    done = smoke.run_smoke("tempo", tmp_path, "budget", "env_steps=1")
    assert done.returncode == 0, done.stderr[-3000:]
    run = RunDir.open(tmp_path / "tempo" / "budget")
    rows = run.read_metrics()
    assert [r["step"] for r in rows] == [0, 1] and rows[1]["env/steps"] >= 1
    assert "eval/won" in rows[1] and "eval/critic/value_corr" in rows[1]  # evaluated as the final step
    assert json.loads((run.checkpoints_dir / "latest.json").read_text())["step"] == 1
    assert (run.path / "eval" / "summary.json").is_file()
