"""Vision GRPO's control: continue the cold start's SFT, in the same view, on the same labelled
figures, for a fixed wall-time budget, and evaluate with the same held-out protocol.

If continued SFT for the GRPO run's wall time gains as much, the reward added nothing the worked
answers did not already carry. Loss: token-mean cross entropy over the worked answer (the image's
positions and the question are context with weight 0), at the cold start's learning rate, from the
cold start's weights and optimizer state.

    arl run vision-sft --preset mini time_budget_s=SECONDS [view=blank|text]   # SECONDS: the GRPO comparison's
                                                                            # ledger wall time (`make path04`)
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from ..config import require_positive
from ..rl.config import RunConfig
from ..rl.control import ContinuedSFT, SFTLoop, finish_control
from ..rl.session import service
from ..rl.vision import FigureConfig
from ..rollout import sft_datum
from ..track import RunDir


@dataclass
class Config(RunConfig, FigureConfig, ContinuedSFT):
    max_tokens: int = 24
    """Max new tokens of the held-out evaluation (Vision GRPO's)."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "max_tokens")


PRESETS = {
    "smoke": dict(time_budget_s=0, steps=2, batch_size=4, sft_steps=40, n_train=64, n_dev=8, n_test=8, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the SFT control does not resume: it is a few minutes long, start it again")
    svc = service(cfg, run)
    task = cfg.figure_task(cfg.max_tokens)
    client = svc.create_training_client_from_state_with_optimizer(task.start_weights())
    tok = client.get_tokenizer()
    adam, rng = cfg.sft_adam(), random.Random(cfg.seed)
    examples = task.sft_examples(tok)
    loop = SFTLoop(cfg, run, lambda step: task.held_out(run, step, client.save_weights_and_get_sampling_client(), tok),
                   "vision-sft")
    for _ in loop:  # from the cold start's weights and optimizer state, until the budget is spent
        figures = rng.sample(examples, min(cfg.batch_size, len(examples)))
        # token-mean cross entropy over the worked answers; the image and the question are context
        n_tokens = sum(len(answer) for _, answer in figures)
        datums = [sft_datum(prompt, answer, 1 / n_tokens) for prompt, answer in figures]
        fb = client.forward_backward(datums, "cross_entropy")
        client.optim_step(adam).result()
        loop.end_step(fb.result(), len(datums))
    finish_control(run, f"Vision SFT control ({cfg.view} view) on generated figures, {cfg.model}",
                   ("accuracy", "format_rate"), loop.steps, loop.trained_s, asdict(cfg))
    return run
