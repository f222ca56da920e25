"""The task of the Spec-o3 chapter and of its continued-SFT control: generated spectra vetted as
YES/NO questions (`arl.data.spectra`), played as episodes of the `spec-o3` environment (the full
spectrum as an image in the opening turn, `spectral_visualization_tool` returning a rest-frame window
as an image observation), the cold start on one tool-using demonstration per training question, and
the reference lab's headline, the macro-F1 over the tasks.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from functools import cache

from .. import models
from ..coldstart import content_digest
from ..config import check_eval_split, comma_list, require_positive
from ..data import spectra
from ..envs import format_tool_call
from ..envs.spec_o3 import SpecEnv
from ..eval.stats import macro_f1
from .config import Group
from .task import EnvTask

AGENT_DEFAULTS = dict(model="arl/tiny-qwen2-vl-3m", max_tokens=96, max_turns=3, max_tool_calls=2,
                      max_trajectory_tokens=512, sft_steps=600, sft_learning_rate=2e-3)
"""The agent fields' mini defaults, shared by the chapter and its control (`rl.config.defaults`)."""
SUMMARY_KEYS = ("macro_f1", "correct", "answered", "tool_calls", "no_tool_rate", "turns")


@dataclass
class SpecConfig(Group):
    """The questions, their splits, and whether the tool is offered (the chapter's control)."""

    tasks: str = "cv,cc,ss,gm,wd"
    """Vetting tasks, comma-separated (cv, cc, ss, gm, wd); questions go round-robin over them."""
    n_train: int = 1000
    """Training questions (one generated spectrum each)."""
    n_dev: int = 50
    """Development questions: where presets and cold starts are chosen (eval_split=dev)."""
    n_test: int = 100
    """Held-out test questions: the reported results."""
    eval_split: str = "test"
    """Which held-out questions the evaluations use: test (reported results) or dev (choosing settings)."""
    tool: bool = True
    """Offer spectral_visualization_tool; false = the control that sees the full image only."""

    def validate(self) -> None:
        super().validate()
        require_positive(self, "n_dev", "n_test")
        if self.n_train < 0:
            raise ValueError(f"n_train={self.n_train}: must be >= 0")
        check_eval_split(self)
        self.task_list()

    def task_list(self) -> list[str]:
        return comma_list("tasks", self.tasks, spectra.TASKS)

    def data_splits(self) -> dict[str, list]:
        """Every split's questions: train, dev and test (disjoint by spectrum)."""
        return dict(zip(("train", "dev", "test"), spectra.make_split(self.n_train, self.n_dev, self.n_test,
                                                                     tasks=self.task_list())))


def demonstration(q: spectra.Question, tool: bool) -> list[dict]:
    """The messages after the opening: with the tool, the zoom, its rendered window and the answer; without,
    the answer alone (what the zoom would have shown, stated)."""
    look, _, answer = spectra.demonstration(q)
    if not tool:
        return [{"role": "assistant", "content": answer["content"]}]
    (call,) = look["tool_calls"]
    window = spectra.visualize(q.spectrum, call["arguments"]["wavelength_range"])
    observation = window if isinstance(window, str) else [{"type": "image", "image": window}]
    return [{"role": "assistant", "content": f"{look['content']}\n{format_tool_call(call['name'], call['arguments'])}"},
            {"role": "tool", "content": observation}, answer]


def spec_task(cfg) -> EnvTask:
    """The generated questions (split seed 0) as `spec-o3` episodes, and the cold start on their
    demonstrations; `cfg` is a `SpecConfig` and an `AgentConfig`."""
    train, dev, test = spectra.make_split(cfg.n_train, cfg.n_dev, cfg.n_test, tasks=cfg.task_list())
    processor = models.load_image_processor(cfg.model)

    @cache
    def conversations() -> list[tuple]:
        envs = [SpecEnv(q, cfg.tool) for q in train]
        return [(e.initial_messages(), e.tools, demonstration(q, cfg.tool)) for q, e in zip(train, envs)]

    # the cache name of the cold start, by content: a changed prompt, answer or demonstration trains anew
    shown = [[q.question_text(), q.answer, str(spectra.demonstration(q)[-1]["content"])] for q in train[::50]]
    shown += [hashlib.sha256(spectra.full_view(q.spectrum) + spectra.visualize(q.spectrum, q.deciding_window)).hexdigest()
              for q in train[:1]]  # and how they are drawn
    key = f"spec-o3-{content_digest(shown)}-{len(train)}-tool{int(cfg.tool)}-schemas{int(cfg.tool_schemas)}"

    def score(envs) -> dict[str, float]:
        overall, per_task = macro_f1([e.question.task for e in envs], [e.question.answer for e in envs],
                                     [e.prediction for e in envs])
        return {"macro_f1": overall, **{f"{task}/f1": v for task, v in per_task.items()}}

    return EnvTask(train, test if cfg.eval_split == "test" else dev, lambda q: SpecEnv(q, cfg.tool), cfg.budgets(),
                   cfg.tool_schemas, describe=lambda q: {"question": q.question_text(), "answer": q.answer, "task": q.task,
                                                         "object": q.spectrum.id},
                   tag=lambda q: q.task, summary_keys=SUMMARY_KEYS,
                   cold_start=lambda: cfg.demonstration_cold_start(key, conversations(), processor=processor),
                   processor=processor, score=score, conversations=conversations)
