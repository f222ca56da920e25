"""Jev: fixed-option decisions read off one forward pass, then checked and calibrated.

A record is a state (a support ticket, an insurance claim) and typed questions: choice (A/B/C...),
yes/no and score (1-5). The assistant side is a skeleton with one marker token per question; the
loss is cross entropy only at the positions that predict a marker, the target being the correct
option's symbol (token mean over the batch's questions). Reading takes no generation: one forward
pass, the next-token distribution at each marker, restricted to that question's candidates
(`arl.decide`). A temperature T fitted on the calibration split (minimum NLL) then rescales the
confidence without changing any answer; accuracy, NLL, ECE and Brier before and after, per split.
With `sft_steps > 0` training starts from a cold start that writes the answers out (a stand-in for a
pretrained model, `arl.rl.decisions`); its control, `jev-sft`, keeps training that for Jev's wall time.

    arl run jev --preset mini
    arl decide runs/jev/NAME record.json
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass

from ..config import require_positive
from ..decide import DecisionFormat, decision_datum
from ..rl.config import RunConfig
from ..rl.decisions import EVAL_SPLITS, DecisionConfig, finish_stages, read_splits
from ..rl.session import service
from ..track import RunDir, Tracker, progress
from ..types import AdamParams


@dataclass
class Config(RunConfig, DecisionConfig):
    steps: int = 400
    """Optimizer steps."""
    batch_size: int = 16
    """Records per step (all questions of a record in one sequence)."""
    learning_rate: float = 5e-3
    """AdamW learning rate."""
    eval_every: int = 50
    """Evaluate the dev split every N steps."""
    seed: int = 0
    """Seed of the batch order."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "steps", "batch_size", "eval_every")


PRESETS = {
    "smoke": dict(steps=2, batch_size=4, n_train=16, n_dev=4, n_calibration=6,
                  n_test=4, n_hard=4, sft_steps=2, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the Jev chapter does not resume: it is a few minutes long, start it again")
    svc = service(cfg, run)
    splits = cfg.data_splits()
    start = cfg.start_weights(splits["train"])
    client = svc.create_full_training_client(cfg.model, seed=cfg.seed) if start is None \
        else svc.create_training_client_from_state(start)  # the cold start's weights, a fresh optimizer
    tok = client.get_tokenizer()
    fmt = DecisionFormat.for_tokenizer(tok)

    def read(names=EVAL_SPLITS) -> tuple[dict[str, list], dict[str, float]]:
        """(candidate logprobs of every question of each split, eval/SPLIT/* metrics at T = 1), through the markers."""
        return read_splits(client.save_weights_and_get_sampling_client(), tok, fmt, splits, names, cfg.topk)

    base, metrics = read()
    tracker = Tracker.create(cfg.tracker, run)
    run.log_metrics(0, metrics)
    tracker.log(0, metrics)
    rng = random.Random(cfg.seed)
    adam = AdamParams(learning_rate=cfg.learning_rate, weight_decay=0.0, grad_clip_norm=1.0)
    with progress(cfg.steps, "jev") as bar:
        for step in range(1, cfg.steps + 1):
            t0 = time.perf_counter()
            batch = rng.sample(splits["train"], min(cfg.batch_size, len(splits["train"])))
            n_questions = sum(len(r.questions) for r in batch)
            fb = client.forward_backward([decision_datum(tok, fmt, r, 1.0 / n_questions) for r in batch], "cross_entropy")
            client.optim_step(adam).result()
            metrics = {"loss/ce": fb.result().metrics["loss:sum"], "train/datums": float(len(batch)),
                       "train/questions": n_questions, "time/step": time.perf_counter() - t0}
            if step % cfg.eval_every == 0 and step < cfg.steps:
                metrics.update(read(("dev",))[1])
            if step < cfg.steps:
                run.log_metrics(step, metrics)
                tracker.log(step, metrics)
            bar.update()
            bar.set_metrics({"ce": metrics["loss/ce"]})

    trained, final = read()
    checkpoint = client.save_weights_for_sampler("final").result().path
    temperature = finish_stages(run, tracker, splits, base, trained, cfg.steps, metrics | final,
                                f"Jev decisions on {cfg.model}", asdict(cfg))
    tracker.close()
    run.write_eval("calibration", {"temperature": temperature, "fitted_on": "calibration", "checkpoint": checkpoint})
    return run
