"""Search-R1's control: continue the cold start's SFT on the same gold demonstrations (question ->
search calls -> results -> `Answer:`), for the RL run's wall time, and evaluate with the same held-out
protocol (the same questions, index and budgets).

If continued SFT for the GRPO run's wall time answers as many held-out questions, the reward added
nothing the demonstrations did not already carry. Loss: token-mean cross entropy over the assistant's
tokens (the retrieved passages and the template are context with weight 0), at the cold start's
learning rate, from the cold start's weights and optimizer state.

    arl run search-r1-sft --preset mini time_budget_s=600
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from ..rl.config import AgentConfig, RunConfig, defaults
from ..rl.control import ContinuedSFT, SFTLoop, finish_control
from ..rl.search import AGENT_DEFAULTS, SUMMARY_KEYS, SearchConfig, search_task
from ..rl.session import service
from ..rollout import sft_datum
from ..track import RunDir


@defaults(**AGENT_DEFAULTS, batch_size=16, eval_every=1000)
@dataclass
class Config(RunConfig, AgentConfig, SearchConfig, ContinuedSFT):
    """The questions, the episodes' budgets, the cold start it continues (Search-R1's), and how long it trains."""


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", time_budget_s=0, steps=2, batch_size=4, max_turns=2, sft_steps=60,
                  n_train=16, n_test=4, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the SFT control does not resume: it is minutes long, start it again")
    svc = service(cfg, run)
    task = search_task(cfg)
    client = svc.create_training_client_from_state_with_optimizer(task.start_weights())
    tok = client.get_tokenizer()
    adam, rng = cfg.sft_adam(), random.Random(cfg.seed)
    examples = task.sft_examples(tok)
    loop = SFTLoop(cfg, run, lambda step: task.held_out(run, step, client.save_weights_and_get_sampling_client(), tok),
                   "search-r1-sft")
    for _ in loop:  # from the cold start's weights and optimizer state, until the budget is spent
        demos = rng.sample(examples, min(cfg.batch_size, len(examples)))
        # token-mean cross entropy over the assistant's tokens (mask 1); retrieved passages and the template weigh 0
        n_tokens = sum(sum(mask) for _, _, mask in demos)
        datums = [sft_datum(prompt, tokens, [m / n_tokens for m in mask]) for prompt, tokens, mask in demos]
        fb = client.forward_backward(datums, "cross_entropy")
        client.optim_step(adam).result()
        loop.end_step(fb.result(), len(datums))
    finish_control(run, f"Search-R1 SFT control on {cfg.data}, {cfg.model}", SUMMARY_KEYS, loop.steps, loop.trained_s,
                   asdict(cfg))
    return run
