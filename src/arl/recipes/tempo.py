"""TEMPO: temporal-difference credit for long text games (the TEMPO blog; the reference lab's 09-tempo).

From a start state (a part-played game, `arl.rl.tempo.MacroState`) N branches play a macro-step of H turns; a branch
the budget cut off ends in a state whose value V a critic estimates, and

    R_n = r_n + V(e_n)  (V = 0 when the branch ended the episode),  G = mean_n R_n,  A_n = R_n - G

(`arl.advantages.tempo_targets`; r_n = 1 if the branch won within the segment). Only the segment's policy tokens carry
A_n. The critic is the policy's own weights asked for `<value>x</value>` in a prompt that shows the game's winning
commands (privileged); its K answers at the start state are rewarded -|V_k - G| (unreadable: -1), trained in the same
update as the actor. Endpoints go to a FIFO store that later steps take start states from (a taken state leaves), beside
`fresh_starts` fresh games. The first `mc_warmup_steps` steps train the critic alone on whole episodes (target: won
0/1). The control, `algorithm=grpo`, is whole-trajectory GRPO (the TextWorld chapter's update) from the same cold start;
`env/steps` counts the turns played, `critic/forward_tokens` the tokens the critic read.

    arl run tempo --preset mini [algorithm=grpo]         # TEMPO, or its control
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, replace

from .. import advantages
from ..envs.textworld import COUNTERS, STOP_REASONS, opening
from ..rl import batch, tempo, update
from ..rl.config import (AgentConfig, KLConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults,
                         objective)
from ..rl.games import LONG_HORIZON, GamesConfig, games_task
from ..rl.session import finish, open_session
from ..rl.task import EnvTask
from ..rollout import forward_tokens, request_seed, rollout_groups, trajectory_datum


@defaults(**LONG_HORIZON, batch_prompts=4, group_size=4, steps=24, learning_rate=2e-4, eval_every=12, save_every=4)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, AgentConfig, SamplingConfig, GamesConfig):
    """TEMPO's fields: the macro-step, the critic, the state store and the warm-up; a step starts from
    `batch_prompts` states with `group_size` branches (N) each, and shares GRPO's policy-update fields."""

    algorithm: str = "tempo"
    """tempo, or grpo: the control, whole-trajectory GRPO from the same cold start (macro_turns = max_turns, no
    critic answers or endpoint values, no warm-up), the TextWorld chapter's update."""
    macro_turns: int = 4
    """H: turns of one macro-step (max_turns a multiple of it; >= max_turns: whole episodes, the control)."""
    critic_samples: int = 4
    """K: critic answers at each start state, trained against the TD target (0: no critic trained, the control)."""
    endpoint_samples: int = 2
    """Critic answers averaged into an endpoint's value V (0: V = 0)."""
    critic_max_tokens: int = 16
    """Tokens of one critic answer."""
    store_capacity: int = 256
    """States the FIFO store holds (the oldest leave first)."""
    fresh_starts: int = 1
    """Fresh games' openings among a TD step's batch_prompts start states; the rest are taken from the store while it has them."""
    mc_warmup_steps: int = 2
    """Monte-Carlo warm-up: the first N steps play games to the end, training the critic alone on their win (0/1)."""
    critic_sft_steps: int = 100
    """Cold-start stage after the TextWorld one: SFT on the critic's answer format (random values); 0 = none."""
    critic_eval_games: int = 8
    """Held-out games whose opening and half-way states check the critic against Monte-Carlo returns (`eval/critic/`)."""
    critic_eval_rollouts: int = 4
    """Policy continuations per held-out state: its Monte-Carlo return is their win rate."""
    env_steps: int = 0
    """Budget of environment steps (turns played): the run ends, evaluated, at the step reaching it; 0: steps alone."""

    def validate(self) -> None:
        super().validate()
        if self.algorithm not in ("tempo", "grpo"):
            raise ValueError(f"algorithm={self.algorithm!r}: use tempo, or grpo (the control)")
        if self.macro_turns < 1 or (self.macro_turns < self.max_turns and self.max_turns % self.macro_turns):
            raise ValueError(f"macro_turns={self.macro_turns}: use a divisor of max_turns={self.max_turns} (every "
                             "macro-step then has H turns), or >= max_turns for whole episodes")
        if self.critic_samples == 1 or self.critic_samples < 0:
            raise ValueError(f"critic_samples={self.critic_samples}: use 0 (no critic) or >= 2 (a baseline of K answers)")
        if self.critic_samples == 0 and self.mc_warmup_steps:
            raise ValueError(f"mc_warmup_steps={self.mc_warmup_steps}: the warm-up trains only the critic; with "
                             "critic_samples=0 set mc_warmup_steps=0")
        if not 0 <= self.mc_warmup_steps < self.steps:
            raise ValueError(f"mc_warmup_steps={self.mc_warmup_steps}: use 0 to steps - 1 = {self.steps - 1}")
        if self.invalid_penalty != 0:
            raise ValueError(f"invalid_penalty={self.invalid_penalty}: TEMPO rewards the win alone (R_max = 1); set 0")
        if self.max_turns >= tempo.CRITIC_TURN:
            raise ValueError(f"max_turns={self.max_turns}: at most {tempo.CRITIC_TURN - 1} (critic requests' seeds)")
        if min(self.endpoint_samples, self.critic_sft_steps, self.critic_eval_games, self.env_steps, self.fresh_starts) < 0 or \
                min(self.critic_max_tokens, self.store_capacity, self.critic_eval_rollouts) < 1:
            raise ValueError("endpoint_samples, critic_sft_steps, critic_eval_games, env_steps, fresh_starts must be >= 0 and "
                             "critic_max_tokens, store_capacity, critic_eval_rollouts >= 1")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=4, batch_prompts=2, group_size=4, max_tokens=48, max_turns=4, macro_turns=2,
                  critic_samples=2, mc_warmup_steps=1, critic_sft_steps=40, fresh_starts=0, sft_steps=60, sft_stages=1, n_train=4,
                  n_test=2, n_dev=2, min_rooms=1, max_rooms=1, n_objects=3, min_quest_length=2, max_quest_length=3,
                  max_observation_tokens=64, max_trajectory_tokens=1024, critic_eval_games=1, critic_eval_rollouts=2, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, n_train=2000, n_test=200, max_rooms=5,
                 n_objects=10, max_quest_length=5, max_tokens=256, max_turns=30, macro_turns=10, critic_max_tokens=256,
                 max_trajectory_tokens=12_000, max_observation_tokens=512, tool_schemas=True, sft_steps=0, critic_sft_steps=0,
                 mc_warmup_steps=4, steps=44, eval_every=11),
}


def make_task(cfg: Config) -> EnvTask:
    """The generated games (`arl.rl.games`); the cold start is the TextWorld one, then the critic's format."""
    train, test = cfg.splits()
    task = games_task(cfg, train, test)
    textworld_start = task.cold_start
    task.cold_start = lambda: tempo.critic_cold_start(cfg, textworld_start(), train, task.env, cfg.critic_sft_steps)
    return task


def main(cfg: Config, run, resume: bool = False):
    if cfg.algorithm == "grpo":  # the control: every field that makes TEMPO differ from GRPO turned off
        cfg = replace(cfg, macro_turns=cfg.max_turns, critic_samples=0, endpoint_samples=0, mc_warmup_steps=0)
    task = make_task(cfg)
    session = open_session(cfg, run, resume, task)
    client, chat, loss, stop = session.client, task.chat(session.tokenizer), objective(cfg), session.stop
    ref = session.reference() if cfg.kl_coef else None
    games = {g.seed: g for g in (*task.train, *task.test)}
    env_of, critic_prompt = lambda seed: task.env(games[seed]), lambda s: chat.prompt(tempo.critic_messages(games[s.game], s), ())
    held = tempo.held_out_states(task.test[:cfg.critic_eval_games], task.env, chat, cfg.max_observation_tokens)
    td = tempo.TDProgress.load(run.checkpoints_dir, session.start, cfg.store_capacity)
    for step in session.steps("tempo", shown=("reward/mean", "critic/abs_error_mean")):
        t0, stats, warm = time.perf_counter(), update.StepStats(loss), step < cfg.mc_warmup_steps
        sampler, seed = client.save_weights_and_get_sampling_client(), request_seed(cfg.seed, step)
        # 1. start states: taken from the store (uniform, without replacement), the rest fresh games' openings
        starts = [] if warm else td.store.take(max(cfg.batch_prompts - cfg.fresh_starts, 0), f"tempo-store-{cfg.seed}-{step}")
        fresh = [batch.draw(task.train, td.fresh + i) for i in range(cfg.batch_prompts - len(starts))]
        starts += [tempo.opening_state(g, chat.prompt(opening(g), task.env(g).tools)) for g in fresh]
        td.fresh += len(fresh)
        # 2. N branches from each: one macro-step of H turns (the warm-up: to the episode's end)
        envs = [[tempo.Recorded(tempo.restore(s, env_of)) for _ in range(cfg.group_size)] for s in starts]
        budgets = task.budgets if warm else replace(task.budgets, max_turns=min(cfg.macro_turns, cfg.max_turns))
        groups = rollout_groups(sampler, envs, chat, budgets, cfg.temperature, seed, prompts=[s.prefix for s in starts])
        td.env_steps += sum(len(t.turns) for g in groups for t in g)
        won_BN = [[t.metrics.get("won", 0.0) for t in g] for g in groups]
        ends_BN = [[tempo.endpoint(s, t, e, chat, budgets) for t, e in zip(g, es)] for s, g, es in zip(starts, groups, envs)]
        # 3. endpoint values (critic), returns, the TD target G per start state and the actor's advantages
        new = [e for es in ends_BN for e in es if e is not None]
        end_prompts = [critic_prompt(e) for e in new] if cfg.endpoint_samples else []
        end_seqs_EK, end_values_EK = tempo.sample_critic(sampler, end_prompts, cfg.endpoint_samples, cfg, seed, stop, 1)
        values = iter(tempo.state_value(v) for v in end_values_EK)
        values_BN = [[next(values, 0.0) if e is not None else 0.0 for e in es] for es in ends_BN]
        _, targets_B, adv_BN = zip(*(advantages.tempo_targets(w, v, [e is None for e in es], cfg.adv_scale)
                                     for w, v, es in zip(won_BN, values_BN, ends_BN)))
        # 4. the critic's K answers at each start state, rewarded -|V_k - G| (warm-up: every H-th state, against its episode's win)
        judged, targets_S = (starts, list(targets_B)) if not warm else zip(*(
            (b, w) for s, g, es, ws in zip(starts, groups, envs, won_BN) for t, e, w in zip(g, es, ws)
            for b in tempo.boundary_states(s, t, e.env, cfg.macro_turns)))
        critic_prompts = [critic_prompt(s) for s in judged] if cfg.critic_samples else []
        seqs_SK, values_SK = tempo.sample_critic(sampler, critic_prompts, cfg.critic_samples, cfg, seed, stop)
        critic_adv_SK = [advantages.batch_advantages([advantages.critic_rewards(v, g)])[0][0] for v, g in zip(values_SK, targets_S)]
        t_sample = time.perf_counter() - t0
        # 5. datums: the actor's segments (the start state's tokens are context) and the critic's answers, one update
        kept = [] if warm else [update.Rollout(t.prompt, t.tokens, t.logprobs, a, t.mask) for g, adv_N in zip(groups, adv_BN)
                                for t, a in zip(g, adv_N) if a]
        kept += batch.with_signal(critic_prompts, seqs_SK, critic_adv_SK)
        n_rollouts = (0 if warm else len(starts) * cfg.group_size) + len(critic_prompts) * cfg.critic_samples
        for mb in update.minibatches(kept, loss, n_rollouts, cfg.minibatches, ref):
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())
        # 6. push the new states, log (the critic against Monte-Carlo returns at each evaluation), save the store
        td.store.push(new)
        metrics = {**batch.episode_metrics(groups, COUNTERS, STOP_REASONS), "env/steps": float(td.env_steps),
                   "critic/forward_tokens": forward_tokens(end_prompts + critic_prompts, [[s.tokens for s in k] for k in (*end_seqs_EK, *seqs_SK)]),
                   **tempo.step_metrics(starts, won_BN, ends_BN, adv_BN, end_values_EK, values_SK, targets_S, len(fresh), td.store)}
        last = step + 1 == cfg.steps or 0 < cfg.env_steps <= td.env_steps
        if cfg.critic_samples and held and ((step + 1) % cfg.eval_every == 0 or last):
            metrics.update(tempo.critic_eval(client.save_weights_and_get_sampling_client(), held, games, env_of, chat,
                                             task.budgets, cfg, stop))
        if (step + 1) % cfg.save_every == 0 or last:
            td.save(run.checkpoints_dir, step + 1)
        rows = task.rows([games[s.game] for s in starts], groups, adv_BN)
        session.end_step(step + 1, {**metrics, **stats.metrics(), **batch.trained_metrics(kept, t_sample, time.perf_counter() - t0)}, rows, last)
        if last:
            break
    finish(session, f"TEMPO on TextWorld games, {cfg.model}", asdict(cfg))
    return run
