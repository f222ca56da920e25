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
from dataclasses import dataclass
from pathlib import Path

from .. import policy
from ..client import ServiceClient
from ..coldstart import ColdStart, content_digest, demonstration_examples, run_cold_start
from ..data.encyclopedia import Question, demonstration, make_encyclopedia
from ..data.qa import load_qa_jsonl
from ..envs.search_r1 import SearchEnv, opening
from ..envs.tools import tool_schema
from ..eval.agent import evaluate_agent
from ..policy import PolicyConfig
from ..rollout import Budgets, ChatTokens, rollout_groups
from ..settings import configure
from ..tools.search import BM25Index, search_tool
from ..track import RunDir, Tracker, progress

SUMMARY_KEYS = ("em", "hop1/em", "hop2/em", "answered", "tool_calls", "valid_tool_call_rate", "no_tool_rate", "turns")


@dataclass
class Config(PolicyConfig):
    """Search-R1's fields: the task, the search tool, the rollout budgets, and the policy-update ones
    it shares with GRPO (`arl.policy.PolicyConfig`)."""

    data: str = "encyclopedia"
    """encyclopedia (the generated mini task), or a folder with corpus.jsonl, train.jsonl and test.jsonl
    (a real collection and QA set; `arl.data.qa` describes the format)."""
    n_train: int = 1000
    """Training questions (generated, or the first N of train.jsonl)."""
    n_test: int = 200
    """Held-out questions."""
    top_k: int = 1
    """Passages a search returns."""
    max_tokens: int = 40
    """Sampled tokens per assistant turn."""
    max_turns: int = 4
    """Assistant turns per episode."""
    max_tool_calls: int = 3
    """Search calls per episode."""
    max_trajectory_tokens: int = 768
    """Prompt, turns and observations of one episode."""
    max_observation_tokens: int = 96
    """Tokens of one search result; longer ones are cut and marked."""
    tool_schemas: bool = False
    """Put the tool's JSON schema in the prompt through the chat template's tools= (Qwen's preamble: 240
    tokens for one tool). Off, the one-line system prompt names the tool and the cold start teaches
    the call format: half the tokens of every step on a CPU (the mini preset)."""
    sft_steps: int = 500
    """Cold-start SFT steps on gold demonstrations (cached across runs with the same settings)."""
    sft_batch_size: int = 16
    """Demonstrations per cold-start step."""
    sft_worlds: int = 3
    """Encyclopedias (generator seeds 0..N-1, each searched through its own index) whose training
    questions the cold start demonstrates: more names than one world holds, so that copying the name
    in the question into the query pays and memorising names does not. RL and evaluation use seed 0."""
    sft_learning_rate: float = 3e-3
    """Cold-start learning rate."""
    steps: int = 100
    """Policy-update steps."""

    def validate(self) -> None:
        super().validate()
        self.budgets().validate()
        if self.top_k < 1:
            raise ValueError(f"top_k={self.top_k}: must be at least 1")
        if self.data != "encyclopedia":
            missing = [f for f in ("corpus.jsonl", "train.jsonl", "test.jsonl") if not (Path(self.data) / f).is_file()]
            if missing:
                raise ValueError(f"data={self.data!r}: no {', '.join(missing)} there; give a folder with corpus.jsonl, "
                                 "train.jsonl and test.jsonl (arl.data.qa), or data=encyclopedia")
            if self.sft_steps > 0:
                raise ValueError(f"sft_steps={self.sft_steps}: a real QA set has no gold search queries to demonstrate; "
                                 "set sft_steps=0 (start from an instruction-tuned model)")

    def budgets(self) -> Budgets:
        return Budgets(self.max_turns, self.max_tool_calls, self.max_tokens, self.max_trajectory_tokens,
                       self.max_observation_tokens)

    def task(self, world: int = 0) -> "SearchTask":
        """The questions and the search tool: encyclopedia `world` (generator seed), or the real data."""
        if self.data == "encyclopedia":
            passages, train, test = make_encyclopedia(seed=world, n_train=self.n_train, n_test=self.n_test)
        else:
            folder = Path(self.data)
            passages, train, test = load_qa_jsonl(folder / "corpus.jsonl", folder / "train.jsonl", folder / "test.jsonl")
            train, test = train[:self.n_train], test[:self.n_test]
        return SearchTask(train, test, search_tool(BM25Index(passages), k=self.top_k))

    def start_weights(self, task: "SearchTask") -> str | None:
        """The cold start: SFT on a gold demonstration of every training question of `sft_worlds`
        encyclopedias, laid out as the rollout lays out tokens, trained on the assistant tokens only
        (cached). The held-out world of seed 0 is never demonstrated."""
        if self.sft_steps == 0:
            return None
        worlds = [task] + [self.task(world) for world in range(1, self.sft_worlds)]
        conversations = [(q, w.search, opening(q), demonstration(q, w.search)) for w in worlds for q in w.train]
        # the cache key names the demonstrations by content (prompt, tool schema, data, result format),
        # so a change to any of them trains a new cold start instead of reusing a stale one
        digest = content_digest([o + d for _, _, o, d in conversations[::50]] + [tool_schema(task.search)])
        spec = ColdStart(self.model, self.sft_steps, self.sft_batch_size, learning_rate=self.sft_learning_rate,
                         task=f"search-r1-{digest}-{len(conversations)}-obs{self.max_observation_tokens}"
                              f"-schemas{int(self.tool_schemas)}")

        return run_cold_start(spec, task.train, lambda tokenizer: demonstration_examples(
            tokenizer, self.tool_schemas, [(start, (search,), demo) for _, search, start, demo in conversations],
            self.max_observation_tokens))


@dataclass
class SearchTask:
    train: list[Question]
    test: list[Question]
    search: object
    """The `search` tool over the whole collection."""

    def envs(self, questions: list[Question], copies: int = 1) -> list[list[SearchEnv]]:
        return [[SearchEnv(q, self.search) for _ in range(copies)] for q in questions]


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=40, max_turns=2,
                  sft_steps=60, n_train=16, n_test=4, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="search-r1-data",
                 n_train=100_000, n_test=500, top_k=3, max_tokens=512, max_turns=6, max_tool_calls=4,
                 max_trajectory_tokens=4096, max_observation_tokens=1024, tool_schemas=True, sft_steps=0, batch_prompts=8,
                 steps=100),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if cfg.threads:
        configure(num_threads=cfg.threads)
    task, budgets = cfg.task(), cfg.budgets()
    service = ServiceClient(run_name=run.name, checkpoint_dir=str(run.checkpoints_dir))
    start, client, ref, start_path = policy.start_client(cfg, run, service, task, resume)
    chat = ChatTokens(client.get_tokenizer(), cfg.tool_schemas)

    def held_out(step: int, sampler, name: str | None = None) -> dict[str, float]:
        items = [{"question": q.question, "answers": list(q.answers), "hops": q.hops} for q in task.test]
        return evaluate_agent(run, step, sampler, [g[0] for g in task.envs(task.test)], [f"hop{q.hops}" for q in task.test],
                              chat, budgets, items, main="em", name=name)

    if start == 0:
        run.log_metrics(0, held_out(0, client.save_weights_and_get_sampling_client()))
    session = policy.Session(task.train, task.test, start, client, ref, start_path, chat.tokenizer,
                             [chat.tokenizer.eos_token], held_out, Tracker.create(cfg.tracker, run))
    with progress(cfg.steps, "search-r1", initial=start) as bar:
        for step in range(start, cfg.steps):
            t0 = time.perf_counter()
            # 1. play a group of episodes per question from the current weights
            sampler = client.save_weights_and_get_sampling_client()
            questions = policy.step_problems(task.train, step, cfg.batch_prompts)
            groups = rollout_groups(sampler, task.envs(questions, cfg.group_size), chat, budgets, cfg.temperature,
                                    policy.episode_seed(cfg, step))
            t_sample = time.perf_counter() - t0

            # 2. group-relative advantage of each episode's reward (degenerate groups come back all zero)
            frac_degenerate = policy.episode_advantages(groups, cfg.adv_scale)

            # 3. one policy-gradient step on the policy's tokens of the episodes with signal
            kept = policy.trained_episodes(groups)
            lr = cfg.learning_rate_at(step)
            metrics = policy.policy_step(client, cfg, kept, cfg.batch_prompts * cfg.group_size, lr, ref) if kept else {}
            t_total = time.perf_counter() - t0

            # 4. log: rollout statistics, what was trained and what was context, timings
            metrics.update(policy.episode_metrics(groups, kept, frac_degenerate, t_sample, t_total))
            rows = [{"group": i, "question": q.question, "answers": list(q.answers), "hops": q.hops, **t.to_json()}
                    for i, (q, g) in enumerate(zip(questions, groups)) for t in g]
            policy.end_step(cfg, run, session, step + 1, metrics, rows)
            bar.update()
            bar.set_metrics({"reward": metrics["reward/mean"], "em": metrics.get("rollout/em", 0.0)})
    policy.finish_episodes(cfg, run, session, f"Search-R1 on {cfg.data}, {cfg.model}", SUMMARY_KEYS)
    return run
