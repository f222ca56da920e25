"""Spec-o3's control: continue the cold start's SFT on the same tool-using demonstrations, for the RL
run's wall time, and evaluate with the same held-out protocol (the same episodes, budgets and macro-F1).

If continued SFT for the GRPO run's wall time gains as much, the reward added nothing the
demonstrations did not already carry. Loss: token-mean cross entropy over the assistant's tokens (the
images, the tool's output and the template are context with weight 0), at the cold start's learning
rate, from the cold start's weights and optimizer state.

    arl run spec-o3-sft --preset mini time_budget_s=SECONDS [tool=false]   # SECONDS: the GRPO comparison's
                                                                          # ledger wall time (`make path04`)
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from ..rl.config import AgentConfig, RunConfig, defaults
from ..rl.control import ContinuedSFT, SFTLoop, finish_control
from ..rl.session import service
from ..rl.spec import AGENT_DEFAULTS, SUMMARY_KEYS, SpecConfig, spec_task
from ..rollout import sft_datum
from ..track import RunDir


@defaults(**AGENT_DEFAULTS, batch_size=16, eval_every=1000)
@dataclass
class Config(RunConfig, AgentConfig, SpecConfig, ContinuedSFT):
    """The questions, the episodes' budgets, the cold start it continues, and how long it trains."""


PRESETS = {
    "smoke": dict(time_budget_s=0, steps=2, batch_size=4, sft_steps=80, sft_batch_size=4, n_train=5, n_dev=5, n_test=5,
                  eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the SFT control does not resume: it is minutes long, start it again")
    svc = service(cfg, run)
    task = spec_task(cfg)
    client = svc.create_training_client_from_state_with_optimizer(task.start_weights())
    tok = client.get_tokenizer()
    adam, rng = cfg.sft_adam(), random.Random(cfg.seed)
    examples, pad = task.sft_examples(tok), tok.convert_tokens_to_ids("<|image_pad|>")
    loop = SFTLoop(cfg, run, lambda step: task.held_out(run, step, client.save_weights_and_get_sampling_client(), tok),
                   "spec-o3-sft")
    for _ in loop:  # from the cold start's weights and optimizer state, until the budget is spent
        demos = rng.sample(examples, min(cfg.batch_size, len(examples)))
        # token-mean cross entropy over the assistant's tokens (mask 1); images, tool output, template weigh 0
        n_tokens = sum(sum(mask) for _, _, mask, _ in demos)
        datums = [sft_datum(prompt, tokens, [m / n_tokens for m in mask], images, pad)
                  for prompt, tokens, mask, images in demos]
        fb = client.forward_backward(datums, "cross_entropy")
        client.optim_step(adam).result()
        loop.end_step(fb.result(), len(datums))
    finish_control(run, f"Spec-o3 SFT control ({'tool' if cfg.tool else 'no tool'}) on generated spectra, {cfg.model}",
                   SUMMARY_KEYS, loop.steps, loop.trained_s, asdict(cfg))
    return run
