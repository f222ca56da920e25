"""The task of the Jev chapter and of its SFT control (`jev-sft`): the record splits, the cold start that
stands in for a pretrained model, reading every split, and the stage table both chapters end with.

A pretrained model already answers such questions in words. The tiny models start from random weights,
so `sft_steps > 0` gives them that competence first: SFT on the training records' answers written out
("team: B\\nurgent: Y\\npriority: 3", `arl.decide.written_example`), cached as a cold start. Jev then
trains the marker positions from there, and its control keeps training the written answers for Jev's
wall time; both read every split, Jev through the markers, the control in its own written format.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from .. import report
from ..coldstart import ColdStart, content_digest, run_cold_start
from ..config import require_positive
from ..data.decisions import make_splits
from ..decide import DecisionFormat, answer_indices, flatten, read_logprobs, read_written, written_example
from ..eval.calibration import calibration_metrics, confidence_correct, fit_temperature, restricted_softmax
from ..report.calibration import plot_reliability
from ..track import RunDir, Tracker
from .config import Group

EVAL_SPLITS = ("dev", "calibration", "test", "hard")
METRICS = ("accuracy", "nll", "ece", "brier")


@dataclass
class DecisionConfig(Group):
    """The base model, the record splits, how candidates are read, and the cold start."""

    model: str = "arl/tiny-qwen3-0.5m"
    """Base model (`arl models`); fully fine-tuned, from its random initialisation or from the cold start."""
    n_train: int = 1200
    """Training records (half tickets, half claims)."""
    n_dev: int = 100
    """Dev records: the curve logged during training, and where the cold start's length was chosen."""
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
    sft_steps: int = 150
    """Cold-start SFT steps on the training records' written-out answers (a stand-in for a pretrained model
    that already answers in words; cached across runs); 0 = start from random weights. 150 was chosen on dev:
    about half the dev questions right, as the reference lab's pretrained model gets half its typed test."""
    sft_batch_size: int = 16
    """Cold-start records per step."""
    sft_learning_rate: float = 5e-3
    """Cold-start learning rate."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "n_train", "n_dev", "n_calibration", "n_test", "n_hard", "sft_batch_size")
        if self.topk < 0:
            raise ValueError(f"topk={self.topk}: must be 0 (the whole vocabulary) or a positive K")
        if self.sft_steps < 0:
            raise ValueError(f"sft_steps={self.sft_steps}: must be 0 (random weights) or a number of cold-start steps")

    def data_splits(self) -> dict[str, list]:
        """Every split's records: train, dev, calibration, test and hard (disjoint by state)."""
        return make_splits(self.data_seed, self.n_train, self.n_dev, self.n_calibration, self.n_test, self.n_hard)

    def start_weights(self, train: Sequence) -> str | None:
        """The cached cold start's training state (trained on the first use), None when sft_steps = 0."""
        if self.sft_steps == 0:
            return None
        # the records' content is part of the key: another generator trains another cold start
        task = f"jev-written-{self.n_train}-{content_digest([r.state for r in train[:20]])}"
        spec = ColdStart(self.model, self.sft_steps, self.sft_batch_size, learning_rate=self.sft_learning_rate,
                         data_seed=self.data_seed, task=task)
        return run_cold_start(spec, train, lambda tok: [written_example(tok, DecisionFormat.for_tokenizer(tok), r)
                                                        for r in train])


def read_splits(sampler, tok, fmt: DecisionFormat, splits: dict[str, list], names: Sequence[str], topk: int,
                written: bool = False) -> tuple[dict[str, list], dict[str, float]]:
    """(candidate logprobs of every question of each split in `names`, eval/SPLIT/* metrics at T = 1):
    through the markers, or with `written` each question after the model's own answers to the ones before."""
    logps, metrics = {}, {}
    for s in names:
        read = read_written if written else read_logprobs
        per_record, missing = read(sampler, tok, fmt, splits[s], topk)
        logps[s] = flatten(per_record)
        metrics.update({f"eval/{s}/{k}": v for k, v in calibration_metrics(logps[s], answer_indices(splits[s])).items()})
        metrics[f"eval/{s}/outside_topk"] = missing
    return logps, metrics


def finish_stages(run: RunDir, tracker: Tracker | None, splits: dict[str, list], base: dict[str, list],
                  trained: dict[str, list], steps: int, metrics: dict[str, float], title: str, config: dict) -> float:
    """The run's end: fit T on the calibration split; log the final step's `metrics` with T and every split's
    calibrated metrics (`eval/SPLIT/calibrated/*`) to `run` and `tracker`; write the table of every stage
    (base, trained, trained + T) on every split (`eval/stages.json`, `eval/summary.json`), the reliability
    diagrams and the report. Returns T."""
    answers = {s: answer_indices(splits[s]) for s in EVAL_SPLITS}
    temperature = fit_temperature(trained["calibration"], answers["calibration"])
    stages = {"base": (base, 1.0), "trained": (trained, 1.0), "trained+T": (trained, temperature)}
    table = {stage: {s: calibration_metrics(lp[s], answers[s], t) for s in EVAL_SPLITS} for stage, (lp, t) in stages.items()}
    metrics = metrics | {"calibration/temperature": temperature} \
        | {f"eval/{s}/calibrated/{k}": table["trained+T"][s][k] for s in EVAL_SPLITS for k in METRICS}
    run.log_metrics(steps, metrics)
    if tracker is not None:
        tracker.log(steps, metrics)
    for s in EVAL_SPLITS:
        curves = {name: confidence_correct([restricted_softmax(lp, t) for lp in logps[s]], answers[s])
                  for name, (logps, t) in stages.items() if name != "base"}
        plot_reliability(run.plots_dir / f"reliability-{s}.png", curves, f"{s}: trained, T = 1 vs T = {temperature:.2f}")
    run.write_eval("step-0000", {"stage": "base", **table["base"]})
    run.write_eval(f"step-{steps:04d}", {"stage": "trained", **table["trained"], "calibrated": table["trained+T"]})
    run.write_eval("stages", {"rows": [{"stage": stage, "step": 0 if stage == "base" else steps,
                                        **{f"{s}/{k}": table[stage][s][k] for s in EVAL_SPLITS for k in METRICS}}
                                       for stage in stages]})
    run.write_eval("summary", {"temperature": temperature, **table, "config": config})
    report.plot_metrics(run)
    rows = [{"split / metric": f"{s} {k}", **{stage: table[stage][s][k] for stage in stages}}
            for s in EVAL_SPLITS for k in METRICS]
    report.write_report(run, f"{title}: base, trained, trained + T = {temperature:.2f}", summary_rows=rows,
                        rollouts_sample=[])
    return temperature
