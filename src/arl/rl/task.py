"""The seam between an RL chapter and what it trains on: a `Task`.

A task holds the training and held-out items, says how the weights RL starts from are made (the
cold start), runs the held-out evaluation, and turns a step's samples into the rollout rows the run
logs and the report shows. `open_session` asks it for the start weights and the step-0 evaluation;
a recipe's loop asks it for prompts (or environments) and rows. Two kinds cover every chapter:

- `MathTask`: single-turn problems with a `\\boxed{}` answer (GRPO, DAPO, GSPO, OPD, OPSD).
- `EnvTask`: multi-turn episodes against an environment, one per item (Search-R1, ReTool, TextWorld).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ..coldstart import ColdStart, demonstration_examples, encode_chat, run_cold_start
from ..data import Problem, format_prompt
from ..eval import evaluate_boxed
from ..eval.agent import evaluate_agent
from ..rollout import Budgets, ChatTokens


class Task(Protocol):
    train: Sequence
    test: Sequence
    summary_keys: Sequence[str]
    """The held-out evaluation's keys the run summary reports before and after, the headline first."""
    table_keys: Sequence[str]
    """The keys of the report's table of evaluations."""

    def start_weights(self) -> str | None:
        """The saved state RL starts from (a cached cold start), or None: the base model."""

    def held_out(self, run, step: int, sampler, tokenizer, name: str | None = None) -> dict[str, float]:
        """Evaluate `sampler` on the held-out items: write `eval/step-NNNN.json` (or `eval/NAME.json`,
        for a model that is not the one trained) and return the `eval/` metrics."""

    def report_rows(self, rows: list[dict]) -> list[dict]:
        """Logged rollout rows as the report's sample of them."""


@dataclass
class MathTask:
    """Problems with a reference answer, one prompt each through the chat template, graded by the
    last `\\boxed{}` (`eval.evaluate_boxed`: greedy, `max_tokens`, the same items every time)."""

    train: list[Problem]
    test: list[Problem]
    cold_start: ColdStart | None
    """The SFT RL starts from (trained once, cached), or None: the base model."""
    max_tokens: int
    summary_keys: Sequence[str] = ("accuracy", "format_rate", "accuracy_given_format", "accuracy_any_format")
    table_keys: Sequence[str] = ("accuracy", "format_rate", "truncated")

    def start_weights(self) -> str | None:
        return run_cold_start(self.cold_start, self.train) if self.cold_start else None

    def prompt(self, tokenizer, problem: Problem) -> list[int]:
        return encode_chat(tokenizer, format_prompt(problem))

    def held_out(self, run, step: int, sampler, tokenizer, name: str | None = None) -> dict[str, float]:
        prompts = [self.prompt(tokenizer, p) for p in self.test]
        return evaluate_boxed(run, step, sampler, prompts, [p.answer for p in self.test], self.max_tokens,
                              [tokenizer.eos_token], name)

    def rows(self, problems: Sequence[Problem], groups, adv_BG, rewards_BG) -> list[dict]:
        """One row per sampled completion: its problem, text, tokens, logprobs, reward and advantage."""
        return [{"prompt": p.question, "answer": p.answer, "completion": s.text, "tokens": s.tokens,
                 "logprobs": s.logprobs, "reward": r, "advantage": a, "stop_reason": s.stop_reason}
                for p, seqs, rs, advs in zip(problems, groups, rewards_BG, adv_BG) for s, r, a in zip(seqs, rs, advs)]

    def report_rows(self, rows: list[dict]) -> list[dict]:
        return rows


@dataclass
class EnvTask:
    """Items played as episodes of an environment (`env(item)`, a fresh one each time): a group of
    branches per training item, one greedy episode per held-out item (`eval.evaluate_agent`)."""

    train: list
    test: list
    env: Callable[[Any], Any]
    """A fresh environment (`arl.envs.Env`) for an item."""
    budgets: Budgets
    tool_schemas: bool
    """Tool schemas in the prompt through the chat template's tools= (`ChatTokens`)."""
    describe: Callable[[Any], dict]
    """What a rollout row or an evaluation item records of its item (question, answers, ...)."""
    tag: Callable[[Any], str]
    """The evaluation's breakdown of an item (`hop2/em`, `quest1/won`, a problem's kind)."""
    summary_keys: Sequence[str]
    table_keys: Sequence[str] = ()
    """The report's evaluation columns (default: `summary_keys`)."""
    cold_start: Callable[[], str | None] = lambda: None
    """Trains (or finds cached) the cold start and returns its saved state; None: the base model."""
    counters: Sequence[str] = ()
    """The environment's own per-episode counts, reported even when no episode had them."""
    stop_reasons: Sequence[str] = ()
    """The environment's own stop reasons, reported even when no episode had them."""
    tool_metrics: Callable[[], dict[str, float]] | None = None
    """What the environment's tools did since the last call, as metrics (ReTool's sandbox outcomes);
    the held-out evaluation reports it under `eval/`."""
    prompt_key: str = "question"
    """The `describe` key the report's sampled episodes open with."""
    processor: Any = None
    """A vision model's image processor, for environments whose messages hold images (Spec-o3)."""
    score: Callable[[Sequence], dict[str, float]] | None = None
    """Scores of the held-out environments once played, beyond the episodes' own metrics (Spec-o3's
    macro-F1 over its tasks); written into the evaluation with the summary."""
    conversations: Callable[[], list] = list
    """(opening, tools, messages) per demonstration (made once, when first asked): what the cold start and
    the continued-SFT control train on; empty for a task without demonstrations."""
    _chats: dict = field(default_factory=dict, repr=False)

    def __post_init__(self):
        self.table_keys = self.table_keys or self.summary_keys

    def start_weights(self) -> str | None:
        return self.cold_start()

    def chat(self, tokenizer) -> ChatTokens:
        """The chat template's pieces as tokens (built once per tokenizer)."""
        if id(tokenizer) not in self._chats:
            self._chats[id(tokenizer)] = ChatTokens(tokenizer, self.tool_schemas, self.processor)
        return self._chats[id(tokenizer)]

    def envs(self, items: Sequence, copies: int = 1) -> list[list]:
        """`copies` fresh environments of each item: a group of branches that share its opening."""
        return [[self.env(x) for _ in range(copies)] for x in items]

    def sft_examples(self, tokenizer) -> list[tuple]:
        """The demonstrations as `coldstart.sft_step` takes them, laid out as a rollout lays out its tokens
        (assistant tokens trained; images, observations and template masked): the examples of the cold
        start and of the continued-SFT control."""
        return demonstration_examples(tokenizer, self.tool_schemas, self.conversations(), self.budgets.max_observation_tokens,
                                      self.processor)

    def held_out(self, run, step: int, sampler, tokenizer, name: str | None = None) -> dict[str, float]:
        if self.tool_metrics:
            self.tool_metrics()  # what the tools did before counts elsewhere
        out = evaluate_agent(run, step, sampler, [self.env(x) for x in self.test], [self.tag(x) for x in self.test],
                             self.chat(tokenizer), self.budgets, [self.describe(x) for x in self.test],
                             main=self.summary_keys[0], name=name, counters=self.counters, stop_reasons=self.stop_reasons,
                             score=self.score)
        return {**out, **{f"eval/{k}": v for k, v in self.tool_metrics().items()}} if self.tool_metrics else out

    def rows(self, items: Sequence, groups, adv_BG, save_image=None) -> list[dict]:
        """One row per episode: its group, its item (`describe`), the whole trajectory and its advantage
        (`save_image`, `RunDir.save_image`: its images stored in the run folder and named in the row)."""
        return [{"group": i, **self.describe(x), **t.to_json(save_image), "advantage": a}
                for i, (x, g, adv_G) in enumerate(zip(items, groups, adv_BG)) for t, a in zip(g, adv_G)]

    def report_rows(self, rows: list[dict]) -> list[dict]:
        return [{"step": r["step"], "prompt": r[self.prompt_key], "completion": "\n---\n".join(t["text"] for t in r["turns"]),
                 "reward": r["reward"], "advantage": r["advantage"], "stop_reason": r["stop_reason"]} for r in rows]
