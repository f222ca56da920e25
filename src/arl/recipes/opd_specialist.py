"""Specialist vs general: fit a specialist ability and keep the general one, by on-policy distillation.

The reference lab's medical chapter in mini form. The general model (the base) is the OPD chapter's teacher (a 5M
model trained to box arithmetic answers) after a short broad SFT in which a tenth of the problems are dose problems
(`general_mix`). The specialist domain is medication-dose problems (`arl.data.dosage`), which need multiplication and
division (the arithmetic task has only + and -). Stages, each scored on both domains' held-out tests:

1. base: the general model.
2. SFT: the base fine-tuned on the specialist domain's worked solutions. Specialist up; general down.
3. OPD: the base as student, the SFT model as teacher, specialist prompts (`distill.teacher_advantages`).
4. SAR-OPD: from OPD's end, OPD on general prompts with the base as teacher (restore what it had).
5. SFT-SAR-OPD: the same general stage from the SFT model (the specialist gain of SFT, then restore).
6. IDT-OPD: from the base, interleaved steps: specialist prompts with the SFT teacher and general prompts with the
   base teacher, `idt_ratio` steps of each per cycle, each domain with its own data cursor
   (`distill.interleaved_schedule`), one optimizer.
7. SFT-IDT-OPD: the same interleaved steps from the SFT model: the general steps restore the general domain while
   the specialist steps hold the student to the SFT teacher on dose prompts.

    arl run opd-specialist --preset mini [seed=1] [idt_ratio=2:1] [stages=sft-sar-opd,sft-idt-opd]

Outputs: `eval/stages.json` (both domains' accuracy at every stage and checkpoint; `arl.rl.stages`), the trade-off
plot `plots/tradeoff.png`, per-step metrics namespaced by domain (`specialist/opd/reverse_kl_mean`).
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from ..coldstart import ColdStart, run_cold_start
from ..data import dosage
from ..distill import interleaved_schedule, parse_ratio, parse_stages, teacher_advantages
from ..rewards import boxed_reward
from ..rl import batch, update
from ..rl.config import DistillConfig, MathConfig, OptimConfig, RunConfig, SamplingConfig
from ..rl.session import service
from ..rl.stages import Stages
from ..rl.task import MathTask
from ..rollout import rl_datum
from ..track import RunDir, Tracker

DOMAINS = ("specialist", "general")
STAGES = {"opd": "base", "sar-opd": "opd", "sft-sar-opd": "sft", "idt-opd": "base", "sft-idt-opd": "sft"}
"""The OPD stages, in the order a run trains them, and the stage whose final weights each starts from
(base and SFT are the cached models)."""


@dataclass
class Config(RunConfig, OptimConfig, DistillConfig, SamplingConfig, MathConfig):
    model: str = "arl/tiny-qwen3-5m"
    """The general model's base (its cold start below is the OPD chapter's teacher, cached)."""
    sft_steps: int = 1200
    """SFT steps that make the general model from `model` on the general (arithmetic) task."""
    sft_learning_rate: float = 2e-3
    """The general model's SFT learning rate."""
    sft_plain_fraction: float = 0.0
    """Share of the general model's SFT targets without \\boxed{} (0: it follows the format)."""
    general_mix: float = 0.1
    """Share of dose problems in the general model's broad SFT: a general model has seen a little of every domain
    (without any, the student never samples a `*` on a dose problem and OPD has no token of the teacher's to push up)."""
    general_mix_steps: int = 200
    """Steps of that broad SFT (arithmetic plus the dose share), from the arithmetic model."""
    specialist_sft_steps: int = 200
    """SFT steps of the specialist model (from the general model, on the dose problems)."""
    specialist_sft_seed: int = 0
    """Seed of the specialist SFT's data order: one specialist teacher, trained once and cached, for every seed of
    the OPD stages (as the reference lab has one SFT model)."""
    specialist_sft_learning_rate: float = 2e-3
    """The specialist SFT's learning rate."""
    specialist_n_train: int = 2000
    """Generated specialist (dose) training problems."""
    specialist_n_test: int = 200
    """Held-out specialist problems."""
    steps: int = 50
    """OPD steps of each staged stage (OPD, SAR-OPD's general stage, SFT-SAR-OPD); IDT-OPD runs idt_steps."""
    learning_rate: float = 1e-4
    """Learning rate of the OPD stage and of IDT-OPD."""
    sar_learning_rate: float = 1.5e-4
    """Learning rate of the stages that restore the general domain: SAR-OPD's general stage, SFT-SAR-OPD and
    SFT-IDT-OPD (the reference lab uses 5e-6 after 4e-5 on a 4B LoRA; here the SFT model's general answers have far to come back)."""
    idt_ratio: str = "1:1"
    """IDT-OPD's schedule: specialist:general steps per cycle."""
    idt_steps: int = 100
    """Steps in all (both domains) of IDT-OPD and of SFT-IDT-OPD."""
    stages: str = ",".join(STAGES)
    """The OPD stages to train, comma-separated, in the order given; a stage that starts from another OPD stage
    (sar-opd from opd) needs it in the list before it."""
    eval_every: int = 25
    """Evaluate both domains every N steps of a stage (and at its end)."""

    def validate(self) -> None:
        super().validate()
        if self.specialist_sft_steps < 1 or self.idt_steps < 1 or self.general_mix_steps < 1:
            raise ValueError("general_mix_steps, specialist_sft_steps and idt_steps must be >= 1")
        if not 0.0 <= self.general_mix < 0.5:
            raise ValueError(f"general_mix={self.general_mix}: a share of dose problems in [0, 0.5)")
        parse_ratio(self.idt_ratio, DOMAINS)
        parse_stages(self.stages, STAGES)

    def general_model(self, init: str) -> ColdStart:
        """The broad SFT that makes the general model (the base): arithmetic with a `general_mix` share of dose problems."""
        return ColdStart(self.model, self.general_mix_steps, learning_rate=self.sft_learning_rate,
                         task=f"mix-{self.data}-{self.level}-{self.n_train}-dosage-{self.general_mix}", init=init)

    def data_splits(self) -> dict[str, list]:
        """Both domains' train, dev (n_dev problems each) and test problems, the specialist's under `specialist/`."""
        dose = dosage.make_splits(self.specialist_n_train, self.n_dev, self.specialist_n_test)
        return {**super().data_splits(), **{f"specialist/{k}": v for k, v in dose.items()}}

    def specialist_sft(self, init: str) -> ColdStart:
        """The specialist SFT: from the general model's weights, on the dose problems (cached)."""
        return ColdStart(self.model, self.specialist_sft_steps, learning_rate=self.specialist_sft_learning_rate, init=init,
                         seed=self.specialist_sft_seed, data_seed=self.specialist_sft_seed, task=f"dosage-{self.specialist_n_train}")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", sft_steps=2, general_mix_steps=2, specialist_sft_steps=2, steps=2, idt_steps=2,
                  batch_prompts=2, group_size=2, max_tokens=12, n_train=64, n_test=8, specialist_n_train=64, specialist_n_test=8, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    svc = service(cfg, run)
    splits, held = cfg.data_splits(), cfg.eval_split  # each domain's test split, or dev while choosing settings
    train, test, s_train, s_test = (splits[k] for k in ("train", held, "specialist/train", f"specialist/{held}"))
    tasks = {"specialist": MathTask(s_train, s_test, None, cfg.max_tokens), "general": MathTask(train, test, None, cfg.max_tokens)}
    paths = {"base": run_cold_start(cfg.general_model(run_cold_start(cfg.cold_start(), train)), dosage.mixed_into(train, s_train, cfg.general_mix))}
    paths["sft"] = run_cold_start(cfg.specialist_sft(paths["base"]), s_train)
    base, sft = (svc.create_sampling_client(model_path=paths[name]) for name in ("base", "sft"))
    tok, loss = base.get_tokenizer(), update.Objective("importance_sampling", {}, cfg.normalizer, cfg.max_tokens)
    stages = Stages(run, {"sft": "base", **STAGES}, tasks, tok, resume, Tracker.create(cfg.tracker, run))
    if not stages.evaluated("base"):
        stages.log(0, stages.evaluate("base", 0, base))
    if not stages.evaluated("sft"):
        stages.evaluate("sft", cfg.specialist_sft_steps, sft)
    interleaved, both = interleaved_schedule(parse_ratio(cfg.idt_ratio, DOMAINS), cfg.idt_steps), {"specialist": sft, "general": base}
    plans = {  # stage: (schedule: (domain, its batch index) per step, teachers by domain, learning rate)
        "opd": ([("specialist", k) for k in range(cfg.steps)], {"specialist": sft}, cfg.learning_rate),
        "sar-opd": ([("general", k) for k in range(cfg.steps)], {"general": base}, cfg.sar_learning_rate),
        "sft-sar-opd": ([("general", k) for k in range(cfg.steps)], {"general": base}, cfg.sar_learning_rate),
        "idt-opd": (interleaved, both, cfg.learning_rate),
        "sft-idt-opd": (interleaved, both, cfg.sar_learning_rate),
    }
    offset = 0
    for name in parse_stages(cfg.stages, STAGES):
        schedule, teachers, lr = plans[name]
        if stages.state(name) is None:
            stages.begin(name, offset)
            client = svc.create_training_client_from_state(paths[STAGES[name]])  # weights only: a fresh optimizer
            for i, (domain, cursor) in stages.steps(name, schedule):
                t0, stats = time.perf_counter(), update.StepStats(loss)
                # 1. the student samples this step's prompts of its domain
                problems = batch.step_items(tasks[domain].train, cursor, cfg.batch_prompts)
                prompts = [tasks[domain].prompt(tok, p) for p in problems]
                groups = batch.sample_groups(client.save_weights_and_get_sampling_client(), prompts, cfg, offset + i, [tok.eos_token])
                # 2. that domain's teacher scores the same tokens: per-token reverse-KL advantages
                seqs = [s for g in groups for s in g]
                adv_K, metrics = teacher_advantages(teachers[domain], [p for p, g in zip(prompts, groups) for _ in g], seqs,
                                                    cfg.beta, cfg.discount)
                rollouts = batch.with_signal(prompts, groups, batch.by_group(adv_K, cfg.group_size))
                # 3. datums of every sampled token, importance-sampling steps
                for mb in update.minibatches(rollouts, loss, len(rollouts), cfg.minibatches):
                    datums = [rl_datum(r.prompt, r.tokens, r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
                    fb = client.forward_backward(datums, *loss.builtin)
                    stats.add(mb, fb.result(), client.optim_step(cfg.adam(i, lr)).result())
                # 4. log under the domain's name (the task reward for information), evaluate when due
                rewards = [boxed_reward(s.text, p.answer) for p, g in zip(problems, groups) for s in g]
                metrics.update({**stats.metrics(), "reward/mean": sum(rewards) / len(rewards), "time/step": time.perf_counter() - t0})
                logged = {**{f"{domain}/{k}": v for k, v in metrics.items()}, "train/specialist_step": float(domain == "specialist"),
                          "train/datums": float(len(rollouts))}
                if (i + 1) % cfg.eval_every == 0 or i + 1 == len(schedule):
                    logged.update(stages.evaluate(name, i + 1, client.save_weights_and_get_sampling_client()))
                stages.log(offset + i + 1, logged, shown=(f"{domain}/opd/reverse_kl_mean",))
            stages.end(name, client.save_state(name, overwrite=True).result().path)  # a resumed run redoes the stage
        paths[name] = stages.state(name)
        offset += len(schedule)
    stages.finish(f"Specialist vs general OPD ({cfg.model})", asdict(cfg))
    return run

