"""The task of the ReTool chapter and of its continued-SFT control: calculations a tiny model cannot do
in its head (or a math set), played as episodes of the `retool` environment whose code runs in the
sandbox, and the cold start on a demonstration of every training problem (a direct answer for
`sft_direct_fraction` of them, a call, its output and the boxed answer for the rest).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from ..coldstart import content_digest
from ..config import check_eval_split
from ..data import load_math_task
from ..data.calculation import Calculation, demonstration, make_dev, make_split
from ..envs.retool import CodeEnv, opening
from ..tools.sandbox import Sandbox, SandboxConfig, make_code_interpreter, sandbox_metrics
from .config import Group
from .task import EnvTask

AGENT_DEFAULTS = dict(max_turns=3, max_tool_calls=2, max_trajectory_tokens=320, sft_steps=1500)
"""The agent fields' mini defaults, shared by the chapter and its control (`rl.config.defaults`). The cold
start runs 1500 SFT steps: 400 teach the call format but not copying numbers into the code; after 1500
about 40% of the sampled programs print the right answer."""
SUMMARY_KEYS = ("correct", "printed_answer", "answered", "tool_calls", "no_tool_rate", "valid_tool_call_rate", "turns")


@dataclass
class CalcConfig(Group):
    """The problems, their splits, the sandbox and the cold start's mix (with an `AgentConfig`)."""

    data: str = "calculation"
    """calculation (the generated mini task), or a GSM8K-style train jsonl (its test file beside it)."""
    n_train: int = 2000
    """Training problems (generated)."""
    n_test: int = 200
    """Held-out test problems: the reported results."""
    n_dev: int = 200
    """Development problems, where presets and the cold start are chosen (eval_split=dev): generated beside
    train and test (neither changes), or a math set's last training problems held back."""
    eval_split: str = "test"
    """Which held-out problems the evaluations use: test (reported results) or dev (choosing settings)."""
    sandbox_timeout_s: float = 5.0
    """Wall-clock seconds of one interpreter call (the sandbox kills it and everything it started)."""
    sandbox_concurrency: int = 2
    """Interpreter calls that run at once (one per core)."""
    sft_direct_fraction: float = 0.5
    """Share of training problems demonstrated as a direct boxed answer without the tool."""

    def validate(self) -> None:
        super().validate()
        check_eval_split(self)
        if self.sandbox_timeout_s <= 0:
            raise ValueError(f"sandbox_timeout_s={self.sandbox_timeout_s}: must be greater than 0 (seconds a call may run)")
        self.sandbox_config()
        if not 0.0 <= self.sft_direct_fraction <= 1.0:
            raise ValueError(f"sft_direct_fraction={self.sft_direct_fraction}: a share in [0, 1]")
        if self.data != "calculation" and self.sft_steps > 0:
            raise ValueError(f"sft_steps={self.sft_steps}: {self.data!r} has no programs to demonstrate; set "
                             "sft_steps=0 (start from an instruction-tuned model) or data=calculation")

    def data_splits(self) -> dict[str, list[Calculation]]:
        """Every split's problems: train, dev and test (disjoint by question; split seed 0)."""
        if self.data == "calculation":
            train, test = make_split(seed=0, n_train=self.n_train, n_test=self.n_test)
            return {"train": train, "dev": make_dev(train, test, self.n_dev), "test": test}
        return {name: [Calculation(p.id, "math", p.question, p.answer, "") for p in split] for name, split in
                zip(("train", "dev", "test"), load_math_task(self.data, "", self.n_train, self.n_test, self.n_dev))}

    def sandbox_config(self) -> SandboxConfig:
        return SandboxConfig(wall_timeout_s=self.sandbox_timeout_s, max_concurrent=self.sandbox_concurrency).validate()


def retool_task(cfg, sandbox: Sandbox) -> EnvTask:
    """The calculations (split seed 0) as `retool` episodes whose code runs in `sandbox`, or a math set
    as calculations without programs. The cold start: SFT on a demonstration of every training problem,
    `sft_direct_fraction` of them direct answers, the rest a call, its output and the boxed answer (the
    same demonstrations are the continued-SFT control's data)."""
    splits = cfg.data_splits()
    train, test = splits["train"], splits[cfg.eval_split]
    results = []  # every sandbox call's outcome; the model sees only the text
    code_interpreter = make_code_interpreter(sandbox, on_result=results.append)

    def drain() -> dict[str, float]:
        out = sandbox_metrics(results)
        results.clear()
        return out

    @cache
    def conversations() -> list[tuple]:
        rng, tools = random.Random(cfg.start_seed), (make_code_interpreter(),)  # only its schema is read: demonstrations carry outputs
        return [(opening(c.question), tools, demonstration(c, rng.random() >= cfg.sft_direct_fraction)) for c in train]

    def cold_start() -> str | None:
        if cfg.sft_steps == 0:
            return None
        digest = content_digest([o + d for o, _, d in conversations()[::50]])
        return cfg.demonstration_cold_start(f"retool-{digest}-{len(train)}-direct{cfg.sft_direct_fraction}"
                                            f"-schemas{int(cfg.tool_schemas)}", conversations())

    return EnvTask(train, test, lambda c: CodeEnv(c.question, c.answer, code_interpreter), cfg.budgets(), cfg.tool_schemas,
                   describe=lambda c: {"question": c.question, "answer": c.answer, "kind": c.kind}, tag=lambda c: c.kind,
                   summary_keys=SUMMARY_KEYS, cold_start=cold_start, tool_metrics=drain, conversations=conversations)


