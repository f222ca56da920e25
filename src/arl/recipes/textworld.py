"""TextWorld agent: a policy that wins small text games by sending them commands, trained with
multi-turn GRPO (the reference lab's ALFWorld chapter, on games generated here).

Each training game is one prompt of the `textworld` environment (`arl.envs.textworld`): the model
reads the goal, the room and the commands the game accepts, and calls `act(command)` once per turn;
the game's answer and its next commands come back as the observation. Reward: 1 for winning, minus
`invalid_penalty` per invalid action (a command not in the admissible list, or an unreadable call);
ending a game early (no call, an unreadable call, a turn out of tokens) is charged for every turn left.
A group of `group_size` episodes plays the same game; the first turn samples the whole group, then
each branch goes on alone (`arl.rollout.rollout_groups`). Advantage r - mean(group), one value for
every token the policy sampled in the episode; observation and template tokens are context with
advantage 0 (`arl.rollout.trajectory_datum`). Loss reduction: token mean over the trained tokens.

The mini task: real TextWorld games (`textworld` package) of one room, 3 objects and quests of 1-2
commands, generated with seeds (`arl.data.textworld_games`); held-out games have seeds no training
game has. An SFT cold start on the training games' walkthroughs, laid out as rollouts are (two
cached stages), leaves the tiny model partly competent. `games=alfworld` plays ALFWorld's games instead
(`arl.envs.alfworld`: the alfworld package and its downloaded game files; no cold start).

    arl run textworld --preset mini [seed=1]
    arl show runs/textworld/<name>            # the trajectories, token by token
    docs/chapters/textworld.md                # the method, the results, the three questions of path 03
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..envs.textworld import COUNTERS, STOP_REASONS
from ..rl import batch, update
from ..rl.config import (AgentConfig, KLConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults,
                         objective)
from ..rl.games import GamesConfig, games_task
from ..rl.session import finish, open_session
from ..rl.task import EnvTask
from ..rollout import request_seed, rollout_groups, trajectory_datum
from ..track import RunDir


@defaults(max_trajectory_tokens=1024, sft_steps=300, batch_prompts=4, steps=30, learning_rate=2e-4, eval_every=15)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, AgentConfig, SamplingConfig, GamesConfig):
    """The TextWorld agent's fields: the games, the rollout budgets, the cold start, and the policy-update
    ones it shares with GRPO (a step plays `batch_prompts` games, `group_size` episodes each)."""

    games: str = "textworld"
    """textworld (games generated with seeds), or alfworld (ALFWorld's game files: the alfworld package and
    ALFWORLD_DATA, see `arl.envs.alfworld`; needs sft_steps=0)."""

    def validate(self) -> None:
        super().validate()
        if self.games not in ("textworld", "alfworld"):
            raise ValueError(f"games={self.games!r}: use textworld or alfworld")
        if self.games == "alfworld":
            from ..envs.alfworld import AlfWorldUnavailable, require_alfworld
            try:
                require_alfworld(split="train")
                require_alfworld(split="valid_unseen")
            except AlfWorldUnavailable as e:
                raise ValueError(f"games=alfworld: {e}") from None
            if self.sft_steps > 0:
                raise ValueError(f"sft_steps={self.sft_steps}: ALFWorld's files hold no walkthroughs to demonstrate; "
                                 "set sft_steps=0 (start from an instruction-tuned model)")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=32, max_turns=2,
                  sft_steps=60, sft_stages=1, n_train=4, n_test=2, max_rooms=1, n_objects=3, max_quest_length=2, eval_every=1,
                  save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, n_train=2000, n_test=200,
                 max_rooms=5, n_objects=10, max_quest_length=5, max_tokens=256, max_turns=30,
                 max_trajectory_tokens=12_000, max_observation_tokens=512, tool_schemas=True, sft_steps=0,
                 batch_prompts=8, steps=80, eval_every=20),
}


def make_task(cfg: Config) -> EnvTask:
    """The generated games (`arl.rl.games`), or ALFWorld's."""
    if cfg.games == "alfworld":  # its valid_seen games are the dev split, valid_unseen the test split
        from ..envs.alfworld import AlfWorldEnv, load_alfworld_games
        held_out = ("valid_unseen", cfg.n_test) if cfg.eval_split == "test" else ("valid_seen", cfg.n_dev)
        train, test = load_alfworld_games("train", limit=cfg.n_train), load_alfworld_games(held_out[0], limit=held_out[1])
        return games_task(cfg, train, test, AlfWorldEnv)
    return games_task(cfg, *cfg.splits())


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = make_task(cfg)
    session = open_session(cfg, run, resume, task)
    client, chat, loss = session.client, task.chat(session.tokenizer), objective(cfg)
    ref = session.reference() if cfg.kl_coef else None
    for step in session.steps("textworld", shown=("reward/mean", "rollout/won")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. play a group of episodes of each game from the current weights
        games = batch.step_items(task.train, step, cfg.batch_prompts)
        groups = rollout_groups(client.save_weights_and_get_sampling_client(), task.envs(games, cfg.group_size), chat,
                                task.budgets, cfg.temperature, request_seed(cfg.seed, step))
        # 2. reward: 1 for a win, minus the charges for invalid actions and quitting (the game's), logged with the
        # episodes' wins, steps, invalid actions and score
        metrics = {**batch.episode_metrics(groups, COUNTERS, STOP_REASONS), "time/sample": time.perf_counter() - t0}
        # 3. advantage over the branches of the same game, and the episodes it trains (advantage not 0)
        adv_BG, kept = batch.episode_advantages(groups, cfg.adv_scale)

        # 4. datums of the policy's tokens (observations are context: mask 0), 5. the update
        for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches, ref):
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log: the games won by quest length, what was trained and what was context
        metrics.update(batch.tagged_metrics(groups, [task.tag(g) for g in games], "won"))
        trained = batch.trained_metrics(kept, metrics["time/sample"], time.perf_counter() - t0)
        session.end_step(step + 1, {**metrics, **stats.metrics(), **trained}, task.rows(games, groups, adv_BG))
    finish(session, f"TextWorld agent on {cfg.games} games, {cfg.model}", asdict(cfg))
    return run
