"""ReTool: a policy that learns when to run Python, trained with multi-turn GRPO (Feng et al. 2025,
"ReTool", sec. 3.2: interpreter feedback is masked out of the loss; the reward is the outcome alone).

Each problem is one episode of the `retool` environment (`arl.envs.retool`): the model may call
`code_interpreter(code)`, a fresh sandboxed Python process per call (`arl.tools.Sandbox`: namespaces,
an unprivileged uid, rlimits, seccomp, a wall clock), and reads what it printed; a turn without a call
is its answer, graded by math equivalence of its last `\\boxed{}` (1 / 0, and -0.1 for no box, an
unreadable call or a budget running out). A group of `group_size` episodes shares the problem;
advantage r - mean(group) on every token the policy sampled; interpreter output and template tokens are
context with advantage 0 (`arl.rollout.trajectory_datum`). Loss reduction: token mean over the
trained (policy) tokens.

The mini task is calculations a tiny model cannot do in its head but can in one line of Python
(`arl.data.calculation`: large products, powers, sums of series, remainders). The SFT cold start
demonstrates a mix: `sft_direct_fraction` of the problems answered directly (right in form, not in
value: the model cannot learn the products), the rest by a tool call, its output and the boxed answer.
So the cold-started model calls the tool on about half the problems, and RL has a choice to learn.
Logged per step: tool-call rate, sandbox outcomes (ok, error, timeout, killed) and latency.

    arl run retool --preset mini [seed=1]
    arl show runs/retool/<name>            # the trajectories, token by token
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass

from .. import policy
from ..client import ServiceClient
from ..coldstart import ColdStart, content_digest, demonstration_examples, run_cold_start
from ..data import load_math_task
from ..data.calculation import Calculation, demonstration, make_split
from ..envs.retool import CodeEnv, opening
from ..eval.agent import evaluate_agent
from ..policy import PolicyConfig
from ..rollout import Budgets, ChatTokens, rollout_groups
from ..settings import configure
from ..tools.sandbox import Sandbox, SandboxConfig, make_code_interpreter, sandbox_metrics
from ..track import RunDir, Tracker, progress

SUMMARY_KEYS = ("correct", "printed_answer", "answered", "tool_calls", "no_tool_rate", "valid_tool_call_rate", "turns")


@dataclass
class Config(PolicyConfig):
    """ReTool's fields: the task, the sandbox, the rollout budgets, the cold start's mix, and the
    policy-update ones it shares with GRPO (`arl.policy.PolicyConfig`)."""

    model: str = "arl/tiny-qwen3-2m"
    """Base model (`arl models`)."""
    data: str = "calculation"
    """calculation (the generated mini task), or a GSM8K-style train jsonl (its test file beside it)."""
    n_train: int = 2000
    """Training problems (generated)."""
    n_test: int = 200
    """Held-out problems."""
    group_size: int = 4
    """Episodes per problem; the group mean is each episode's baseline."""
    max_tokens: int = 48
    """Sampled tokens per assistant turn."""
    max_turns: int = 3
    """Assistant turns per episode."""
    max_tool_calls: int = 2
    """Interpreter calls per episode."""
    max_trajectory_tokens: int = 320
    """Prompt, turns and observations of one episode."""
    max_observation_tokens: int = 64
    """Tokens of one interpreter result; longer ones are cut and marked."""
    tool_schemas: bool = False
    """Put the tool's JSON schema in the prompt through the chat template's tools= (Qwen's preamble). Off,
    the one-line system prompt names the tool and the cold start teaches the call format."""
    sandbox_timeout_s: float = 5.0
    """Wall-clock seconds of one interpreter call (the sandbox kills it and everything it started)."""
    sandbox_concurrency: int = 2
    """Interpreter calls that run at once (one per core)."""
    sft_steps: int = 1500
    """Cold-start SFT steps on the demonstrations (cached across runs with the same settings): 400 teach
    the call format but not copying numbers into the code; after 1500 about 40% of the sampled programs
    print the right answer."""
    sft_batch_size: int = 16
    """Demonstrations per cold-start step."""
    sft_direct_fraction: float = 0.5
    """Share of training problems demonstrated as a direct boxed answer without the tool."""
    sft_learning_rate: float = 3e-3
    """Cold-start learning rate."""
    learning_rate: float = 1e-4
    """AdamW learning rate of the RL phase."""
    steps: int = 100
    """Policy-update steps."""
    eval_every: int = 25
    """Evaluate on the held-out set every N steps (and before and after)."""

    def validate(self) -> None:
        super().validate()
        self.budgets().validate()
        self.sandbox_config()
        if not 0.0 <= self.sft_direct_fraction <= 1.0:
            raise ValueError(f"sft_direct_fraction={self.sft_direct_fraction}: a share in [0, 1]")
        if self.data != "calculation" and self.sft_steps > 0:
            raise ValueError(f"sft_steps={self.sft_steps}: {self.data!r} has no programs to demonstrate; set "
                             "sft_steps=0 (start from an instruction-tuned model) or data=calculation")

    def budgets(self) -> Budgets:
        return Budgets(self.max_turns, self.max_tool_calls, self.max_tokens, self.max_trajectory_tokens,
                       self.max_observation_tokens)

    def sandbox_config(self) -> SandboxConfig:
        return SandboxConfig(wall_timeout_s=self.sandbox_timeout_s, max_concurrent=self.sandbox_concurrency).validate()

    def problems(self) -> tuple[list[Calculation], list[Calculation]]:
        """(train, test): the generated calculations (split seed 0), or a math set as calculations without programs."""
        if self.data == "calculation":
            return make_split(seed=0, n_train=self.n_train, n_test=self.n_test)
        train, test = load_math_task(self.data, "", self.n_train, self.n_test)
        return [[Calculation(p.id, "math", p.question, p.answer, "") for p in split] for split in (train, test)]

    def start_weights(self, train: list[Calculation]) -> str | None:
        """The cold start: SFT on a demonstration of every training problem, `sft_direct_fraction` of
        them direct answers, laid out as the rollout lays out tokens, trained on the assistant tokens
        only (cached by the demonstrations' content)."""
        if self.sft_steps == 0:
            return None
        rng = random.Random(0)
        conversations = [(opening(c.question), demonstration(c, rng.random() >= self.sft_direct_fraction)) for c in train]
        digest = content_digest([o + d for o, d in conversations[::50]])
        spec = ColdStart(self.model, self.sft_steps, self.sft_batch_size, learning_rate=self.sft_learning_rate,
                         task=f"retool-{digest}-{len(conversations)}-direct{self.sft_direct_fraction}"
                              f"-schemas{int(self.tool_schemas)}")
        tools = (make_code_interpreter(),)  # only its schema is read: demonstrations carry their outputs
        return run_cold_start(spec, train, lambda tokenizer: demonstration_examples(
            tokenizer, self.tool_schemas, [(start, tools, demo) for start, demo in conversations],
            self.max_observation_tokens))


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=24, max_turns=2,
                  sft_steps=30, n_train=16, n_test=4, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 n_train=100_000, n_test=500, max_tokens=512, max_turns=6, max_tool_calls=4, max_trajectory_tokens=4096,
                 max_observation_tokens=512, tool_schemas=True, sft_steps=0, batch_prompts=8, group_size=8, steps=100),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if cfg.threads:
        configure(num_threads=cfg.threads)
    train, test = cfg.problems()
    budgets, results = cfg.budgets(), []
    code_interpreter = make_code_interpreter(Sandbox(cfg.sandbox_config()), on_result=results.append)
    service = ServiceClient(run_name=run.name, checkpoint_dir=str(run.checkpoints_dir))
    start, client, ref, start_path = policy.start_client(cfg, run, service, train, resume)
    chat = ChatTokens(client.get_tokenizer(), cfg.tool_schemas)

    def envs(problems: list[Calculation], copies: int = 1) -> list[list[CodeEnv]]:
        return [[CodeEnv(c.question, c.answer, code_interpreter) for _ in range(copies)] for c in problems]

    def held_out(step: int, sampler, name: str | None = None) -> dict[str, float]:
        items = [{"question": c.question, "answer": c.answer, "kind": c.kind} for c in test]
        results.clear()
        out = evaluate_agent(run, step, sampler, [g[0] for g in envs(test)], [c.kind for c in test], chat, budgets,
                             items, main="correct", name=name)
        return {**out, **{f"eval/{k}": v for k, v in sandbox_metrics(results).items()}}

    if start == 0:
        run.log_metrics(0, held_out(0, client.save_weights_and_get_sampling_client()))
    session = policy.Session(train, test, start, client, ref, start_path, chat.tokenizer, [chat.tokenizer.eos_token],
                             held_out, Tracker.create(cfg.tracker, run))
    with progress(cfg.steps, "retool", initial=start) as bar:
        for step in range(start, cfg.steps):
            t0 = time.perf_counter()
            # 1. play a group of episodes per problem from the current weights; the code runs in the sandbox
            sampler = client.save_weights_and_get_sampling_client()
            problems = policy.step_problems(train, step, cfg.batch_prompts)
            results.clear()
            groups = rollout_groups(sampler, envs(problems, cfg.group_size), chat, budgets, cfg.temperature,
                                    policy.episode_seed(cfg, step))
            t_sample = time.perf_counter() - t0

            # 2. group-relative advantage of each episode's outcome reward (degenerate groups come back all zero)
            frac_degenerate = policy.episode_advantages(groups, cfg.adv_scale)

            # 3. one policy-gradient step on the policy's tokens; interpreter output is context, never trained
            kept = policy.trained_episodes(groups)
            lr = cfg.learning_rate_at(step)
            metrics = policy.policy_step(client, cfg, kept, cfg.batch_prompts * cfg.group_size, lr, ref) if kept else {}
            t_total = time.perf_counter() - t0

            # 4. log: episodes (tool-call rate, stops), sandbox outcomes and latency, what was trained
            metrics.update(policy.episode_metrics(groups, kept, frac_degenerate, t_sample, t_total))
            metrics.update(sandbox_metrics(results))
            rows = [{"group": i, "question": c.question, "answer": c.answer, "kind": c.kind, **t.to_json()}
                    for i, (c, g) in enumerate(zip(problems, groups)) for t in g]
            policy.end_step(cfg, run, session, step + 1, metrics, rows)
            bar.update()
            bar.set_metrics({"reward": metrics["reward/mean"], "tool": 1 - metrics["rollout/no_tool_rate"]})
    policy.finish_episodes(cfg, run, session, f"ReTool on {cfg.data}, {cfg.model}", SUMMARY_KEYS)
    return run
