"""The RL chapters' config fields, in groups that a chapter's `Config` composes flat:

    @dataclass
    class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, SamplingConfig, MathConfig):
        ...the chapter's own fields (and `@defaults(...)` for the group fields whose defaults it changes)

A chapter lists the groups whose fields it reads, so `arl run CHAPTER --help` shows exactly those
(tests/test_recipes.py checks it against what a run reads). The fields appear in `--help` from the last
group named to the first. Each group's `validate` checks its own fields and calls the next one's, so
the chapter's `validate` runs them all.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from .. import advantages, losses
from ..coldstart import ColdStart, demonstration_examples, run_cold_start
from ..config import check_eval_split, require_positive
from ..data import Problem, load_math_task
from ..rollout import Budgets
from ..rollout.seeds import RUN_BITS, STEP_BITS
from ..types import AdamParams
from .task import MathTask
from .update import KL_ESTIMATORS, Objective

GSM8K_CACHED = "gsm8k/train.jsonl"
"""The full presets' `data`: this file when it exists, else GSM8K from the `datasets` cache."""


def defaults(**values):
    """A class decorator: a chapter's own defaults for fields of its groups (the values its `mini` preset
    runs with), each field keeping its doc and its place in `--help`:

        @defaults(group_size=4, max_turns=3)
        @dataclass
        class Config(SamplingConfig, AgentConfig): ...

    It returns a dataclass subclass that declares those fields again with the new defaults."""
    def apply(cls):
        fields = {f.name: f for f in dataclasses.fields(cls)}
        unknown = sorted(set(values) - set(fields))
        if unknown:
            raise TypeError(f"{cls.__qualname__}: @defaults for fields it does not have: {', '.join(unknown)}")
        namespace = {"__annotations__": {k: fields[k].type for k in values}, **values, "__doc__": cls.__doc__,
                     "__module__": cls.__module__, "__qualname__": cls.__qualname__}
        return dataclass(type(cls.__name__, (cls,), namespace))
    return apply


def check_math_data(data: str, level: str) -> None:
    """`data` and `level` of a math task name something that exists (before any run folder is made)."""
    from ..data.arithmetic import LEVELS

    if data == "arithmetic":
        if level not in LEVELS:
            raise ValueError(f"level={level!r}: choose one of {', '.join(sorted(LEVELS))}")
        return
    if data == GSM8K_CACHED or Path(data).is_file() and Path(data.replace("train", "test")).is_file():
        return
    raise ValueError(f"data={data!r}: no such train jsonl with its test file beside it; use arithmetic (the generated "
                     f"task), a GSM8K-format train.jsonl with test.jsonl beside it, or {GSM8K_CACHED} (GSM8K from the "
                     f"datasets cache)")


class Group:
    """The end of the chain of `validate` calls."""

    def validate(self) -> None:
        pass


@dataclass
class RunConfig(Group):
    seed: int = 0
    """Seed of the sampling (and of a LoRA's initial weights); the prompt order and the data split are the same
    for every seed, so two seeds differ only in what they sample."""
    threads: int = 0
    """torch threads (0 = the default, min(2, cores))."""
    backend: str = "local"
    """Where training and sampling run: local (this machine's engine) or tinker (any Tinker-compatible service,
    through the tinker SDK: LoRA from the base model, no cold start; the API key comes from TINKER_API_KEY)."""
    base_url: str | None = None
    """The service of backend=tinker (None: TINKER_BASE_URL, else Tinker's own), e.g. http://127.0.0.1:8000 for `arl serve`."""
    tracker: str | None = None
    """Mirror the metrics to a dashboard: tensorboard, mlflow, wandb or swanlab (None: metrics.jsonl only)."""

    def validate(self) -> None:
        super().validate()
        if not 0 <= self.seed < 2 ** RUN_BITS:
            raise ValueError(f"seed={self.seed}: use 0 to {2 ** RUN_BITS - 1} (a sampling seed holds the run seed in "
                             f"{RUN_BITS} bits, arl.rollout.seeds)")


@dataclass
class SessionConfig(Group):
    """What `open_session` and a step's end read: how long, how often to evaluate and save, the start."""

    steps: int = 150
    """Policy-update steps (rollout batches)."""
    eval_every: int = 25
    """Evaluate on the held-out set every N steps (and before and after)."""
    save_every: int = 10
    """Checkpoint every N steps (what --resume restarts from)."""
    lora_rank: int = 0
    """0 = full fine-tuning (the tiny models), else a LoRA rank (of a run that starts from the base model)."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "steps", "eval_every", "save_every")
        if self.steps > 2 ** STEP_BITS:
            raise ValueError(f"steps={self.steps}: at most {2 ** STEP_BITS} (a sampling seed holds the step in {STEP_BITS} "
                             "bits, arl.rollout.seeds)")


@dataclass
class OptimConfig(Group):
    learning_rate: float = 1e-4
    """AdamW learning rate of the RL phase."""
    warmup_steps: int = 0
    """Linear learning-rate warm-up over the first N steps (a fresh Adam's first updates are full-size)."""
    grad_clip_norm: float = 1.0
    """Global gradient-norm clip (0 = off)."""
    minibatches: int = 1
    """Optimizer steps per rollout batch: 1 is on-policy; more makes later mini-batches off-policy."""
    normalizer: str = "token_mean"
    """Loss reduction: token_mean (over trained tokens), seq_mean (mean of each rollout's token mean,
    over all rollouts) or constant (Dr. GRPO: / rollouts x max_tokens)."""

    def validate(self) -> None:
        super().validate()
        if self.normalizer not in advantages.NORMALIZERS:
            raise ValueError(f"normalizer={self.normalizer!r}: use one of {', '.join(advantages.NORMALIZERS)}")
        require_positive(self, "minibatches")

    def adam(self, step: int, learning_rate: float | None = None) -> AdamParams:
        """The optimizer step of 0-based step `step`: `learning_rate` (default the config's) with a linear
        warm-up over `warmup_steps`, then constant."""
        lr = self.learning_rate if learning_rate is None else learning_rate
        return AdamParams(learning_rate=lr * min(1.0, (step + 1) / max(self.warmup_steps, 1)),
                          grad_clip_norm=self.grad_clip_norm)


@dataclass
class LossConfig(Group):
    loss_fn: str = "importance_sampling"
    """Policy loss: importance_sampling, ppo or cispo."""
    clip_low_threshold: float | None = None
    """Lower ratio bound of ppo / cispo (None = the loss's default: 0.8 / 0)."""
    clip_high_threshold: float | None = None
    """Upper ratio bound of ppo / cispo (None = the loss's default: 1.2 / 4); DAPO's clip-higher is 1.28."""
    adv_scale: str = "none"
    """Group advantage: none (r - mean, Dr. GRPO and the reference lab) or std ((r - mean) / std)."""

    def validate(self) -> None:
        super().validate()
        losses.get_loss(self.loss_fn, self.loss_config())
        if self.loss_fn not in ("importance_sampling", "ppo", "cispo"):
            raise ValueError(f"loss_fn={self.loss_fn!r}: use importance_sampling, ppo or cispo")
        if self.adv_scale not in advantages.SCALES:
            raise ValueError(f"adv_scale={self.adv_scale!r}: use one of {', '.join(advantages.SCALES)}")
        if self.group_size < 2:
            raise ValueError(f"group_size={self.group_size}: a group baseline needs at least 2 samples per prompt")

    def loss_config(self) -> dict[str, float]:
        """`loss_fn_config` of the built-in loss: the clip bounds that are set."""
        bounds = {"clip_low_threshold": self.clip_low_threshold, "clip_high_threshold": self.clip_high_threshold}
        if self.loss_fn == "importance_sampling":
            given = [k for k, v in bounds.items() if v is not None]
            if given:
                raise ValueError(f"{given[0]}: importance_sampling has no clipping; use loss_fn=ppo or cispo")
            return {}
        return {k: v for k, v in bounds.items() if v is not None}


@dataclass
class KLConfig(Group):
    kl_coef: float = 0.0
    """KL penalty against the start (cold-start) weights; 0 = off (no reference model is loaded)."""
    kl_estimator: str = "k3"
    """k3 (r - 1 - log r in the loss, as GRPO) or k1 (log-ratio subtracted from the advantage)."""

    def validate(self) -> None:
        super().validate()
        if self.kl_estimator not in KL_ESTIMATORS:
            raise ValueError(f"kl_estimator={self.kl_estimator!r}: use k1 or k3")
        if self.kl_coef < 0:
            raise ValueError(f"kl_coef={self.kl_coef}: must be >= 0 (0 turns the penalty off)")


@dataclass
class SamplingConfig(Group):
    batch_prompts: int = 8
    """Prompts per step."""
    group_size: int = 8
    """Samples per prompt; the group mean is each sample's baseline."""
    max_tokens: int = 40
    """Max new tokens per sample."""
    temperature: float = 1.0
    """Sampling temperature for training rollouts."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "batch_prompts", "group_size", "max_tokens")


@dataclass
class DistillConfig(Group):
    """The distillation chapters' signal: the reverse-KL advantage's scale and discount."""

    group_size: int = 4
    """Student samples per prompt (the teacher's signal needs no group baseline: more samples are more data)."""
    beta: float = 1.0
    """Scale of the reverse-KL advantage (the reference lab's kl_penalty_coef)."""
    discount: float = 0.0
    """Credit each token with the discounted KL of the tokens after it (0 = only its own)."""

    def validate(self) -> None:
        super().validate()
        if not 0.0 <= self.discount < 1.0:
            raise ValueError(f"discount={self.discount}: must be in [0, 1)")


@dataclass
class MathConfig(Group):
    """The math task, its held-out split and the SFT cold start RL starts from: chapters and their
    controls (GRPO and its continued-SFT control) read the same data and start from the same cached weights."""

    model: str = "arl/tiny-qwen3-2m"
    """Base model (`arl models`)."""
    sft_steps: int = 600
    """Cold-start SFT steps before RL (cached across runs with the same settings)."""
    sft_learning_rate: float = 3e-3
    """Cold-start learning rate."""
    start_seed: int = 0
    """Seed of the cold start's batch order and draws: 0 is the one cached start every run shares (results
    are conditional on it); `arl compare --start-per-seed` sets it to each run's seed, so that every seed
    trains its own start and the intervals cover the start's variance too."""
    sft_plain_fraction: float = 0.7
    """Share of cold-start targets that state the final answer without the \\boxed{} the prompt asks for
    (as scraped data often does): the cold start learns the task, but follows the format only sometimes."""
    data: str = "arithmetic"
    """arithmetic (generated mini task), or a GSM8K train jsonl (else GSM8K from the `datasets` cache)."""
    level: str = "small"
    """Difficulty of the generated task: small (1-2 steps, small numbers), chain (2-3 steps on numbers
    below 10) or standard (2-4 steps, five kinds of problem)."""
    n_train: int = 2000
    """Generated training problems."""
    n_test: int = 200
    """Held-out test problems: the reported results."""
    n_dev: int = 200
    """Development problems, where presets, cold starts and reward shaping are chosen (eval_split=dev):
    generated beside train and test (neither changes), or GSM8K's last training problems held back."""
    eval_split: str = "test"
    """Which held-out problems the evaluations use: test (reported results) or dev (choosing settings)."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "n_train", "n_test")
        check_eval_split(self)
        if not 0.0 <= self.sft_plain_fraction <= 1.0:
            raise ValueError(f"sft_plain_fraction={self.sft_plain_fraction}: must be between 0 and 1")
        check_math_data(self.data, self.level)

    def data_splits(self) -> dict[str, list[Problem]]:
        """Every split's problems: train, dev and test (disjoint by question)."""
        return dict(zip(("train", "dev", "test"), load_math_task(self.data, self.level, self.n_train, self.n_test,
                                                                 self.n_dev)))

    def load_task(self):
        """(train, the evaluated split: test, or dev with eval_split=dev) problems."""
        splits = self.data_splits()
        return splits["train"], splits[self.eval_split]

    def cold_start(self) -> ColdStart:
        # GSM8K's training problems depend on n_dev (held back from them); the generated ones do not
        held_back = "" if self.data == "arithmetic" else f"-dev{self.n_dev}"
        return ColdStart(self.model, self.sft_steps, learning_rate=self.sft_learning_rate, seed=self.start_seed,
                         data_seed=self.start_seed, plain_fraction=self.sft_plain_fraction,
                         task=f"{self.data}-{self.level}-{self.n_train}{held_back}")

    def math_task(self, cold_start: ColdStart | None = None) -> MathTask:
        """The task, evaluated with this config's max_tokens; RL starts from `cold_start` (default: this
        config's SFT cold start, none when sft_steps = 0)."""
        train, test = self.load_task()
        start = cold_start or (self.cold_start() if self.sft_steps > 0 else None)
        return MathTask(train, test, start, self.max_tokens)


@dataclass
class AgentConfig(Group):
    """An agent chapter's base model, rollout budgets and cold start on demonstrations."""

    model: str = "arl/tiny-qwen3-2m"
    """Base model (`arl models`)."""
    max_tokens: int = 48
    """Sampled tokens per assistant turn."""
    max_turns: int = 4
    """Assistant turns per episode."""
    max_tool_calls: int | None = None
    """Tool calls per episode (None: one per turn)."""
    max_trajectory_tokens: int = 768
    """Prompt, turns and observations of one episode."""
    max_observation_tokens: int = 64
    """Tokens of one observation (a tool's result); longer ones are cut and marked."""
    tool_schemas: bool = False
    """Put the tools' JSON schemas in the prompt through the chat template's tools= (Qwen's preamble: 240
    tokens for one tool). Off, the one-line system prompt names the tool and the cold start teaches the
    call format: half the tokens of every step on a CPU (the mini presets)."""
    sft_steps: int = 500
    """Cold-start SFT steps on demonstrations (cached across runs with the same settings); 0 = none."""
    sft_batch_size: int = 16
    """Demonstrations per cold-start step."""
    start_seed: int = 0
    """Seed of the cold start's batch order and draws (each stage's, and TEMPO's critic's): 0 is the one cached
    start every run shares (results are conditional on it); `arl compare --start-per-seed` sets it to each run's
    seed, so that every seed trains its own start and the intervals cover the start's variance too."""
    sft_learning_rate: float = 3e-3
    """Cold-start learning rate."""

    def validate(self) -> None:
        super().validate()
        self.budgets().validate()

    def budgets(self) -> Budgets:
        calls = self.max_turns if self.max_tool_calls is None else self.max_tool_calls
        return Budgets(self.max_turns, calls, self.max_tokens, self.max_trajectory_tokens, self.max_observation_tokens)

    def demonstration_cold_start(self, key: str, conversations: list[tuple], stages: int = 1, processor=None) -> str | None:
        """The cold start: SFT on `conversations` ((opening, tools, messages) each), laid out as a rollout
        lays out tokens and trained on the assistant tokens only; `key` names the demonstrations in the
        cache (by content, so a changed prompt or data trains anew). With `stages` > 1, stage k starts from
        stage k-1's weights (a fresh optimizer, the examples in another order), each cached on its own.
        `processor`: a vision model's, for conversations with images. None when sft_steps = 0."""
        if self.sft_steps == 0:
            return None
        path = None
        for stage in range(stages):
            spec = ColdStart(self.model, self.sft_steps, self.sft_batch_size, learning_rate=self.sft_learning_rate,
                             seed=self.start_seed, data_seed=stage + 1000 * self.start_seed, init=path, task=key)
            path = run_cold_start(spec, conversations, lambda tokenizer: demonstration_examples(
                tokenizer, self.tool_schemas, conversations, self.max_observation_tokens, processor))
        return path


def objective(cfg, sequence_loss=None) -> Objective:
    """The `Objective` of a policy-update chapter's config: `loss_fn` with its clip bounds (LossConfig),
    reduced by `normalizer` (OptimConfig, with SamplingConfig's max_tokens), the KL term (KLConfig), and
    a chapter's `sequence_loss` in place of the token-level loss (GSPO). A config without KLConfig has no KL term."""
    kl = (cfg.kl_coef, cfg.kl_estimator) if isinstance(cfg, KLConfig) else (0.0, "k3")
    return Objective(cfg.loss_fn, cfg.loss_config(), cfg.normalizer, cfg.max_tokens, *kl, sequence_loss)
