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

from .. import advantages
from ..coldstart import content_digest
from ..data import load_math_task
from ..data.calculation import Calculation, demonstration, make_split
from ..envs.retool import CodeEnv, opening
from ..rl import batch, update
from ..rl.config import AgentConfig, KLConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig
from ..rl.session import finish, open_session
from ..rl.task import EnvTask
from ..rollout import rollout_groups, trajectory_datum
from ..tools.sandbox import Sandbox, SandboxConfig, make_code_interpreter, sandbox_metrics
from ..track import RunDir, progress

SUMMARY_KEYS = ("correct", "printed_answer", "answered", "tool_calls", "no_tool_rate", "valid_tool_call_rate", "turns")


@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, KLConfig, LossConfig, SamplingConfig, AgentConfig):
    """ReTool's fields: the task, the sandbox, the rollout budgets, the cold start's mix, and the
    policy-update ones it shares with GRPO."""

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
    max_tool_calls: int | None = 2
    """Interpreter calls per episode."""
    max_trajectory_tokens: int = 320
    """Prompt, turns and observations of one episode."""
    sandbox_timeout_s: float = 5.0
    """Wall-clock seconds of one interpreter call (the sandbox kills it and everything it started)."""
    sandbox_concurrency: int = 2
    """Interpreter calls that run at once (one per core)."""
    sft_steps: int = 1500
    """Cold-start SFT steps on the demonstrations (cached across runs with the same settings): 400 teach
    the call format but not copying numbers into the code; after 1500 about 40% of the sampled programs
    print the right answer."""
    sft_direct_fraction: float = 0.5
    """Share of training problems demonstrated as a direct boxed answer without the tool."""
    steps: int = 100
    """Policy-update steps."""

    def validate(self) -> None:
        super().validate()
        self.sandbox_config()
        if not 0.0 <= self.sft_direct_fraction <= 1.0:
            raise ValueError(f"sft_direct_fraction={self.sft_direct_fraction}: a share in [0, 1]")
        if self.data != "calculation" and self.sft_steps > 0:
            raise ValueError(f"sft_steps={self.sft_steps}: {self.data!r} has no programs to demonstrate; set "
                             "sft_steps=0 (start from an instruction-tuned model) or data=calculation")

    def sandbox_config(self) -> SandboxConfig:
        return SandboxConfig(wall_timeout_s=self.sandbox_timeout_s, max_concurrent=self.sandbox_concurrency).validate()


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", steps=2, batch_prompts=2, group_size=4, max_tokens=24, max_turns=2,
                  sft_steps=30, n_train=16, n_test=4, eval_every=1, save_every=1),
    "mini": {},
    "full": dict(model="HuggingFaceTB/SmolLM2-135M-Instruct", lora_rank=32, learning_rate=4e-5, data="gsm8k/train.jsonl",
                 n_train=100_000, n_test=500, max_tokens=512, max_turns=6, max_tool_calls=4, max_trajectory_tokens=4096,
                 max_observation_tokens=512, tool_schemas=True, sft_steps=0, batch_prompts=8, group_size=8, steps=100),
}


def make_task(cfg: Config) -> EnvTask:
    """The calculations (split seed 0) as `retool` episodes whose code runs in one sandbox, or a math set
    as calculations without programs. The cold start: SFT on a demonstration of every training problem,
    `sft_direct_fraction` of them direct answers, the rest a call, its output and the boxed answer."""
    if cfg.data == "calculation":
        train, test = make_split(seed=0, n_train=cfg.n_train, n_test=cfg.n_test)
    else:
        train, test = ([Calculation(p.id, "math", p.question, p.answer, "") for p in split]
                       for split in load_math_task(cfg.data, "", cfg.n_train, cfg.n_test))
    results = []  # every sandbox call's outcome; the model sees only the text
    code_interpreter = make_code_interpreter(Sandbox(cfg.sandbox_config()), on_result=results.append)

    def drain() -> dict[str, float]:
        out = sandbox_metrics(results)
        results.clear()
        return out

    def cold_start() -> str | None:
        if cfg.sft_steps == 0:
            return None
        rng, tools = random.Random(0), (make_code_interpreter(),)  # only its schema is read: demonstrations carry outputs
        conversations = [(opening(c.question), tools, demonstration(c, rng.random() >= cfg.sft_direct_fraction)) for c in train]
        digest = content_digest([o + d for o, _, d in conversations[::50]])
        return cfg.demonstration_cold_start(f"retool-{digest}-{len(conversations)}-direct{cfg.sft_direct_fraction}"
                                            f"-schemas{int(cfg.tool_schemas)}", conversations)

    return EnvTask(train, test, lambda c: CodeEnv(c.question, c.answer, code_interpreter), cfg.budgets(), cfg.tool_schemas,
                   describe=lambda c: {"question": c.question, "answer": c.answer, "kind": c.kind}, tag=lambda c: c.kind,
                   summary_keys=SUMMARY_KEYS, cold_start=cold_start, tool_metrics=drain)


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = make_task(cfg)
    session = open_session(cfg, run, resume, task)
    client, chat = session.client, task.chat(session.tokenizer)
    loss = update.Objective(cfg.loss_fn, cfg.loss_config(), cfg.normalizer, cfg.max_tokens, cfg.kl_coef, cfg.kl_estimator)
    ref = session.reference() if cfg.kl_coef else None
    with progress(cfg.steps, "retool", initial=session.start) as bar:
        for step in range(session.start, cfg.steps):
            t0 = time.perf_counter()
            # 1. play a group of episodes per problem from the current weights; the code runs in the sandbox
            task.tool_metrics()
            problems = batch.step_items(task.train, step, cfg.batch_prompts)
            groups = rollout_groups(client.save_weights_and_get_sampling_client(), task.envs(problems, cfg.group_size), chat,
                                    task.budgets, cfg.temperature, batch.episode_seed(cfg.seed, step))
            sandbox = task.tool_metrics()  # this step's calls: ok, error, timeout, killed, latency
            t_sample = time.perf_counter() - t0

            # 2. reward: the outcome alone (the boxed answer, graded by the environment), 3. group advantage
            adv_BG, _ = advantages.batch_advantages(batch.episode_rewards(groups), scale=cfg.adv_scale)
            kept = batch.trained_episodes(groups, adv_BG)

            # 4. datums of the policy's tokens (interpreter output is context, never trained), 5. the update
            stats = update.StepStats(loss)
            for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches, ref):
                datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a) for r, a in zip(mb.rollouts, mb.advantages)]
                fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
                stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

            # 6. log: episodes (tool-call rate, stops), sandbox outcomes and latency, what was trained
            metrics = {**stats.metrics(), **batch.episode_metrics(groups, kept, t_sample, time.perf_counter() - t0), **sandbox}
            session.end_step(step + 1, metrics, task.rows(problems, groups, adv_BG))
            bar.update()
            bar.set_metrics({"reward": metrics["reward/mean"], "tool": 1 - metrics["rollout/no_tool_rate"]})
    finish(session, f"ReTool on {cfg.data}, {cfg.model}", asdict(cfg))
    return run
