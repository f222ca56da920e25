"""Jev: fixed-option decisions read off one forward pass, then checked and calibrated.

A record is a state (a support ticket, an insurance claim) and typed questions: choice (A/B/C...),
yes/no and score (1-5). The assistant side is a skeleton with one marker token per question; the
loss is cross entropy only at the positions that predict a marker, the target being the correct
option's symbol (token mean over the batch's questions). Reading takes no generation: one forward
pass, the next-token distribution at each marker, restricted to that question's candidates
(`arl.decide`). A temperature T fitted on the calibration split (minimum NLL) then rescales the
confidence without changing any answer; accuracy, NLL, ECE and Brier before and after, per split.

    arl run jev --preset mini
    arl decide runs/jev/NAME record.json
"""

from __future__ import annotations

import random
import time
from dataclasses import asdict, dataclass

from .. import report
from ..config import require_positive
from ..data.decisions import make_splits
from ..decide import DecisionFormat, answer_indices, decision_datum, flatten, read_logprobs
from ..eval.calibration import calibration_metrics, confidence_correct, fit_temperature, restricted_softmax
from ..report.calibration import plot_reliability
from ..rl.config import RunConfig
from ..rl.session import service
from ..track import RunDir, Tracker, progress
from ..types import AdamParams

EVAL_SPLITS = ("dev", "calibration", "test", "hard")
METRICS = ("accuracy", "nll", "ece", "brier")


@dataclass
class Config(RunConfig):
    model: str = "arl/tiny-qwen3-0.5m"
    """Base model (`arl models`); fully fine-tuned from its random initialisation."""
    steps: int = 400
    """Optimizer steps."""
    batch_size: int = 16
    """Records per step (all questions of a record in one sequence)."""
    learning_rate: float = 5e-3
    """AdamW learning rate."""
    n_train: int = 1200
    """Training records (half tickets, half claims)."""
    n_dev: int = 100
    """Dev records: the curve logged during training."""
    n_calibration: int = 200
    """Calibration records: fit the temperature, nothing else."""
    n_test: int = 200
    """Test records: read once the weights and T are fixed."""
    n_hard: int = 200
    """Hard test records: longer states and two-step rules never seen in training."""
    data_seed: int = 0
    """Seed of the generated records (fixed across seeds: every run sees the same splits)."""
    topk: int = 64
    """topk_prompt_logprobs read at each marker; a candidate outside it gets the K-th logprob (0 = the
    whole vocabulary: exact, and much slower)."""
    eval_every: int = 50
    """Evaluate the dev split every N steps."""
    seed: int = 0
    """Seed of the batch order."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "steps", "batch_size", "n_train", "n_dev", "n_calibration", "n_test", "n_hard", "eval_every")
        if self.topk < 0:
            raise ValueError(f"topk={self.topk}: must be 0 (the whole vocabulary) or a positive K")

    def data_splits(self) -> dict[str, list]:
        """Every split's records: train, dev, calibration, test and hard (disjoint by state)."""
        return make_splits(self.data_seed, self.n_train, self.n_dev, self.n_calibration, self.n_test, self.n_hard)


PRESETS = {
    "smoke": dict(steps=2, batch_size=4, n_train=16, n_dev=4, n_calibration=6,
                  n_test=4, n_hard=4, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the Jev chapter does not resume: it is a few minutes long, start it again")
    svc = service(cfg, run)
    splits = cfg.data_splits()
    client = svc.create_full_training_client(cfg.model, seed=cfg.seed)
    tok = client.get_tokenizer()
    fmt = DecisionFormat.for_tokenizer(tok)
    answers = {s: answer_indices(splits[s]) for s in EVAL_SPLITS}

    def read(names=EVAL_SPLITS) -> tuple[dict[str, list], dict[str, float]]:
        """(candidate logprobs of every question of each split, eval/SPLIT/* metrics at T = 1)."""
        sampler = client.save_weights_and_get_sampling_client()
        logps, metrics = {}, {}
        for s in names:
            per_record, missing = read_logprobs(sampler, tok, fmt, splits[s], cfg.topk)
            logps[s] = flatten(per_record)
            metrics.update({f"eval/{s}/{k}": v for k, v in calibration_metrics(logps[s], answers[s]).items()})
            metrics[f"eval/{s}/outside_topk"] = missing
        return logps, metrics

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
    temperature = fit_temperature(trained["calibration"], answers["calibration"])
    stages = {"base": (base, 1.0), "trained": (trained, 1.0), "trained+T": (trained, temperature)}
    table = {stage: {s: calibration_metrics(lp[s], answers[s], t) for s in EVAL_SPLITS} for stage, (lp, t) in stages.items()}
    metrics |= final | {"calibration/temperature": temperature} \
        | {f"eval/{s}/calibrated/{k}": table["trained+T"][s][k] for s in EVAL_SPLITS for k in METRICS}
    run.log_metrics(cfg.steps, metrics)
    tracker.log(cfg.steps, metrics)
    tracker.close()
    for s in EVAL_SPLITS:
        curves = {name: confidence_correct([restricted_softmax(lp, t) for lp in logps[s]], answers[s])
                  for name, (logps, t) in stages.items() if name != "base"}
        plot_reliability(run.plots_dir / f"reliability-{s}.png", curves, f"{s}: trained, T = 1 vs T = {temperature:.2f}")
    checkpoint = client.save_weights_for_sampler("final").result().path
    run.write_eval("calibration", {"temperature": temperature, "fitted_on": "calibration", "checkpoint": checkpoint})
    run.write_eval("step-0000", {"stage": "base", **table["base"]})
    run.write_eval(f"step-{cfg.steps:04d}", {"stage": "trained", **table["trained"], "calibrated": table["trained+T"]})
    run.write_eval("stages", {"rows": [{"stage": stage, "step": 0 if stage == "base" else cfg.steps,
                                        **{f"{s}/{k}": table[stage][s][k] for s in EVAL_SPLITS for k in METRICS}}
                                       for stage in stages]})
    run.write_eval("summary", {"temperature": temperature, **table, "config": asdict(cfg)})
    report.plot_metrics(run)
    rows = [{"split / metric": f"{s} {k}", **{stage: table[stage][s][k] for stage in stages}}
            for s in EVAL_SPLITS for k in METRICS]
    report.write_report(run, f"Jev decisions on {cfg.model}: base, trained, trained + T = {temperature:.2f}",
                        summary_rows=rows, rollouts_sample=[])
    return run
