"""ReTool: a policy that learns when to run Python, trained with multi-turn GRPO (Feng et al. 2025,
"ReTool", sec. 3.2: interpreter feedback is masked out of the loss; the reward is the outcome alone).

Each problem is one episode of the `retool` environment (`arl.envs.retool`): the model may call
`code_interpreter(code)`, a fresh sandboxed Python process per call (`arl.tools.Sandbox`: namespaces,
an unprivileged uid, rlimits, seccomp, a wall clock), and reads what it printed; a turn without a call
is its answer, graded by math equivalence of its last `\\boxed{}` (1 / 0, and -0.1 for no box, an
unreadable call or a budget running out). A group of `group_size` episodes shares the problem;
advantage r - mean(group) on every token the policy sampled; interpreter output and template tokens are
context with advantage 0 (`arl.rollout.trajectory_datum`). Loss reduction: token mean over the
trained (policy) tokens.

The mini task is calculations a tiny model cannot do in its head but can in one line of Python
(`arl.data.calculation`: large products, powers, sums of series, remainders). The SFT cold start
demonstrates a mix: `sft_direct_fraction` of the problems answered directly (right in form, not in
value: the model cannot learn the products), the rest by a tool call, its output and the boxed answer.
So the cold-started model calls the tool on about half the problems, and RL has a choice to learn.
Logged per step: tool-call rate, sandbox outcomes (ok, error, timeout, killed) and latency.

    arl run retool --preset mini [seed=1]
    arl show runs/retool/<name>            # the trajectories, token by token
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..rl import batch, update
from ..rl.config import (AgentConfig, KLConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults,
                         objective)
from ..rl.retool import AGENT_DEFAULTS, CalcConfig, retool_task
from ..rl.session import finish, open_session
from ..rollout import request_seed, rollout_groups, trajectory_datum
from ..tools.sandbox import Sandbox
from ..track import RunDir


@defaults(**AGENT_DEFAULTS, group_size=4, steps=100)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, AgentConfig, SamplingConfig, CalcConfig):
    """ReTool's fields: the task, the sandbox, the rollout budgets and the cold start's mix (`arl.rl.retool`,
    shared with its SFT control), and the policy-update ones it shares with GRPO."""


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=24, max_turns=2,
                  sft_steps=30, n_train=16, n_test=4, eval_every=1, save_every=1),
    "mini": {},
    # GSM8K-style problems on SmolLM2 with LoRA, no cold start; the reference lab's budgets
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, sft_steps=0, steps=100,
                 data="gsm8k/train.jsonl", n_train=100_000, n_test=500, batch_prompts=8, group_size=8, tool_schemas=True,
                 max_tokens=512, max_turns=6, max_tool_calls=4, max_trajectory_tokens=4096, max_observation_tokens=512),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = retool_task(cfg, Sandbox(cfg.sandbox_config()))
    session = open_session(cfg, run, resume, task)
    client, chat, loss = session.client, task.chat(session.tokenizer), objective(cfg)
    ref = session.reference() if cfg.kl_coef else None
    for step in session.steps("retool", shown=("reward/mean", "rollout/correct")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. play a group of episodes per problem from the current weights; the code runs in the sandbox
        task.tool_metrics()
        problems = batch.step_items(task.train, step, cfg.batch_prompts)
        groups = rollout_groups(client.save_weights_and_get_sampling_client(), task.envs(problems, cfg.group_size), chat,
                                task.budgets, cfg.temperature, request_seed(cfg.seed, step))
        # 2. reward: the outcome alone (the boxed answer, graded by the environment), logged with the episodes'
        # tool calls and stops
        metrics = {**batch.episode_metrics(groups), "time/sample": time.perf_counter() - t0}
        # 3. group-relative advantage, and the episodes it trains (advantage not 0)
        adv_BG, kept = batch.episode_advantages(groups, cfg.adv_scale)

        # 4. datums of the policy's tokens (interpreter output is context, never trained), 5. the update
        for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches, ref):
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log: this step's sandbox calls (ok, error, timeout, killed, latency), what was trained and what was context
        metrics.update(task.tool_metrics())
        trained = batch.trained_metrics(kept, metrics["time/sample"], time.perf_counter() - t0)
        session.end_step(step + 1, {**metrics, **stats.metrics(), **trained}, task.rows(problems, groups, adv_BG))
    finish(session, f"ReTool on {cfg.data}, {cfg.model}", asdict(cfg))
    return run
