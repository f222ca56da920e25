"""What the policy-update chapters (GRPO, DAPO, GSPO) share: their config fields and the steps each of
them takes the same way (start or resume, draw prompts, sample groups, one update, save, finish).

A chapter's loop stays in its recipe and reads top to bottom; it calls these for the parts that are
not what the chapter is about. The update of a step is `policy_step`: the chapter's loss with its
normaliser (`advantages.sequence_scales`), an optional KL penalty against the start weights, split
into `minibatches` optimizer steps (only then is training off-policy and do clipping variants act).
"""

from __future__ import annotations

import json
import resource
from dataclasses import asdict, dataclass
from typing import Callable, Sequence

import torch

from . import advantages, checkpoints, losses, report
from .client import ServiceClient
from .coldstart import MathTask, encode_chat, run_cold_start
from .config import require_positive
from .data import format_prompt
from .eval import before_after, evaluate_boxed, summary_rows
from .rollout import score_completions, trajectory_datum
from .rollout.multiturn import summarize
from .settings import configure
from .track import Tracker
from .types import AdamParams, ModelInput, SamplingParams

KL_ESTIMATORS = ("k1", "k3")
UPDATE_KEYS = ("loss_fn", "clip_low_threshold", "clip_high_threshold", "normalizer", "kl_coef", "kl_estimator")
"""Config fields that only change the loss of a step: two configs that differ only in these make the
same update when the losses' gradients agree on on-policy data (see `same_update`)."""


@dataclass
class GroupSampling(MathTask):
    """Fields of every chapter that samples groups of answers to the math task's prompts."""

    batch_prompts: int = 8
    """Prompts per step."""
    group_size: int = 8
    """Samples per prompt; the group mean is each sample's baseline."""
    max_tokens: int = 40
    """Max new tokens per sample."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts."""
    seed: int = 0
    """Seed of the model, the sampling and the prompt order (the data split is fixed)."""
    threads: int = 0
    """torch threads (0 = the default, min(2, cores))."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "batch_prompts", "group_size", "max_tokens")


@dataclass
class PolicyConfig(GroupSampling):
    """Fields of every policy-update chapter; a chapter's `Config` extends it."""

    loss_fn: str = "importance_sampling"
    """Policy loss: importance_sampling, ppo or cispo."""
    clip_low_threshold: float | None = None
    """Lower ratio bound of ppo / cispo (None = the loss's default: 0.8 / 0)."""
    clip_high_threshold: float | None = None
    """Upper ratio bound of ppo / cispo (None = the loss's default: 1.2 / 4); DAPO's clip-higher is 1.28."""
    normalizer: str = "token_mean"
    """Loss reduction: token_mean (over trained tokens), seq_mean (mean of each rollout's token mean,
    over all rollouts) or constant (Dr. GRPO: / rollouts x max_tokens)."""
    adv_scale: str = "none"
    """Group advantage: none (r - mean, Dr. GRPO and the reference lab) or std ((r - mean) / std)."""
    kl_coef: float = 0.0
    """KL penalty against the start (cold-start) weights; 0 = off (no reference model is loaded)."""
    kl_estimator: str = "k3"
    """k3 (r - 1 - log r in the loss, as GRPO) or k1 (log-ratio subtracted from the advantage)."""
    minibatches: int = 1
    """Optimizer steps per rollout batch: 1 is on-policy; more makes later mini-batches off-policy."""
    steps: int = 150
    """Policy-update steps (rollout batches)."""
    learning_rate: float = 1e-4
    """AdamW learning rate of the RL phase."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up over the first N steps (a fresh Adam's first updates are full-size)."""
    grad_clip_norm: float = 1.0
    """Global gradient-norm clip (0 = off)."""
    lora_rank: int = 0
    """0 = full fine-tuning (the tiny models), else a LoRA rank."""
    eval_every: int = 25
    """Evaluate on the held-out set every N steps (and before and after)."""
    save_every: int = 10
    """Checkpoint every N steps (what --resume restarts from)."""
    tracker: str | None = None
    """Optional external tracker: tensorboard, swanlab or wandb."""

    def validate(self) -> None:
        super().validate()
        losses.get_loss(self.loss_fn, self.loss_config())
        if self.loss_fn not in ("importance_sampling", "ppo", "cispo"):
            raise ValueError(f"loss_fn={self.loss_fn!r}: use importance_sampling, ppo or cispo")
        if self.normalizer not in advantages.NORMALIZERS:
            raise ValueError(f"normalizer={self.normalizer!r}: use one of {', '.join(advantages.NORMALIZERS)}")
        if self.adv_scale not in advantages.SCALES:
            raise ValueError(f"adv_scale={self.adv_scale!r}: use one of {', '.join(advantages.SCALES)}")
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"kl_estimator={self.kl_estimator!r}: use k1 or k3")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef={self.kl_coef}: must be >= 0 (0 turns the penalty off)")
        require_positive(self, "steps", "eval_every", "save_every", "minibatches")
        if self.group_size < 2:
            raise ValueError(f"group_size={self.group_size}: a group baseline needs at least 2 samples per prompt")

    def learning_rate_at(self, step: int) -> float:
        """The learning rate of 0-based step `step`: linear warm-up over `warmup_steps`, then constant."""
        return self.learning_rate * min(1.0, (step + 1) / max(self.warmup_steps, 1))

    def loss_config(self) -> dict[str, float]:
        """`loss_fn_config` of the built-in loss: the clip bounds that are set."""
        bounds = {"clip_low_threshold": self.clip_low_threshold, "clip_high_threshold": self.clip_high_threshold}
        if self.loss_fn == "importance_sampling":
            set_ = [k for k, v in bounds.items() if v is not None]
            if set_:
                raise ValueError(f"{set_[0]}: importance_sampling has no clipping; use loss_fn=ppo or cispo")
            return {}
        return {k: v for k, v in bounds.items() if v is not None}

    def start_weights(self, train) -> str | None:
        """The saved state RL starts from: the cached SFT cold start on `train`, or None (the base
        model) without one. A chapter with its own demonstrations overrides this."""
        return run_cold_start(self.cold_start(), train) if self.sft_steps > 0 else None

    def sequence_loss(self) -> Callable | None:
        """A sequence-level objective `(logp_KT, logq_KT, adv_K, n_sequences) -> (loss, metrics)` that
        replaces the token-level built-in loss (GSPO), or None."""
        return None


@dataclass
class Rollout:
    """One sampled completion of a step that will be trained on."""

    prompt: list[int]
    tokens: list[int]
    logprobs: list[float]
    advantage: float | list[float]
    """One advantage for the whole completion, or one per token (on-policy distillation)."""
    mask: list[int] | None = None
    """Multi-turn: 1 where the policy sampled the token, 0 at observation and template tokens (which
    are context, never trained on); None = every completion token is the policy's."""

    def mask_T(self) -> list[int]:
        return self.mask if self.mask is not None else [1] * len(self.tokens)

    def trained_tokens(self) -> int:
        return sum(self.mask_T())


def draw(train: Sequence, index: int):
    """The `index`-th problem of the training stream: a fixed permutation of `train`, the same for every
    arm and seed of a comparison, so prompts differ between two runs only if they sample differently."""
    return train[index * 7919 % len(train)]


def step_problems(train: Sequence, step: int, batch_prompts: int) -> list:
    """The prompts of step `step` (0-based): the next `batch_prompts` problems of the `draw` stream."""
    return [draw(train, step * batch_prompts + i) for i in range(batch_prompts)]


def sample_groups(sampler, prompts: Sequence[list[int]], cfg: PolicyConfig, step: int, stop: list[str],
                  first: int = 0) -> list:
    """`group_size` samples of each prompt, all requests in flight at once; prompt i of the step (counted
    from `first`, for refills) gets its own seed, so a refill never repeats an earlier draw."""
    futures = [sampler.sample(ModelInput.from_ints(p), cfg.group_size,
                              SamplingParams(max_tokens=cfg.max_tokens, temperature=cfg.temperature,
                                             seed=cfg.seed * 1_000_003 + step * 1000 + first + i, stop=stop))
               for i, p in enumerate(prompts)]
    return [f.result().sequences for f in futures]


def start_client(cfg: PolicyConfig, run, service, train, resume: bool):
    """(first step, training client, reference sampler or None, start state path or None): the last
    checkpoint of a resumed run, else the cold start; the reference (for `kl_coef`) is always the start
    weights."""
    start_path = cfg.start_weights(train)
    ref = None
    if cfg.kl_coef > 0:
        ref = service.create_sampling_client(base_model=cfg.model, model_path=start_path)
    if resume:
        latest = run.checkpoints_dir / "latest.json"
        if latest.is_file():
            saved = json.loads(latest.read_text())
            run.truncate_after(saved["step"])  # steps logged after the checkpoint are redone identically
            return saved["step"], service.create_training_client_from_state_with_optimizer(saved["path"]), ref, start_path
        run.truncate_after(-1)
    if start_path is not None:
        client = service.create_training_client_from_state(start_path)  # a fresh optimizer for RL
    elif cfg.lora_rank:
        client = service.create_lora_training_client(cfg.model, rank=cfg.lora_rank, seed=cfg.seed)
    else:
        client = service.create_full_training_client(cfg.model, seed=cfg.seed)
    return 0, client, ref, start_path


@dataclass
class Session:
    """What a policy-update loop holds: the task, the client (and the reference sampler for the KL), the
    tokenizer's stop string, the held-out evaluation and the tracker."""

    train: list
    test: list
    start: int
    client: object
    ref: object
    start_path: str | None
    """The cold start's saved state (the weights step 0 began from), None without a cold start."""
    tokenizer: object
    stop: list[str]
    held_out: Callable[..., dict[str, float]]
    """held_out(step, sampler[, name]): the held-out evaluation, written as eval/step-NNNN.json (or NAME)."""
    tracker: object

    def prompt(self, problem) -> list[int]:
        return encode_chat(self.tokenizer, format_prompt(problem))


def open_session(cfg: PolicyConfig, run, resume: bool) -> Session:
    """Threads, task, client (cold start or resumed checkpoint) and the step-0 held-out evaluation."""
    if cfg.threads:
        configure(num_threads=cfg.threads)
    train, test = cfg.load_task()
    service = ServiceClient(run_name=run.name, checkpoint_dir=str(run.checkpoints_dir))
    start, client, ref, start_path = start_client(cfg, run, service, train, resume)
    tok = client.get_tokenizer()
    stop = [tok.eos_token]
    test_prompts = [encode_chat(tok, format_prompt(p)) for p in test]

    def held_out(step: int, sampler, name: str | None = None) -> dict[str, float]:
        return evaluate_boxed(run, step, sampler, test_prompts, [p.answer for p in test], cfg.max_tokens, stop, name)

    if start == 0:
        run.log_metrics(0, held_out(0, client.save_weights_and_get_sampling_client()))
    return Session(train, test, start, client, ref, start_path, tok, stop, held_out, Tracker.create(cfg.tracker, run))


def save(run, client, step: int) -> None:
    path = client.save_state(f"step-{step:04d}").result().path
    checkpoints.write_json(run.checkpoints_dir / "latest.json", {"step": step, "path": path})


def step_loss(cfg: PolicyConfig, logp_KT: list[torch.Tensor], logq_KT: list[torch.Tensor], adv_KT: list[torch.Tensor],
              n_rollouts: float, ref_KT: list[torch.Tensor] | None = None) -> tuple[torch.Tensor, dict[str, float]]:
    """The loss of one (mini-)batch of K completions, as the chapter defines it (completion tokens only):

        L = sum_i c_i sum_t l(logp_it, logq_it, A_it) [+ kl_coef sum_i c_i sum_t k3_it]

    with c_i from `cfg.normalizer` and l the built-in loss, or the chapter's `sequence_loss` in place
    of the first sum. A_it is the sequence's advantage (k1-shaped per token when that KL is on).
    `policy_step` trains on exactly this; `same_update` differentiates it.
    """
    lengths_K = [len(lp) for lp in logp_KT]
    scale_K = advantages.sequence_scales(lengths_K, cfg.normalizer, n_rollouts, cfg.max_tokens)
    sequence_loss = cfg.sequence_loss()
    if sequence_loss is not None:
        loss, metrics = sequence_loss(logp_KT, logq_KT, torch.stack([a[0] for a in adv_KT]), n_rollouts)
    else:
        spec, config = losses.get_loss(cfg.loss_fn, cfg.loss_config())
        adv_N = torch.cat([a * c for a, c in zip(adv_KT, scale_K)])
        terms = spec.fn(torch.cat(logp_KT), None, torch.cat(logq_KT), adv_N, **config)
        loss = terms.loss_N.sum()
        metrics = {f"ratio/{k}": float(v.mean()) for k, v in terms.stats_N.items()}
    if ref_KT is not None and cfg.kl_estimator == "k3":
        kl_K = [losses.kl_k3(lp, ref).sum() * c for lp, ref, c in zip(logp_KT, ref_KT, scale_K)]
        loss = loss + cfg.kl_coef * torch.stack(kl_K).sum()
    return loss, metrics


def policy_step(client, cfg: PolicyConfig, rollouts: Sequence[Rollout], n_rollouts: int, learning_rate: float,
                ref=None) -> dict[str, float]:
    """Train on `rollouts` (the completions with signal among `n_rollouts` sampled): `cfg.minibatches`
    forward-backward + optimizer steps. The built-in loss runs as is when it can (one forward and
    backward); a sequence loss or a k3 KL term goes through `forward_backward_custom`, whose gradient
    is exactly that of `step_loss`. Returns the step's metrics, means over its mini-batches."""
    chunks = [c for c in (list(rollouts[i::cfg.minibatches]) for i in range(cfg.minibatches)) if c]
    adam = AdamParams(learning_rate=learning_rate, grad_clip_norm=cfg.grad_clip_norm)
    sums: dict[str, float] = {}
    kl_sum, kl_tokens = 0.0, 0
    for m, chunk in enumerate(chunks):
        n_chunk = n_rollouts / cfg.minibatches
        ref_KT = _reference_logprobs(ref, chunk) if ref is not None else None
        adv_KT = [torch.tensor(_advantages_T(cfg, r, ref_KT[k] if ref_KT else None)) for k, r in enumerate(chunk)]
        custom = cfg.sequence_loss() is not None or (ref is not None and cfg.kl_estimator == "k3")
        if custom:
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a.tolist()) for r, a in zip(chunk, adv_KT)]
            fb = client.forward_backward_custom(datums, _custom_loss(cfg, chunk, adv_KT, n_chunk, ref_KT))
        else:
            scale_K = advantages.sequence_scales([r.trained_tokens() for r in chunk], cfg.normalizer, n_chunk, cfg.max_tokens)
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, (a * c).tolist())
                      for r, a, c in zip(chunk, adv_KT, scale_K)]
            fb = client.forward_backward(datums, cfg.loss_fn, cfg.loss_config())
        optim = client.optim_step(adam)
        out, opt = fb.result(), optim.result()
        metrics = {"loss/sum": out.metrics["loss:sum"], **opt.metrics}
        metrics.update({k: v for k, v in out.metrics.items() if k.startswith(("ratio/", "gspo/"))})
        for key, value in out.metrics.items():  # the built-in losses' token statistics
            if key.startswith(f"{cfg.loss_fn}/"):
                metrics["ratio/" + key.split("/", 1)[1].removesuffix("_mean")] = value
        for key, value in metrics.items():
            sums[key] = sums.get(key, 0.0) + value
        if m == 0:  # on-policy check: the sampler's logprobs against the trainer's, before any update
            gap = _logprob_gap(chunk, out)
        if ref_KT is not None:  # the sampled KL to the reference, log q - log ref, per token
            kl_sum += sum(float((torch.tensor(r.logprobs) - rf).sum()) for r, rf in zip(chunk, ref_KT))
            kl_tokens += sum(r.trained_tokens() for r in chunk)
    result = {k: v / len(chunks) for k, v in sums.items()}
    result.update({"train/logprob_gap": gap, "optim/step": opt.metrics["optim/step"]})
    if kl_tokens:
        result["kl/k1"] = kl_sum / kl_tokens
    return result


def _advantages_T(cfg: PolicyConfig, r: Rollout, ref_T: torch.Tensor | None) -> list[float]:
    adv_T = list(r.advantage) if isinstance(r.advantage, (list, tuple)) else [r.advantage] * len(r.tokens)
    if ref_T is not None and cfg.kl_estimator == "k1":
        penalty_T = advantages.kl_shaped_advantages(0.0, r.logprobs, ref_T.tolist(), cfg.kl_coef)
        adv_T = [a + p for a, p in zip(adv_T, penalty_T)]
    return adv_T


def _reference_logprobs(ref, rollouts: Sequence[Rollout]) -> list[torch.Tensor]:
    """The reference's logprobs of each rollout's policy tokens (zero at masked ones, which the
    sampled-KL sums and the losses below leave out)."""
    scored = score_completions(ref, [(r.prompt, r.tokens) for r in rollouts])
    return [torch.tensor([x if m else 0.0 for x, m in zip(xs, r.mask_T())]) for xs, r in zip(scored, rollouts)]


def _custom_loss(cfg: PolicyConfig, chunk: Sequence[Rollout], adv_KT, n_rollouts: float, ref_KT):
    keep_K = [torch.tensor(r.mask_T(), dtype=torch.bool) for r in chunk]

    def loss_fn(data, logprobs_list):
        # the loss sees the policy's tokens only: a multi-turn rollout's observations drop out here
        logp_KT = [lp[len(r.prompt) - 1:][k] for lp, r, k in zip(logprobs_list, chunk, keep_K)]
        logq_KT = [torch.tensor(r.logprobs)[k] for r, k in zip(chunk, keep_K)]
        refs = [rf[k] for rf, k in zip(ref_KT, keep_K)] if ref_KT is not None else None
        return step_loss(cfg, logp_KT, logq_KT, [a[k] for a, k in zip(adv_KT, keep_K)], n_rollouts, refs)
    return loss_fn


def _logprob_gap(chunk: Sequence[Rollout], out) -> float:
    gaps = [abs(a - b) for r, o in zip(chunk, out.loss_fn_outputs)
            for a, b, m in zip(o["logprobs"].tolist()[len(r.prompt) - 1:], r.logprobs, r.mask_T()) if m]
    return max(gaps) if gaps else 0.0


def same_update(cfg_a: PolicyConfig, cfg_b: PolicyConfig, n_probes: int = 3, extra_keys: Sequence[str] = ()) -> bool:
    """Whether two configs make mathematically the same parameter update at every step.

    True when every field outside `UPDATE_KEYS` (and a chapter's `extra_keys`) is equal, training is on-policy (one mini-batch, so the
    sampler's logprobs are the trainer's and every ratio is 1) and the two `step_loss` gradients with
    respect to the token logprobs agree on random on-policy batches (with mixed lengths, signs and
    zero-advantage rollouts). Then the parameter gradients, the optimizer steps and so the whole runs
    are the same: e.g. cispo and importance_sampling, or ppo with any clip range around 1.
    """
    if type(cfg_a) is not type(cfg_b):
        return False
    keys = (*UPDATE_KEYS, *extra_keys)
    rest_a, rest_b = ({k: v for k, v in asdict(c).items() if k not in keys} for c in (cfg_a, cfg_b))
    if rest_a != rest_b or cfg_a.minibatches != 1:
        return False
    for probe in range(n_probes):
        gen = torch.Generator().manual_seed(probe)
        lengths = [int(n) for n in torch.randint(1, cfg_a.max_tokens + 1, (6,), generator=gen)]
        logq_KT = [-torch.rand(n, generator=gen) * 3 for n in lengths]
        adv_K = [float(a) for a in torch.randn(6, generator=gen)]
        ref_KT = [q - torch.rand(len(q), generator=gen) for q in logq_KT]
        grads = []
        for cfg in (cfg_a, cfg_b):
            logp_KT = [q.clone().requires_grad_(True) for q in logq_KT]
            refs = ref_KT if cfg.kl_coef > 0 else None
            adv_KT = [torch.tensor(_advantages_T(cfg, Rollout([0], [0] * len(q), q.tolist(), a), r if refs else None))
                      for q, a, r in zip(logq_KT, adv_K, ref_KT)]
            loss, _ = step_loss(cfg, logp_KT, logq_KT, adv_KT, 8, refs)
            grads.append(torch.cat(torch.autograd.grad(loss, logp_KT, allow_unused=True)))
        if not torch.allclose(grads[0], grads[1], rtol=1e-5, atol=1e-9):
            return False
    return True


def group_metrics(rewards_BG, groups, kept: Sequence[Rollout], frac_degenerate: float, t_sample: float,
                  t_total: float) -> dict[str, float]:
    """The step metrics every group chapter logs: rewards, lengths, what was trained, timings."""
    flat = [r for rs in rewards_BG for r in rs]
    return {
        "reward/mean": sum(flat) / len(flat),
        "reward/frac_degenerate": frac_degenerate,
        "rollout/len_mean": sum(len(s.tokens) for seqs in groups for s in seqs) / len(flat),
        "train/datums": float(len(kept)),
        "train/tokens": float(sum(r.trained_tokens() for r in kept)),
        "time/sample": t_sample,
        "time/train": t_total - t_sample,
        "time/step": t_total,
    }


def episode_seed(cfg: GroupSampling, step: int) -> int:
    """The rollout seed of 0-based step `step` of an agent chapter (`rollout_groups` derives every
    turn's and branch's seed from it): distinct per step and per run seed."""
    return cfg.seed * 1_000_000_007 + step * 10_000_019


def episode_advantages(groups: Sequence[Sequence], adv_scale: str) -> float:
    """Set each episode's group-relative advantage, r - mean(group) (`adv_scale` "std": divided by the
    group's std), on the trajectory itself, where the rollout log reads it; a degenerate group's episodes
    get 0. Returns the share of degenerate groups."""
    adv_BG, frac_degenerate = advantages.batch_advantages([[t.reward for t in g] for g in groups], adv_scale)
    for g, adv_G in zip(groups, adv_BG):
        for t, a in zip(g, adv_G):
            t.advantage = a
    return frac_degenerate


def trained_episodes(groups: Sequence[Sequence]) -> list[Rollout]:
    """The episodes with signal (advantage not 0) as `Rollout`s of their whole stream, the mask marking
    the policy's tokens: observation and template tokens are context, never trained."""
    return [Rollout(t.prompt, t.tokens, t.logprobs, t.advantage, t.mask) for g in groups for t in g if t.advantage]


def episode_metrics(groups: Sequence[Sequence], kept: Sequence[Rollout], frac_degenerate: float, t_sample: float,
                    t_total: float, counters: Sequence[str] = (), stop_reasons: Sequence[str] = ()) -> dict[str, float]:
    """The step metrics of the agent chapters (groups of multi-turn `Trajectory`s): the rollout summary
    (`rollout/...`, `arl.rollout.multiturn.summarize` with the environment's `counters` and
    `stop_reasons`), rewards, what was trained and what was masked context, timings."""
    flat = [t for g in groups for t in g]
    return {**{f"rollout/{k}": v for k, v in summarize(flat, counters, stop_reasons).items()},
            "reward/mean": sum(t.reward for t in flat) / len(flat), "reward/frac_degenerate": frac_degenerate,
            "train/datums": float(len(kept)), "train/tokens": float(sum(r.trained_tokens() for r in kept)),
            "train/masked_tokens": float(sum(len(r.tokens) - r.trained_tokens() for r in kept)),
            "time/sample": t_sample, "time/train": t_total - t_sample, "time/step": t_total}


def end_step(cfg: PolicyConfig, run, session: Session, step: int, metrics: dict, rows: list[dict]) -> None:
    """After step `step` (1-based): held-out eval when due, metrics and rollouts logged, checkpoint when due."""
    if step % cfg.eval_every == 0 or step == cfg.steps:
        metrics.update(session.held_out(step, session.client.save_weights_and_get_sampling_client()))
    run.log_metrics(step, metrics)
    run.log_rollouts(step, rows)
    session.tracker.log(step, metrics)
    if step % cfg.save_every == 0 or step == cfg.steps:
        save(run, session.client, step)


def rollout_rows(problems, groups, rewards_BG, adv_BG) -> list[dict]:
    return [{"prompt": p.question, "answer": p.answer, "completion": s.text, "tokens": s.tokens, "logprobs": s.logprobs,
             "reward": r, "advantage": a, "stop_reason": s.stop_reason}
            for p, seqs, rs, advs in zip(problems, groups, rewards_BG, adv_BG) for s, r, a in zip(seqs, rs, advs)]


def finish_episodes(cfg: PolicyConfig, run, session: Session, title: str, keys: Sequence[str],
                    table_keys: Sequence[str] | None = None, prompt_key: str = "question") -> None:
    """A multi-turn chapter's end: the before/after summary of the held-out episodes' `keys` (`keys[0]`
    the headline; `eval/summary.json`, which marks the run finished), plots and the report, whose
    evaluation table shows `table_keys` (default `keys`) and whose sampled episodes open with the
    rollout row's `prompt_key`."""
    session.tracker.close()
    evals, summary = before_after(run, keys, main=keys[0])
    run.write_eval("summary", {**summary, "config": asdict(cfg)})
    report.plot_metrics(run)
    report.write_report(
        run, title,
        summary_rows=[{"metric": k, "before": summary[f"{k}/before"], "after": summary[f"{k}/after"]} for k in keys],
        eval_table=[{"step": int(n.split("-")[1]), **{k: e.get(k) for k in table_keys or keys}}
                    for n, e in sorted(evals.items())],
        rollouts_sample=[{"step": r["step"], "prompt": r[prompt_key], "completion": "\n---\n".join(t["text"] for t in r["turns"]),
                          "reward": r["reward"], "advantage": r["advantage"], "stop_reason": r["stop_reason"]}
                         for r in run.read_rollouts(cfg.steps)[:6]],
    )


def finish(cfg: PolicyConfig, run, session: Session, title: str) -> None:
    """Before/after summary (`eval/summary.json`, which marks the run finished), plots and the report."""
    session.tracker.close()
    keys = ("accuracy", "format_rate", "accuracy_given_format", "accuracy_any_format")
    evals, summary = before_after(run, keys)
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    run.write_eval("summary", {**summary, "peak_rss_mb": peak_mb, "config": asdict(cfg)})
    report.plot_metrics(run)
    report.write_report(
        run, title,
        summary_rows=summary_rows(summary, keys) + [{"metric": "peak memory (MB)", "before": "", "after": round(peak_mb)}],
        eval_table=[{"step": int(n.split("-")[1]), "accuracy": e["accuracy"], "format": e.get("format_rate"),
                     "truncated": e["truncated"]} for n, e in sorted(evals.items())],
        rollouts_sample=run.read_rollouts(cfg.steps)[:6],
    )
