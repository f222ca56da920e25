"""Search-R1: a policy that looks facts up with a search tool before it answers, trained with
multi-turn GRPO (Jin et al. 2025, "Search-R1", sec. 3: retrieved tokens are masked out of the loss).

Each question is one episode of the `search-r1` environment (`arl.envs.search_r1`): the model may
call `search(query)` (BM25 over the collection, top `top_k` passages), at most one call per turn;
a turn without a call is its answer, graded by exact match of its `Answer:` line (1 / 0, and -0.1
for a missing or malformed answer, an unreadable call, or a budget running out). A group of
`group_size` episodes shares the question; the first turn samples the whole group, then each branch
goes on alone (`arl.rollout.rollout_groups`). Advantage r - mean(group), one value for every token
the policy sampled; observation and template tokens are context with advantage 0
(`arl.rollout.trajectory_datum`). Loss reduction: token mean over the trained (policy) tokens.

The mini task is a generated encyclopedia of fictional people, towns and companies with one- and
two-hop questions (`arl.data.encyclopedia`); test questions are about a part of the world no
training question touches, so nothing can be memorised. An SFT cold start on gold demonstrations
(question -> search calls -> results -> `Answer:`) leaves the tiny model partly competent.

    arl run search-r1 --preset mini [seed=1]
    arl show runs/search-r1/<name>            # the trajectories, token by token
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..rl import batch, update
from ..rl.config import (AgentConfig, KLConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults,
                         objective)
from ..rl.search import AGENT_DEFAULTS, SearchConfig, search_task
from ..rl.session import finish, open_session
from ..rollout import request_seed, rollout_groups, trajectory_datum
from ..track import RunDir


@defaults(**AGENT_DEFAULTS, steps=100)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, AgentConfig, SamplingConfig, SearchConfig):
    """Search-R1's fields: the questions and the search tool (`arl.rl.search`, shared with its SFT control),
    the rollout budgets and cold start, and the policy-update ones it shares with GRPO."""


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=40, max_turns=2,
                  sft_steps=60, n_train=16, n_test=4, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="search-r1-data",
                 n_train=100_000, n_test=500, top_k=3, max_tokens=512, max_turns=6, max_tool_calls=4,
                 max_trajectory_tokens=4096, max_observation_tokens=1024, tool_schemas=True, sft_steps=0, batch_prompts=8,
                 steps=100),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = search_task(cfg)
    session = open_session(cfg, run, resume, task)
    client, chat, loss = session.client, task.chat(session.tokenizer), objective(cfg)
    ref = session.reference() if cfg.kl_coef else None
    for step in session.steps("search-r1", shown=("reward/mean", "rollout/em", "rollout/tool_calls")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. play a group of episodes per question from the current weights, each branch searching on its own
        questions = batch.step_items(task.train, step, cfg.batch_prompts)
        groups = rollout_groups(client.save_weights_and_get_sampling_client(), task.envs(questions, cfg.group_size), chat,
                                task.budgets, cfg.temperature, request_seed(cfg.seed, step))
        # 2. reward: the exact match of the Answer: line, graded by the environment (logged with the episodes'
        # searches and stops, and the em of one- and two-hop questions apart)
        metrics = {**batch.episode_metrics(groups), **batch.tagged_metrics(groups, [task.tag(q) for q in questions], "em"),
                   "time/sample": time.perf_counter() - t0}
        # 3. group-relative advantage, and the episodes it trains (advantage not 0)
        adv_BG, kept = batch.episode_advantages(groups, cfg.adv_scale)

        # 4. datums of the policy's tokens (retrieved passages are context: mask 0), 5. the update
        for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches, ref):
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log: what was trained and what was context
        trained = batch.trained_metrics(kept, metrics["time/sample"], time.perf_counter() - t0)
        session.end_step(step + 1, {**metrics, **stats.metrics(), **trained}, task.rows(questions, groups, adv_BG))
    finish(session, f"Search-R1 on {cfg.data}, {cfg.model}", asdict(cfg))
    return run
