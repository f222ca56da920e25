"""Loss Functions: log probabilities, importance ratios and advantages made visible.

Part 1 draws each policy loss as a function of the ratio rho = pi_theta / pi_old for A > 0 and A < 0:
the objective, and the weight it puts on grad log pi (what the parameters receive), computed by the
library's own loss functions with autograd (`importance_sampling`, `ppo`, `cispo`, DAPO's
clip-higher = ppo with 1.28, GSPO's sequence ratio with its 3e-4 / 4e-4 clip).

Part 2 replays one real GRPO batch (a group per prompt sampled from the cold start, rewards and
group advantages) through every loss, before and after `replay_updates` importance-sampling updates
on that same batch: on-policy every ratio is 1 and the losses coincide; as the weights move away
from the ones that sampled, the per-token ratios spread, each loss clips its own tokens and the
gradient norms part. Logged per replay step: ratio spread, clip fractions and gradient norm per loss.

    arl run losses --preset mini [replay_updates=12]
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch

from .. import advantages, losses, report
from ..coldstart import encode_chat, run_cold_start
from ..config import require_positive
from ..data import format_prompt
from ..report.losses import plot_objectives, plot_ratio_histogram
from ..rewards import boxed_reward
from ..rl import batch
from ..rl.config import MathConfig, RunConfig, SamplingConfig
from ..rl.session import service
from ..rl.update import Rollout
from ..rollout import rl_datum
from ..track import RunDir, Tracker, progress
from ..types import AdamParams

VARIANTS = {  # name -> (built-in loss, loss_fn_config); gspo is handled as a sequence objective
    "importance_sampling": ("importance_sampling", {}),
    "ppo": ("ppo", {}),
    "dapo_clip_higher": ("ppo", {"clip_high_threshold": 1.28}),
    "cispo": ("cispo", {}),
    "gspo": (None, {}),
}


@dataclass
class Config(RunConfig, SamplingConfig, MathConfig):
    replay_updates: int = 12
    """Importance-sampling updates on the batch; it is replayed through every loss after each."""
    learning_rate: float = 1e-4
    """Learning rate of those updates."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "replay_updates")


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", batch_prompts=2, group_size=4, max_tokens=32, sft_steps=60,
                  sft_plain_fraction=0.0, n_train=64, n_test=8, replay_updates=2),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", data="gsm8k/train.jsonl", max_tokens=256, sft_steps=0,
                 learning_rate=4e-5),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the Loss Functions chapter does not resume: it replays one batch in seconds, start it again")
    svc = service(cfg, run)
    plot_objectives(run.plots_dir / "objective.png")  # part 1: the losses as functions of the ratio
    train, _ = cfg.load_task()
    client = (svc.create_training_client_from_state(run_cold_start(cfg.cold_start(), train)) if cfg.sft_steps
              else svc.create_full_training_client(cfg.model, seed=cfg.seed))
    tok = client.get_tokenizer()

    # part 2: one GRPO batch (sampler logprobs logq, rewards, group advantages) ...
    problems = batch.step_items(train, cfg.seed, cfg.batch_prompts)
    prompts = [encode_chat(tok, format_prompt(p)) for p in problems]
    groups = batch.sample_groups(client.save_weights_and_get_sampling_client(), prompts, cfg, 0, [tok.eos_token])
    rewards_BG = [[boxed_reward(s.text, p.answer) for s in g] for p, g in zip(problems, groups)]
    adv_BG, frac_degenerate = advantages.batch_advantages(rewards_BG)
    stand_in = frac_degenerate == 1.0
    if stand_in:  # nothing solved (an untrained model): rank-based stand-in advantages, said in the report
        adv_BG = [advantages.group_advantages([sum(s.logprobs) for s in g]) for g in groups]
    replayed = [Rollout(p, s.tokens, s.logprobs, a) for p, g, advs in zip(prompts, groups, adv_BG)
                for s, a in zip(g, advs) if a != 0]
    n_tokens = sum(len(r.tokens) for r in replayed)
    datums = [rl_datum(r.prompt, r.tokens, r.logprobs, r.advantage / n_tokens) for r in replayed]

    # ... replayed through every loss, then moved off-policy by importance-sampling updates on itself
    last, tracker = {}, Tracker.create(cfg.tracker, run)
    with progress(cfg.replay_updates + 1, "losses replay") as bar:
        for k in range(cfg.replay_updates + 1):
            logp_KT = _trainer_logprobs(client, datums, replayed)
            metrics, last = _replay(client, datums, replayed, logp_KT)
            metrics["replay/stand_in_advantages"] = float(stand_in)
            metrics["train/datums"] = float(len(datums)) if k < cfg.replay_updates else 0.0  # the update after this row
            run.log_metrics(k, metrics)
            tracker.log(k, metrics)
            if k < cfg.replay_updates:
                client.forward_backward(datums, "importance_sampling")
                client.optim_step(AdamParams(learning_rate=cfg.learning_rate, grad_clip_norm=1.0)).result()
            bar.update()
    tracker.close()
    logq_N = torch.tensor([x for r in replayed for x in r.logprobs])
    plot_ratio_histogram(run.plots_dir / "replay_ratio.png", torch.exp(torch.cat(logp_KT) - logq_N))
    run.write_eval("summary", {"batch": {"sequences": len(replayed), "tokens": n_tokens, "stand_in_advantages": stand_in},
                               "after_replay": last,
                               "config": asdict(cfg)})
    report.plot_metrics(run)
    what = "stand-in advantages (sequence logprob, centred): no group had a right answer" if stand_in else "GRPO advantages"
    report.write_report(run, f"Loss functions on one GRPO batch ({cfg.model}, {what})",
                        summary_rows=[{"loss": name, **{k: round(v, 4) for k, v in m.items()}} for name, m in last.items()],
                        rollouts_sample=_token_views(replayed, logp_KT, tok)[:4])
    return run


def _trainer_logprobs(client, datums, rollouts) -> list[torch.Tensor]:
    out = client.forward(datums, "importance_sampling").result()
    return [o["logprobs"].to_torch()[len(r.prompt) - 1:] for o, r in zip(out.loss_fn_outputs, rollouts)]


def _replay(client, datums, rollouts, logp_KT) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Per-loss clip fractions (from the pure loss functions on the trainer's logprobs) and gradient
    norms (from the engine: forward_backward, then a zero-learning-rate step that reports the norm; the
    weights stay, Adam's moments do take these gradients in)."""
    logq_KT = [torch.tensor(r.logprobs) for r in rollouts]
    adv_N = torch.cat([torch.full((len(r.tokens),), r.advantage) for r in rollouts])
    ratio_N = torch.exp(torch.cat(logp_KT) - torch.cat(logq_KT))
    metrics = {"replay/ratio_mean": float(ratio_N.mean()), "replay/ratio_max": float(ratio_N.max()),
               "replay/ratio_min": float(ratio_N.min()), "replay/logratio_std": float(torch.log(ratio_N).std())}
    per_loss = {}
    for name, (builtin, config) in VARIANTS.items():
        if builtin is None:
            _, m = losses.gspo(logp_KT, logq_KT, torch.tensor([r.advantage for r in rollouts]), len(rollouts))
            clip = m["gspo/token_clip_frac"]
            fb = client.forward_backward_custom(datums, _gspo_loss(rollouts))
        else:
            spec, full = losses.get_loss(builtin, config)
            terms = spec.fn(torch.cat(logp_KT), None, torch.cat(logq_KT), adv_N, **full)
            clip = float(terms.stats_N["clip_frac"].mean()) if "clip_frac" in terms.stats_N else 0.0
            fb = client.forward_backward(datums, builtin, config)
        fb.result()
        grad_norm = client.optim_step(AdamParams(learning_rate=0.0, grad_clip_norm=0.0)).result().metrics["optim/grad_norm"]
        per_loss[name] = {"clip_frac": clip, "grad_norm": grad_norm}
        metrics[f"clip_frac/{name}"] = clip
        metrics[f"grad_norm/{name}"] = grad_norm
    return metrics, per_loss


def _gspo_loss(rollouts):
    """GSPO on the datums' completions; advantages are the datums' (already / tokens), as the others."""
    def loss_fn(data, logprobs_list):
        logp_KT = [lp[len(r.prompt) - 1:] for lp, r in zip(logprobs_list, rollouts)]
        adv_K = torch.tensor([float(d.loss_fn_inputs["advantages"].to_torch()[-1]) for d in data])
        # x |y_i| so that a sequence's weight matches the token-level losses' sum over its tokens
        adv_K = adv_K * torch.tensor([float(len(r.tokens)) for r in rollouts])
        return losses.gspo(logp_KT, [torch.tensor(r.logprobs) for r in rollouts], adv_K, 1)
    return loss_fn


def _token_views(rollouts, logp_KT, tok) -> list[dict]:
    """Sequences as `token [ratio]` with the tokens PPO would clip marked, for the report."""
    rows = []
    for r, lp in zip(rollouts, logp_KT):
        ratios = torch.exp(lp - torch.tensor(r.logprobs)).tolist()
        marked = []
        for t, rho in zip(r.tokens, ratios):
            clipped = (rho > 1.2 and r.advantage > 0) or (rho < 0.8 and r.advantage < 0)
            marked.append(f"{tok.decode([t])!r}[{rho:.2f}{'*' if clipped else ''}]")
        rows.append({"prompt": tok.decode(r.prompt[-20:]), "completion": " ".join(marked),
                     "reward": "", "advantage": round(r.advantage, 3),
                     "seq_ratio": round(math.exp(float((lp - torch.tensor(r.logprobs)).mean())), 4)})
    return rows
