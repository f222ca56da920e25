"""SFT control: continue supervised training from the GRPO chapter's cold start, on the same labelled
data, for a fixed wall-time budget, and evaluate with the same held-out protocol.

The honest baseline for an RL result on a labelled task: if continued SFT for the same wall time
gains as much, the RL signal added nothing the labels did not already carry. Loss: token-mean cross
entropy over the completion (the cold start's loss, at the cold start's learning rate by default).

    arl run sft --preset mini time_budget_s=180
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass

from .. import report
from ..coldstart import run_cold_start, sft_examples, sft_targets
from ..config import require_positive
from ..eval import before_after, summary_rows
from ..rl.config import MathConfig, RunConfig
from ..rl.session import service
from ..rl.task import MathTask
from ..rollout import sft_datum
from ..track import RunDir, progress
from ..types import AdamParams


@dataclass
class Config(RunConfig, MathConfig):
    time_budget_s: float = 180.0
    """Wall time of the training steps (evaluation excluded); 0 = run `steps` steps."""
    steps: int = 10_000
    """Upper bound on SFT steps."""
    batch_size: int = 32
    """Sequences per step."""
    learning_rate: float = 3e-3
    """AdamW learning rate (the cold start's)."""
    plain_fraction: float = -1.0
    """Share of targets without the \\boxed{}: -1 = the same data as the cold start, 0 = clean labels."""
    max_tokens: int = 40
    """Max new tokens of the held-out evaluation."""
    eval_every: int = 100
    """Evaluate every N steps (and before and after)."""
    seed: int = 0
    """Seed of the batch order."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "steps", "batch_size", "max_tokens", "eval_every")
        if self.time_budget_s < 0:
            raise ValueError(f"time_budget_s={self.time_budget_s}: must be 0 (use steps) or a number of seconds")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", time_budget_s=0, steps=2, batch_size=4, sft_steps=2, n_train=64,
                  n_test=8, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the SFT control does not resume: it is a few minutes long, start it again")
    svc = service(cfg, run)
    start = cfg.cold_start()
    task = MathTask(*cfg.load_task(), start, cfg.max_tokens)
    client = svc.create_training_client_from_state_with_optimizer(run_cold_start(start, task.train))
    tok = client.get_tokenizer()
    plain = start.plain_fraction if cfg.plain_fraction < 0 else cfg.plain_fraction
    examples = sft_examples(tok, task.train, sft_targets(task.train, plain, start.data_seed))

    def held_out(step: int) -> dict[str, float]:
        return task.held_out(run, step, client.save_weights_and_get_sampling_client(), tok)

    run.log_metrics(0, held_out(0))
    rng = random.Random(cfg.seed)
    adam = AdamParams(learning_rate=cfg.learning_rate, weight_decay=0.0, grad_clip_norm=1.0)
    trained_s, step = 0.0, 0
    with progress(cfg.steps if not cfg.time_budget_s else None, "sft") as bar:
        while step < cfg.steps and (not cfg.time_budget_s or trained_s < cfg.time_budget_s):
            t0 = time.perf_counter()
            batch = rng.sample(examples, min(cfg.batch_size, len(examples)))
            # token-mean cross entropy over the completions: each target token weighs 1 / tokens in the batch
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
    keys = ("accuracy", "format_rate", "accuracy_any_format")
    _, summary = before_after(run, keys)
    run.write_eval("summary", {**summary, "steps": step, "trained_s": trained_s, "config": asdict(cfg)})
    report.plot_metrics(run)
    report.write_report(run, f"SFT control on {cfg.data}, {cfg.model}",
                        summary_rows=summary_rows(summary, keys)
                        + [{"metric": "SFT steps / seconds", "before": "", "after": f"{step} / {trained_s:.0f}"}],
                        rollouts_sample=[])
    return run
