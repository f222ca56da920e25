"""AgentOPSD: which turn of a long episode earns its outcome? A privileged self-teacher's evidence
spreads each episode's GRPO advantage over its turns (the reference lab's 09-AgentOPSD, on the
long-horizon TextWorld games generated here instead of ALFWorld).

A step plays `group_size` episodes of each of `batch_prompts` games from the current weights, exactly
as the TextWorld chapter does (reward: 1 for a win, nothing else in the long-horizon world). Then the
same frozen snapshot, shown skill text for the game's kinds of command (`arl.data.textworld_skills`:
how to move, open, unlock, take, place; never the answer), scores every episode's tokens
(`arl.rl.self_teacher`): turn t's evidence e_t is the teacher's minus the student's logprob summed over
the turn's action tokens. `arl.advantages.belief_credit` turns it into turn advantages:

    A = (r - mean) / std over the group;  b0 = the group's success rate
    B_t = sigmoid(logit b0 + C_t), C_t = gamma C_{t-1} + e_t;  credit_t = sign(A) (B_t - B_{t-1})
    w_t = clip(1 + bound z_t, 1 - bound, 1 + bound) (z: credit z-scored in the episode)
    A_t = A ((1 - lambda) + lambda w_t)         every action token of turn t carries A_t

`reshape_lambda=0` is the control: sequence-level GRPO, the same episodes and seeds. Loss: ppo with the
ratio clipped to [0.8, 1.24]. Evaluation plays the held-out games without skills. A tiny model reads
text it was trained on: the long-horizon cold start shows `skill_fraction` of its walkthroughs with their
skill text (`arl.rl.games`; every arm starts from it; the student's prompts never hold skills).

    arl run agent-opsd --preset mini [seed=1] [reshape_lambda=0] [credit_bound=1.0]
    arl compare agent-opsd --vary reshape_lambda=0.5,0 --vary credit_bound=1.0 --set eval_every=24 --seeds 3
    docs/chapters/agent-opsd.md
"""

from __future__ import annotations

import statistics
import time
from dataclasses import asdict, dataclass

from .. import advantages
from ..data.textworld_skills import skills_for
from ..envs.textworld import COUNTERS, STOP_REASONS
from ..rl import batch, update
from ..rl.config import AgentConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults, objective
from ..rl.games import LONG_HORIZON, GamesConfig, games_task
from ..rl.self_teacher import credit_metrics, per_token, teacher_logprobs, teacher_prompt, turn_evidence
from ..rl.session import finish, open_session
from ..rollout import forward_tokens, request_seed, rollout_groups, trajectory_datum
from ..track import RunDir


@defaults(**LONG_HORIZON, batch_prompts=4, group_size=8, steps=24, learning_rate=2e-4, eval_every=12, loss_fn="ppo",
          clip_low_threshold=0.8, clip_high_threshold=1.24, adv_scale="std")
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, LossConfig, AgentConfig, SamplingConfig, GamesConfig):
    """AgentOPSD's fields: the long-horizon games, the rollout budgets, the cold start, the update (ppo, GRPO
    groups of `group_size` episodes per game) and the turn credit."""

    reshape_lambda: float = 0.5
    """lambda: how much of a turn's advantage the teacher's credit reshapes (0: sequence-level GRPO, the control)."""
    credit_bound: float = 0.2
    """The turn weight's range: clip(1 + bound z, 1 - bound, 1 + bound), at most 1 (so no advantage flips sign)."""
    credit_gamma: float = 0.95
    """gamma: how much of the earlier turns' evidence the belief keeps (C_t = gamma C_{t-1} + e_t)."""

    def validate(self) -> None:
        super().validate()
        if not 0.0 <= self.reshape_lambda <= 1.0 or not 0.0 <= self.credit_bound <= 1.0:
            raise ValueError(f"reshape_lambda={self.reshape_lambda}, credit_bound={self.credit_bound}: each must be in "
                             "[0, 1] (larger values could flip a turn's advantage against its episode's)")
        if not 0.0 <= self.credit_gamma <= 1.0:
            raise ValueError(f"credit_gamma={self.credit_gamma}: must be in [0, 1]")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=32, max_turns=3,
                  max_observation_tokens=64, max_trajectory_tokens=1024, sft_steps=60, sft_stages=1, n_train=4, n_dev=2, n_test=2, min_rooms=1,
                  max_rooms=1, n_objects=3, min_quest_length=1, max_quest_length=2, eval_every=1, save_every=1,
                  invalid_penalty=0.1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-6, n_train=2000, n_test=200,
                 max_rooms=5, n_objects=10, max_quest_length=8, max_tokens=256, max_turns=50, max_trajectory_tokens=12_000,
                 max_observation_tokens=512, tool_schemas=True, sft_steps=0, batch_prompts=16, steps=80, eval_every=20),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = games_task(cfg, *cfg.splits())
    session = open_session(cfg, run, resume, task)
    client, chat, loss = session.client, task.chat(session.tokenizer), objective(cfg)
    for step in session.steps("agent-opsd", shown=("reward/mean", "opsd/delta_b_abs_mean")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. play a group of episodes of each game from a frozen snapshot of the current weights
        games = batch.step_items(task.train, step, cfg.batch_prompts)
        sampler = client.save_weights_and_get_sampling_client()
        groups = rollout_groups(sampler, task.envs(games, cfg.group_size), chat, task.budgets, cfg.temperature,
                                request_seed(cfg.seed, step))
        # 2. reward: the win; the same snapshot, shown the game's skills, scores every episode's tokens
        metrics = {**batch.episode_metrics(groups, COUNTERS, STOP_REASONS), "time/sample": time.perf_counter() - t0}
        prompts = [teacher_prompt(chat, env.initial_messages(), env.tools, skills_for(g.walkthrough))
                   for g, [env] in zip(games, task.envs(games))]
        flat, teacher_prompts = [t for g in groups for t in g], [p for p in prompts for _ in range(cfg.group_size)]
        teacher_BG = batch.by_group(teacher_logprobs(sampler, teacher_prompts, flat), cfg.group_size)
        metrics["teacher/forward_tokens"] = forward_tokens(teacher_prompts, [[t.tokens] for t in flat])
        # 3. advantages: the group's (r - mean) / std, spread over each episode's turns by the belief credit
        rewards_BG = batch.episode_rewards(groups)
        adv_BG, _ = advantages.batch_advantages(rewards_BG, cfg.adv_scale)
        evidence_BG = [[turn_evidence(t, lp) for t, lp in zip(g, lp_G)] for g, lp_G in zip(groups, teacher_BG)]
        credit_BG = [[advantages.belief_credit(a, e, statistics.fmean(r_G), cfg.credit_gamma, cfg.credit_bound,
                                               cfg.reshape_lambda) for a, e in zip(adv_G, e_G)]
                     for adv_G, e_G, r_G in zip(adv_BG, evidence_BG, rewards_BG)]
        kept = [update.Rollout(t.prompt, t.tokens, t.logprobs, per_token(t, c["adv"]), t.mask)
                for g, adv_G, c_G in zip(groups, adv_BG, credit_BG) for t, a, c in zip(g, adv_G, c_G) if a]

        # 4. datums: each action token carries its turn's advantage (observations are context), 5. the update
        for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches):
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            stats.add(mb, client.forward_backward(datums, *loss.builtin).result(), client.optim_step(cfg.adam(step)).result())

        # 6. log: the teacher's evidence, the beliefs it moved and the turn weights it gave
        metrics.update(credit_metrics(evidence_BG, credit_BG, adv_BG, teacher_BG))
        trained = batch.trained_metrics(kept, metrics["time/sample"], time.perf_counter() - t0)
        rows = task.rows(games, groups, adv_BG)
        for row, c in zip(rows, (c for c_G in credit_BG for c in c_G)):
            row.update(turn_advantages=c["adv"], turn_delta_b=c["delta_b"])
        session.end_step(step + 1, {**metrics, **stats.metrics(), **trained}, rows)
    finish(session, f"AgentOPSD on long-horizon TextWorld games, {cfg.model}", asdict(cfg))
    return run

