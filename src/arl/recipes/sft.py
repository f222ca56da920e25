"""SFT control: continue supervised training from a math chapter's cold start, on the same labelled
data, for a fixed wall-time budget, and evaluate with the same held-out protocol.

The honest baseline for an RL result on a labelled task: if continued SFT for the same wall time
gains as much, the RL signal added nothing the labels did not already carry. Loss: token-mean cross
entropy over the completion (the cold start's loss, at the cold start's learning rate by default).

    arl run sft --preset mini time_budget_s=180
    arl run sft --preset mini time_budget_s=180 sft_privileged_fraction=0.5   # OPSD's cold start and data
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass, replace

from ..coldstart import privileged_mask, run_cold_start, sft_examples, sft_targets
from ..config import require_positive
from ..rl.config import MathConfig, RunConfig
from ..rl.control import SFTBudget, SFTLoop, finish_control
from ..rl.session import service
from ..rl.task import MathTask
from ..rollout import sft_datum
from ..track import RunDir
from ..types import AdamParams


@dataclass
class Config(RunConfig, MathConfig, SFTBudget):
    learning_rate: float = 3e-3
    """AdamW learning rate (the cold start's)."""
    plain_fraction: float = -1.0
    """Share of targets without the \\boxed{}: -1 = the same data as the cold start, 0 = clean labels."""
    sft_privileged_fraction: float = 0.0
    """Share of problems shown with their reference solution in the prompt, as OPSD's cold start shows
    them (0.5 there): 0 continues the GRPO chapter's cold start, 0.5 OPSD's, on the same examples."""
    max_tokens: int = 40
    """Max new tokens of the held-out evaluation."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "max_tokens")
        if not 0.0 <= self.sft_privileged_fraction < 1.0:
            raise ValueError(f"sft_privileged_fraction={self.sft_privileged_fraction}: must be in [0, 1) "
                             "(0 = the GRPO chapter's cold start, 0.5 = OPSD's)")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", time_budget_s=0, steps=2, batch_size=4, sft_steps=2, n_train=64,
                  n_test=8, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the SFT control does not resume: it is a few minutes long, start it again")
    svc = service(cfg, run)
    start = replace(cfg.cold_start(), privileged_fraction=cfg.sft_privileged_fraction)
    task = MathTask(*cfg.load_task(), start, cfg.max_tokens)
    client = svc.create_training_client_from_state_with_optimizer(run_cold_start(start, task.train))
    tok = client.get_tokenizer()
    plain = start.plain_fraction if cfg.plain_fraction < 0 else cfg.plain_fraction
    examples = sft_examples(tok, task.train, sft_targets(task.train, plain, start.data_seed),
                            privileged_mask(task.train, start.privileged_fraction, start.data_seed))
    rng, adam = random.Random(cfg.seed), AdamParams(learning_rate=cfg.learning_rate, weight_decay=0.0, grad_clip_norm=1.0)
    loop = SFTLoop(cfg, run, lambda step: task.held_out(run, step, client.save_weights_and_get_sampling_client(), tok), "sft")
    for _ in loop:  # from the cold start's weights and optimizer state, until the budget is spent
        batch = rng.sample(examples, min(cfg.batch_size, len(examples)))
        # token-mean cross entropy over the completions: each target token weighs 1 / tokens in the batch
        weight = 1 / sum(len(completion) for _, completion in batch)
        fb = client.forward_backward([sft_datum(prompt, completion, weight) for prompt, completion in batch], "cross_entropy")
        client.optim_step(adam).result()
        loop.end_step(fb.result(), len(batch))
    finish_control(run, f"SFT control on {cfg.data}, {cfg.model}", ("accuracy", "format_rate", "accuracy_any_format"),
                   loop.steps, loop.trained_s, asdict(cfg))
    return run
