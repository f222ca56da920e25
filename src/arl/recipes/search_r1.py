"""Search-R1: a policy that looks facts up with a search tool before it answers, trained with
multi-turn GRPO (Jin et al. 2025, "Search-R1", sec. 3: retrieved tokens are masked out of the loss).

Each question is one episode of the `search-r1` environment (`arl.envs.search_r1`): the model may
call `search(query)` (BM25 over the collection, top `top_k` passages), at most one call per turn;
a turn without a call is its answer, graded by exact match of its `Answer:` line (1 / 0, and -0.1
for a missing or malformed answer, an unreadable call, or a budget running out). A group of
`group_size` episodes shares the question; the first turn samples the whole group, then each branch
goes on alone (`arl.rollout.rollout_groups`). Advantage r - mean(group), one value for every token
the policy sampled; observation and template tokens are context with advantage 0
(`arl.rollout.trajectory_datum`). Loss reduction: token mean over the trained (policy) tokens.

The mini task is a generated encyclopedia of fictional people, towns and companies with one- and
two-hop questions (`arl.data.encyclopedia`); test questions are about a part of the world no
training question touches, so nothing can be memorised. An SFT cold start on gold demonstrations
(question -> search calls -> results -> `Answer:`) leaves the tiny model partly competent.

    arl run search-r1 --preset mini [seed=1]
    arl show runs/search-r1/<name>            # the trajectories, token by token
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from pathlib import Path

from ..coldstart import content_digest
from ..config import check_eval_split
from ..data.encyclopedia import demonstration, make_dev, make_encyclopedia
from ..data.problem import hold_back
from ..data.qa import load_qa_jsonl
from ..envs.search_r1 import SearchEnv, opening
from ..rl import batch, update
from ..rl.config import (AgentConfig, KLConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults,
                         objective)
from ..rl.session import finish, open_session
from ..rl.task import EnvTask
from ..rollout import request_seed, rollout_groups, trajectory_datum
from ..tools.calls import tool_schema
from ..tools.search import BM25Index, search_tool
from ..track import RunDir

SUMMARY_KEYS = ("em", "hop1/em", "hop2/em", "answered", "tool_calls", "valid_tool_call_rate", "no_tool_rate", "turns")


@defaults(max_tokens=40, max_tool_calls=3, max_observation_tokens=96, steps=100)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, AgentConfig, SamplingConfig):
    """Search-R1's fields: the questions and the search tool, the rollout budgets and cold start, and the
    policy-update ones it shares with GRPO."""

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


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=40, max_turns=2,
                  sft_steps=60, n_train=16, n_test=4, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="search-r1-data",
                 n_train=100_000, n_test=500, top_k=3, max_tokens=512, max_turns=6, max_tool_calls=4,
                 max_trajectory_tokens=4096, max_observation_tokens=1024, tool_schemas=True, sft_steps=0, batch_prompts=8,
                 steps=100),
}


def world(cfg: Config, seed: int = 0) -> tuple[dict[str, list], object]:
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


def make_task(cfg: Config) -> EnvTask:
    """Questions of world 0 as `search-r1` episodes. The cold start: SFT on a gold demonstration (question
    -> search calls -> results -> `Answer:`) of every training question of `sft_worlds` encyclopedias, each
    searched through its own index; the held-out world of seed 0 is never demonstrated."""
    splits, search = world(cfg)
    train, test = splits["train"], splits[cfg.eval_split]

    def cold_start() -> str | None:
        if cfg.sft_steps == 0:
            return None
        worlds = [(train, search)] + [(qs["train"], tool) for qs, tool in (world(cfg, seed) for seed in range(1, cfg.sft_worlds))]
        conversations = [(opening(q), (tool,), demonstration(q, tool)) for qs, tool in worlds for q in qs]
        # named by content (prompt, tool schema, data, result format): a change to any of them trains anew
        digest = content_digest([o + d for o, _, d in conversations[::50]] + [tool_schema(search)])
        return cfg.demonstration_cold_start(f"search-r1-{digest}-{len(conversations)}-obs{cfg.max_observation_tokens}"
                                            f"-schemas{int(cfg.tool_schemas)}", conversations)

    return EnvTask(train, test, lambda q: SearchEnv(q, search), cfg.budgets(), cfg.tool_schemas,
                   describe=lambda q: {"question": q.question, "answers": list(q.answers), "hops": q.hops},
                   tag=lambda q: f"hop{q.hops}", summary_keys=SUMMARY_KEYS, cold_start=cold_start)


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = make_task(cfg)
    session = open_session(cfg, run, resume, task)
    client, chat, loss = session.client, task.chat(session.tokenizer), objective(cfg)
    ref = session.reference() if cfg.kl_coef else None
    for step in session.steps("search-r1", shown=("reward/mean", "rollout/em", "rollout/tool_calls")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. play a group of episodes per question from the current weights, each branch searching on its own
        questions = batch.step_items(task.train, step, cfg.batch_prompts)
        groups = rollout_groups(client.save_weights_and_get_sampling_client(), task.envs(questions, cfg.group_size), chat,
                                task.budgets, cfg.temperature, request_seed(cfg.seed, step))
        # 2. reward: the exact match of the Answer: line, graded by the environment (logged with the episodes'
        # searches and stops, and the em of one- and two-hop questions apart)
        metrics = {**batch.episode_metrics(groups), **batch.tagged_metrics(groups, [task.tag(q) for q in questions], "em"),
                   "time/sample": time.perf_counter() - t0}
        # 3. group-relative advantage, and the episodes it trains (advantage not 0)
        adv_BG, kept = batch.episode_advantages(groups, cfg.adv_scale)

        # 4. datums of the policy's tokens (retrieved passages are context: mask 0), 5. the update
        for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches, ref):
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log: what was trained and what was context
        trained = batch.trained_metrics(kept, metrics["time/sample"], time.perf_counter() - t0)
        session.end_step(step + 1, {**metrics, **stats.metrics(), **trained}, task.rows(questions, groups, adv_BG))
    finish(session, f"Search-R1 on {cfg.data}, {cfg.model}", asdict(cfg))
    return run
