"""Specialist vs general: fit a specialist ability and keep the general one, by on-policy distillation.

The reference lab's medical chapter in mini form. The general model (the base) is the OPD chapter's
teacher (a 5M model trained to box arithmetic answers) after a short broad SFT in which a tenth of the
problems are dose problems (`general_mix`). The specialist domain is medication-dose
problems (`arl.data.dosage`: doses per kg, split doses, tablets, drips, stock), which need
multiplication and division (the arithmetic task has only + and -). Stages, each scored on both domains'
held-out tests:

1. base: the general model.
2. SFT: the base fine-tuned on the specialist domain's worked solutions. Specialist up; general down.
3. OPD: the base as student, the SFT model as teacher, specialist prompts (`distill.teacher_advantages`).
4. SAR-OPD: from OPD's end, OPD on general prompts with the base model as teacher (staged: first the
   specialist, then restore the general ability from the model that had it).
5. SFT-SAR-OPD: the same general stage from the SFT model (the specialist gain of SFT, then restore).
6. IDT-OPD: from the base, interleaved steps: specialist prompts with the SFT teacher and general
   prompts with the base teacher, `idt_ratio` steps of each per cycle, each domain with its own data
   cursor (`distill.interleaved_schedule`), one optimizer.
7. SFT-IDT-OPD: the same interleaved steps from the SFT model: the general steps restore the general
   domain while the specialist steps hold the student to the SFT teacher on dose prompts.

    arl run opd-specialist --preset mini [seed=1] [idt_ratio=2:1] [stages=sft-sar-opd,sft-idt-opd]

Outputs: `eval/stages.json` (both domains' accuracy at every stage and checkpoint), the trade-off plot
`plots/tradeoff.png`, per-step metrics namespaced by domain (`specialist/opd/reverse_kl_mean`). A resumed
run keeps its finished stages and restarts an unfinished one from that stage's start.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass

from .. import checkpoints, policy, report
from ..client import ServiceClient
from ..coldstart import ColdStart, encode_chat, run_cold_start
from ..data import dosage, format_prompt
from ..distill import DistillConfig, interleaved_schedule, parse_ratio, teacher_advantages
from ..eval import evaluate_boxed
from ..policy import Rollout
from ..report.stages import plot_tradeoff, stage_rows
from ..rewards import boxed_reward
from ..settings import configure
from ..track import RunDir, progress

DOMAINS = ("specialist", "general")
STARTS = {"sft": "base", "opd": "base", "sar-opd": "opd", "sft-sar-opd": "sft", "idt-opd": "base", "sft-idt-opd": "sft"}
"""The stage whose final weights each stage starts from."""
STAGES = ("opd", "sar-opd", "sft-sar-opd", "idt-opd", "sft-idt-opd")
"""The OPD stages, in the order a run trains them (base and SFT are the cached models they start from)."""


@dataclass
class Config(DistillConfig):
    model: str = "arl/tiny-qwen3-5m"
    """The general model's base (its cold start below is the OPD chapter's teacher, cached)."""
    sft_steps: int = 1200
    """SFT steps that make the general model from `model` on the general (arithmetic) task."""
    sft_learning_rate: float = 2e-3
    """The general model's SFT learning rate."""
    sft_plain_fraction: float = 0.0
    """Share of the general model's SFT targets without \\boxed{} (0: it follows the format)."""
    general_mix: float = 0.1
    """Share of dose problems in the general model's broad SFT: a general model has seen a little of
    every domain (without any, the student never samples a `*` on a dose problem and OPD has no
    token of the teacher's to push up)."""
    general_mix_steps: int = 200
    """Steps of that broad SFT (arithmetic plus the dose share), from the arithmetic model."""
    specialist_sft_steps: int = 200
    """SFT steps of the specialist model (from the general model, on the dose problems)."""
    specialist_sft_seed: int = 0
    """Seed of the specialist SFT's data order: one specialist teacher, trained once and cached, for
    every seed of the OPD stages (as the reference lab has one SFT model)."""
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
    """Learning rate of the stages that restore the general domain: SAR-OPD's general stage,
    SFT-SAR-OPD and SFT-IDT-OPD (the reference lab uses 5e-6 after 4e-5 on a 4B LoRA; here the SFT
    model's general answers have far to come back)."""
    idt_ratio: str = "1:1"
    """IDT-OPD's schedule: specialist:general steps per cycle."""
    idt_steps: int = 100
    """Steps in all (both domains) of IDT-OPD and of SFT-IDT-OPD."""
    stages: str = ",".join(STAGES)
    """The OPD stages to train, comma-separated, in the order given; a stage that starts from another
    OPD stage (sar-opd from opd) needs it in the list before it."""
    eval_every: int = 25
    """Evaluate both domains every N steps of a stage (and at its end)."""

    def validate(self) -> None:
        super().validate()
        if self.kl_coef:
            raise ValueError("kl_coef: the specialist chapter has no reference KL; its teachers are the signal")
        if self.specialist_sft_steps < 1 or self.idt_steps < 1 or self.general_mix_steps < 1:
            raise ValueError("general_mix_steps, specialist_sft_steps and idt_steps must be >= 1")
        if not 0.0 <= self.general_mix < 0.5:
            raise ValueError(f"general_mix={self.general_mix}: a share of dose problems in [0, 0.5)")
        parse_ratio(self.idt_ratio, DOMAINS)
        self.stage_list()

    def stage_list(self) -> list[str]:
        """`stages` as a list, checked: known names, no repeats, each stage's start trained before it."""
        names = [n.strip() for n in self.stages.split(",") if n.strip()]
        for i, name in enumerate(names):
            if name not in STAGES:
                raise ValueError(f"stages: unknown stage {name!r}; choose from {', '.join(STAGES)}")
            if name in names[:i]:
                raise ValueError(f"stages: {name!r} is listed twice")
            start = STARTS[name]
            if start in STAGES and start not in names[:i]:
                raise ValueError(f"stages: {name!r} starts from {start!r}; list {start!r} before it")
        if not names:
            raise ValueError(f"stages: name at least one of {', '.join(STAGES)}")
        return names

    def general_model(self, init: str) -> ColdStart:
        """The broad SFT that makes the general model (the base): arithmetic with a `general_mix` share of dose problems."""
        return ColdStart(self.model, self.general_mix_steps, learning_rate=self.sft_learning_rate,
                         task=f"mix-{self.data}-{self.level}-{self.n_train}-dosage-{self.general_mix}", init=init)

    def specialist_sft(self, init: str) -> ColdStart:
        """The specialist SFT: from the general model's weights, on the dose problems (cached)."""
        return ColdStart(self.model, self.specialist_sft_steps, learning_rate=self.specialist_sft_learning_rate,
                         seed=self.specialist_sft_seed, data_seed=self.specialist_sft_seed,
                         task=f"dosage-{self.specialist_n_train}", init=init)


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", sft_steps=2, general_mix_steps=2, specialist_sft_steps=2, steps=2, idt_steps=2,
                  batch_prompts=2, group_size=2, max_tokens=12, n_train=64, n_test=8, specialist_n_train=64,
                  specialist_n_test=8, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if cfg.threads:
        configure(num_threads=cfg.threads)
    train, test = cfg.load_task()
    s_train, s_test = dosage.make_split(0, cfg.specialist_n_train, cfg.specialist_n_test)
    data = {"specialist": (s_train, s_test), "general": (train, test)}
    service = ServiceClient(run_name=run.name, checkpoint_dir=str(run.checkpoints_dir))
    base_path = run_cold_start(cfg.general_model(run_cold_start(cfg.cold_start(), train)), _mix(train, s_train, cfg.general_mix))
    sft_path = run_cold_start(cfg.specialist_sft(base_path), s_train)
    base = service.create_sampling_client(model_path=base_path)
    sft = service.create_sampling_client(model_path=sft_path)
    tok = base.get_tokenizer()
    stop = [tok.eos_token]
    prompts = {d: [encode_chat(tok, format_prompt(p)) for p in data[d][1]] for d in DOMAINS}
    done = _load_stages(run) if resume else {"rows": [], "states": {}, "starts": STARTS}

    def held_out(stage: str, step: int, sampler) -> dict[str, float]:
        """Both domains' held-out accuracy (eval/STAGE-DOMAIN-NNNN.json), recorded in eval/stages.json."""
        row = {"stage": stage, "step": step}
        for d in DOMAINS:
            out = evaluate_boxed(run, step, sampler, prompts[d], [p.answer for p in data[d][1]], cfg.max_tokens, stop,
                                 f"{stage}-{d}-{step:04d}")
            row[d] = out["eval/accuracy"]
        done["rows"].append(row)
        checkpoints.write_json(run.eval_dir / "stages.json", done)
        return {f"eval/{d}/accuracy": row[d] for d in DOMAINS}

    def stage(name: str, offset: int, start: str, schedule: list[tuple[str, int]], teachers: dict, lr: float) -> str:
        """OPD steps from the state `start` along `schedule` ((domain, its batch index) per step);
        logged at global steps offset+1...; returns the final state's path."""
        if name in done["states"]:
            return done["states"][name]
        done["rows"] = [r for r in done["rows"] if r["stage"] != name]
        run.truncate_after(offset)
        client = service.create_training_client_from_state(start)  # weights only: a fresh optimizer
        with progress(len(schedule), name) as bar:
            for i, (domain, cursor) in enumerate(schedule):
                t0 = time.perf_counter()
                # 1. the student samples this step's prompts of its domain
                problems = policy.step_problems(data[domain][0], cursor, cfg.batch_prompts)
                student_prompts = [encode_chat(tok, format_prompt(p)) for p in problems]
                groups = policy.sample_groups(client.save_weights_and_get_sampling_client(), student_prompts, cfg,
                                              offset + i, stop)
                # 2. that domain's teacher scores the same tokens: per-token reverse-KL advantages
                flat = [(p, s) for p, seqs in zip(student_prompts, groups) for s in seqs]
                adv_K, metrics = teacher_advantages(teachers[domain], [p for p, _ in flat], [s for _, s in flat],
                                                    cfg.beta, cfg.discount)
                # 3. one importance-sampling step on every sampled token
                rollouts = [Rollout(p, s.tokens, s.logprobs, a) for (p, s), a in zip(flat, adv_K)]
                metrics.update(policy.policy_step(client, cfg, rollouts, len(rollouts), lr))
                # 4. log under the domain's name (the task reward for information), evaluate when due
                rewards = [boxed_reward(s.text, p.answer) for p, seqs in zip(problems, groups) for s in seqs]
                metrics["reward/mean"] = sum(rewards) / len(rewards)
                metrics["time/step"] = time.perf_counter() - t0
                logged = {f"{domain}/{k}": v for k, v in metrics.items()}
                logged["train/specialist_step"] = float(domain == "specialist")
                logged["train/datums"] = float(len(rollouts))
                if (i + 1) % cfg.eval_every == 0 or i + 1 == len(schedule):
                    logged.update(held_out(name, i + 1, client.save_weights_and_get_sampling_client()))
                run.log_metrics(offset + i + 1, logged)
                bar.update()
                bar.set_metrics({"domain": domain, "kl": metrics["opd/reverse_kl_mean"]})
        path = client.save_state(name).result().path
        done["states"][name] = path
        checkpoints.write_json(run.eval_dir / "stages.json", done)
        return path

    if not done["rows"]:
        run.log_metrics(0, held_out("base", 0, base))
    if not any(r["stage"] == "sft" for r in done["rows"]):
        held_out("sft", cfg.specialist_sft_steps, sft)
    specialist_only = [("specialist", k) for k in range(cfg.steps)]
    general_only = [("general", k) for k in range(cfg.steps)]
    interleaved = interleaved_schedule(parse_ratio(cfg.idt_ratio, DOMAINS), cfg.idt_steps)
    both = {"specialist": sft, "general": base}
    plans = {  # stage: (schedule, teachers by domain, learning rate)
        "opd": (specialist_only, {"specialist": sft}, cfg.learning_rate),
        "sar-opd": (general_only, {"general": base}, cfg.sar_learning_rate),
        "sft-sar-opd": (general_only, {"general": base}, cfg.sar_learning_rate),
        "idt-opd": (interleaved, both, cfg.learning_rate),
        "sft-idt-opd": (interleaved, both, cfg.sar_learning_rate),
    }
    paths, offset = {"base": base_path, "sft": sft_path}, 0
    for name in cfg.stage_list():
        schedule, teachers, lr = plans[name]
        paths[name] = stage(name, offset, paths[STARTS[name]], schedule, teachers, lr)
        offset += len(schedule)
    _finish(cfg, run, done)
    return run


def _mix(train: list, s_train: list, share: float) -> list:
    """`train` plus enough of `s_train` that the dose problems are `share` of the whole."""
    return train + s_train[:round(len(train) * share / (1.0 - share))]


def _load_stages(run: RunDir) -> dict:
    file = run.eval_dir / "stages.json"
    return json.loads(file.read_text()) if file.is_file() else {"rows": [], "states": {}, "starts": STARTS}


def _finish(cfg: Config, run: RunDir, done: dict) -> None:
    """Summary (both domains at each stage's end), the trade-off plot and the report."""
    ends = stage_rows([done["rows"]], DOMAINS, final_only=True)
    summary = {f"{r['stage']}/{d}": r[d][0] for r in ends for d in DOMAINS}
    run.write_eval("summary", {**summary, "config": asdict(cfg)})
    report.plot_metrics(run)
    plot_tradeoff(run.plots_dir / "tradeoff.png", [done["rows"]], DOMAINS, STARTS)
    report.write_report(run, f"Specialist vs general OPD ({cfg.model})",
                        summary_rows=[{"stage": r["stage"], **{d: r[d][0] for d in DOMAINS}} for r in ends],
                        eval_table=done["rows"], rollouts_sample=[])
