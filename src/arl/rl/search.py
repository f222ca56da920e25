"""The task of the Search-R1 chapter and of its continued-SFT control: questions about a generated
encyclopedia (or a real QA set) played as episodes of the `search-r1` environment against a BM25 index,
and the cold start on a gold demonstration of every training question of `sft_worlds` encyclopedias.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from pathlib import Path

from ..coldstart import content_digest
from ..config import check_eval_split
from ..data.encyclopedia import demonstration, make_dev, make_encyclopedia
from ..data.problem import hold_back
from ..data.qa import load_qa_jsonl
from ..envs.search_r1 import SearchEnv, opening
from ..tools.calls import tool_schema
from ..tools.search import BM25Index, search_tool
from .config import Group
from .task import EnvTask

AGENT_DEFAULTS = dict(max_tokens=40, max_tool_calls=3, max_observation_tokens=96)
"""The agent fields' mini defaults, shared by the chapter and its control (`rl.config.defaults`)."""
SUMMARY_KEYS = ("em", "hop1/em", "hop2/em", "answered", "tool_calls", "valid_tool_call_rate", "no_tool_rate", "turns")


@dataclass
class SearchConfig(Group):
    """The questions, their splits, the search tool and the cold start's worlds (with an `AgentConfig`)."""

    data: str = "encyclopedia"
    """encyclopedia (the generated mini task), or a folder with corpus.jsonl, train.jsonl and test.jsonl
    (a real collection and QA set; `arl.data.qa` describes the format)."""
    n_train: int = 1000
    """Training questions (generated, or the first N of train.jsonl)."""
    n_test: int = 200
    """Held-out test questions: the reported results."""
    n_dev: int = 100
    """Development questions, where presets and the cold start are chosen (eval_split=dev): the generated
    held-out world's questions that the test split does not ask, or a real set's last training questions held back."""
    eval_split: str = "test"
    """Which held-out questions the evaluations use: test (reported results) or dev (choosing settings)."""
    top_k: int = 1
    """Passages a search returns."""
    sft_worlds: int = 3
    """Encyclopedias (generator seeds 0..N-1, each searched through its own index) whose training
    questions the cold start demonstrates: more names than one world holds, so that copying the name
    in the question into the query pays and memorising names does not. RL and evaluation use seed 0."""

    def validate(self) -> None:
        super().validate()
        if self.top_k < 1:
            raise ValueError(f"top_k={self.top_k}: must be at least 1")
        check_eval_split(self)
        if self.data != "encyclopedia":
            missing = [f for f in ("corpus.jsonl", "train.jsonl", "test.jsonl") if not (Path(self.data) / f).is_file()]
            if missing:
                raise ValueError(f"data={self.data!r}: no {', '.join(missing)} there; give a folder with corpus.jsonl, "
                                 "train.jsonl and test.jsonl (arl.data.qa), or data=encyclopedia")
            if self.sft_steps > 0:
                raise ValueError(f"sft_steps={self.sft_steps}: a real QA set has no gold search queries to demonstrate; "
                                 "set sft_steps=0 (start from an instruction-tuned model)")

    def data_splits(self) -> dict[str, list]:
        """Every split's questions of world 0: train, dev and test (disjoint by question)."""
        return world(self)[0]


def world(cfg, seed: int = 0) -> tuple[dict[str, list], object]:
    """(the train, dev and test questions, the `search` tool over the whole collection): encyclopedia
    `seed`, or the real data."""
    if cfg.data == "encyclopedia":
        passages, train, test = make_encyclopedia(seed=seed, n_train=cfg.n_train, n_test=cfg.n_test)
        dev = make_dev(seed, cfg.n_dev, cfg.n_test)
    else:
        folder = Path(cfg.data)
        passages, train, test = load_qa_jsonl(folder / "corpus.jsonl", folder / "train.jsonl", folder / "test.jsonl")
        train, dev = hold_back(train, cfg.n_dev, str(folder / "train.jsonl"))
        train, test = train[:cfg.n_train], test[:cfg.n_test]
    return {"train": train, "dev": dev, "test": test}, search_tool(BM25Index(passages), k=cfg.top_k)


def search_task(cfg) -> EnvTask:
    """Questions of world 0 as `search-r1` episodes. The cold start: SFT on a gold demonstration (question
    -> search calls -> results -> `Answer:`) of every training question of `sft_worlds` encyclopedias, each
    searched through its own index; the held-out world of seed 0 is never demonstrated (the same
    demonstrations are the continued-SFT control's data)."""
    splits, search = world(cfg)
    train, test = splits["train"], splits[cfg.eval_split]

    @cache
    def conversations() -> list[tuple]:
        worlds = [(train, search)] + [(qs["train"], tool) for qs, tool in (world(cfg, seed) for seed in range(1, cfg.sft_worlds))]
        return [(opening(q), (tool,), demonstration(q, tool)) for qs, tool in worlds for q in qs]

    def cold_start() -> str | None:
        if cfg.sft_steps == 0:
            return None
        # named by content (prompt, tool schema, data, result format): a change to any of them trains anew
        digest = content_digest([o + d for o, _, d in conversations()[::50]] + [tool_schema(search)])
        return cfg.demonstration_cold_start(f"search-r1-{digest}-{len(conversations())}-obs{cfg.max_observation_tokens}"
                                            f"-schemas{int(cfg.tool_schemas)}", conversations())

    return EnvTask(train, test, lambda q: SearchEnv(q, search), cfg.budgets(), cfg.tool_schemas,
                   describe=lambda q: {"question": q.question, "answers": list(q.answers), "hops": q.hops},
                   tag=lambda q: f"hop{q.hops}", summary_keys=SUMMARY_KEYS, cold_start=cold_start,
                   conversations=conversations)


