"""Vision GRPO's control: continue the cold start's SFT, in the same view, on the same labelled
figures, for a fixed wall-time budget, and evaluate with the same held-out protocol.

If continued SFT for the GRPO run's wall time gains as much, the reward added nothing the worked
answers did not already carry. Loss: token-mean cross entropy over the worked answer (the image's
positions and the question are context with weight 0), at the cold start's learning rate, from the
cold start's weights and optimizer state.

    arl run vision-sft --preset mini time_budget_s=180 [view=blank|text]
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass

from .. import report
from ..config import require_positive
from ..eval import before_after, summary_rows
from ..rl.config import RunConfig
from ..rl.session import service
from ..rl.vision import FigureConfig
from ..rollout import sft_datum
from ..track import RunDir, progress
from ..types import AdamParams


@dataclass
class Config(RunConfig, FigureConfig):
    time_budget_s: float = 180.0
    """Wall time of the training steps (evaluation excluded); 0 = run `steps` steps."""
    steps: int = 10_000
    """Upper bound on SFT steps."""
    batch_size: int = 32
    """Figures per step."""
    learning_rate: float = -1.0
    """AdamW learning rate; -1 = the cold start's (`sft_learning_rate`)."""
    max_tokens: int = 24
    """Max new tokens of the held-out evaluation (Vision GRPO's)."""
    eval_every: int = 100
    """Evaluate every N steps (and before and after)."""
    seed: int = 0
    """Seed of the batch order."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "steps", "batch_size", "max_tokens", "eval_every")
        if self.time_budget_s < 0:
            raise ValueError(f"time_budget_s={self.time_budget_s}: must be 0 (use steps) or a number of seconds")
        if not self.sft_steps:
            raise ValueError("sft_steps=0: the control continues a cold start; give it sft_steps > 0")


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
    examples = task.sft_examples(tok)

    def held_out(step: int) -> dict[str, float]:
        return task.held_out(run, step, client.save_weights_and_get_sampling_client(), tok)

    run.log_metrics(0, held_out(0))
    rng = random.Random(cfg.seed)
    lr = cfg.sft_learning_rate if cfg.learning_rate < 0 else cfg.learning_rate
    adam = AdamParams(learning_rate=lr, weight_decay=0.0, grad_clip_norm=1.0)
    trained_s, step = 0.0, 0
    with progress(cfg.steps if not cfg.time_budget_s else None, "vision-sft") as bar:
        while step < cfg.steps and (not cfg.time_budget_s or trained_s < cfg.time_budget_s):
            t0 = time.perf_counter()
            batch = rng.sample(examples, min(cfg.batch_size, len(examples)))
            # token-mean cross entropy over the worked answers: each target token weighs 1 / tokens in the batch
            n_tokens = sum(len(completion) for _, completion in batch)
            datums = [sft_datum(prompt, completion, 1 / n_tokens) for prompt, completion in batch]
            fb = client.forward_backward(datums, "cross_entropy")
            client.optim_step(adam).result()
            step, trained_s = step + 1, trained_s + time.perf_counter() - t0
            metrics = {"loss/ce": fb.result().metrics["loss:sum"], "train/datums": float(len(batch)),
                       "time/step": time.perf_counter() - t0, "time/trained": trained_s}
            if step % cfg.eval_every == 0:
                metrics.update(held_out(step))
            run.log_metrics(step, metrics)
            bar.update()
            bar.set_metrics({"loss": metrics["loss/ce"]})
    if step % cfg.eval_every:
        run.log_metrics(step, held_out(step))
    keys = ("accuracy", "format_rate")
    _, summary = before_after(run, keys)
    run.write_eval("summary", {**summary, "steps": step, "trained_s": trained_s, "config": asdict(cfg)})
    report.plot_metrics(run)
    report.write_report(run, f"Vision SFT control ({cfg.view} view) on generated figures, {cfg.model}",
                        summary_rows=summary_rows(summary, keys)
                        + [{"metric": "SFT steps / seconds", "before": "", "after": f"{step} / {trained_s:.0f}"}],
                        rollouts_sample=[])
    return run
