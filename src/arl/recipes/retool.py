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
from dataclasses import asdict, dataclass

from ..coldstart import content_digest
from ..data import load_math_task
from ..config import check_eval_split
from ..data.calculation import Calculation, demonstration, make_dev, make_split
from ..envs.retool import CodeEnv, opening
from ..rl import batch, update
from ..rl.config import (AgentConfig, KLConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults,
                         objective)
from ..rl.session import finish, open_session
from ..rl.task import EnvTask
from ..rollout import request_seed, rollout_groups, trajectory_datum
from ..tools.sandbox import Sandbox, SandboxConfig, make_code_interpreter, sandbox_metrics
from ..track import RunDir

SUMMARY_KEYS = ("correct", "printed_answer", "answered", "tool_calls", "no_tool_rate", "valid_tool_call_rate", "turns")


@defaults(group_size=4, max_turns=3, max_tool_calls=2, max_trajectory_tokens=320, sft_steps=1500, steps=100)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, AgentConfig, SamplingConfig):
    """ReTool's fields: the task, the sandbox, the rollout budgets, the cold start's mix, and the
    policy-update ones it shares with GRPO. The cold start runs 1500 SFT steps: 400 teach the call format
    but not copying numbers into the code; after 1500 about 40% of the sampled programs print the right answer."""

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


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=24, max_turns=2,
                  sft_steps=30, n_train=16, n_test=4, eval_every=1, save_every=1),
    "mini": {},
    # GSM8K-style problems on SmolLM2 with LoRA, no cold start; the reference lab's budgets
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, sft_steps=0, steps=100,
                 data="gsm8k/train.jsonl", n_train=100_000, n_test=500, batch_prompts=8, group_size=8, tool_schemas=True,
                 max_tokens=512, max_turns=6, max_tool_calls=4, max_trajectory_tokens=4096, max_observation_tokens=512),
}


def make_task(cfg: Config, sandbox: Sandbox) -> EnvTask:
    """The calculations (split seed 0) as `retool` episodes whose code runs in `sandbox`, or a math set
    as calculations without programs. The cold start: SFT on a demonstration of every training problem,
    `sft_direct_fraction` of them direct answers, the rest a call, its output and the boxed answer."""
    splits = cfg.data_splits()
    train, test = splits["train"], splits[cfg.eval_split]
    results = []  # every sandbox call's outcome; the model sees only the text
    code_interpreter = make_code_interpreter(sandbox, on_result=results.append)

    def drain() -> dict[str, float]:
        out = sandbox_metrics(results)
        results.clear()
        return out

    def cold_start() -> str | None:
        if cfg.sft_steps == 0:
            return None
        rng, tools = random.Random(cfg.start_seed), (make_code_interpreter(),)  # only its schema is read: demonstrations carry outputs
        conversations = [(opening(c.question), tools, demonstration(c, rng.random() >= cfg.sft_direct_fraction)) for c in train]
        digest = content_digest([o + d for o, _, d in conversations[::50]])
        return cfg.demonstration_cold_start(f"retool-{digest}-{len(conversations)}-direct{cfg.sft_direct_fraction}"
                                            f"-schemas{int(cfg.tool_schemas)}", conversations)

    return EnvTask(train, test, lambda c: CodeEnv(c.question, c.answer, code_interpreter), cfg.budgets(), cfg.tool_schemas,
                   describe=lambda c: {"question": c.question, "answer": c.answer, "kind": c.kind}, tag=lambda c: c.kind,
                   summary_keys=SUMMARY_KEYS, cold_start=cold_start, tool_metrics=drain)


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = make_task(cfg, Sandbox(cfg.sandbox_config()))
    session = open_session(cfg, run, resume, task)
    client, chat, loss = session.client, task.chat(session.tokenizer), objective(cfg)
    ref = session.reference() if cfg.kl_coef else None
    for step in session.steps("retool", shown=("reward/mean", "rollout/correct")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. play a group of episodes per problem from the current weights; the code runs in the sandbox
        task.tool_metrics()
        problems = batch.step_items(task.train, step, cfg.batch_prompts)
        groups = rollout_groups(client.save_weights_and_get_sampling_client(), task.envs(problems, cfg.group_size), chat,
                                task.budgets, cfg.temperature, request_seed(cfg.seed, step))
        # 2. reward: the outcome alone (the boxed answer, graded by the environment), logged with the episodes'
        # tool calls and stops
        metrics = {**batch.episode_metrics(groups), "time/sample": time.perf_counter() - t0}
        # 3. group-relative advantage, and the episodes it trains (advantage not 0)
        adv_BG, kept = batch.episode_advantages(groups, cfg.adv_scale)

        # 4. datums of the policy's tokens (interpreter output is context, never trained), 5. the update
        for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches, ref):
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log: this step's sandbox calls (ok, error, timeout, killed, latency), what was trained and what was context
        metrics.update(task.tool_metrics())
        trained = batch.trained_metrics(kept, metrics["time/sample"], time.perf_counter() - t0)
        session.end_step(step + 1, {**metrics, **stats.metrics(), **trained}, task.rows(problems, groups, adv_BG))
    finish(session, f"ReTool on {cfg.data}, {cfg.model}", asdict(cfg))
    return run
