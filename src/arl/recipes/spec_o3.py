"""Spec-o3: vet a spectrum for one rare class, zooming with a tool that returns images; SFT on
tool-using demonstrations, then multi-turn GRPO (the reference lab's LAB 15, after Jia et al. 2026,
"Spec-o3", arXiv 2601.06498).

Each question is one episode of the `spec-o3` environment (`arl.envs.spec_o3`): the opening turn holds
the full spectrum as an image and the question with its guidance; the model may call
`spectral_visualization_tool(wavelength_range)`, which corrects the spectrum for redshift and returns
the rest-frame window as a new image in the trajectory (interleaved multimodal chain of thought); a
turn without a call is the answer `<answer>\\boxed{YES|NO}</answer>`. Reward 1[correct] - 0.2 *
1[bad format]; advantage (r - mean) / std over the group (the reference lab's, `adv_scale=std`); the
`ppo` loss, clip [0.8, 1.2]. Only the policy's tokens are trained: the images (prompt and tool
observations), the tool's text and the template are context with weight 0. Held out: accuracy, format,
and the reference lab's headline, the macro-F1 (mean positive-class F1 over the tasks), per task too.

The cold start is SFT on one demonstration per training question (`arl.data.spectra.demonstration`:
a sentence, a zoom near the deciding window, the rendered image, what it shows, the answer), images
and tool output masked. `tool=false` is the control: the same questions and full image, no tool
offered, a cold start on answers without the zoom.

    arl run spec-o3 --preset mini [tool=false] [seed=1]
    arl show runs/spec-o3/<name>            # the trajectories with their images, token by token
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass

from .. import models
from ..coldstart import content_digest
from ..config import comma_list, require_positive
from ..data import spectra
from ..envs import format_tool_call
from ..envs.spec_o3 import SpecEnv
from ..eval.stats import macro_f1
from ..rl import batch, update
from ..rl.config import AgentConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults, objective
from ..rl.session import finish, open_session
from ..rl.task import EnvTask
from ..rollout import request_seed, rollout_groups, trajectory_datum
from ..track import RunDir

SUMMARY_KEYS = ("macro_f1", "correct", "answered", "tool_calls", "no_tool_rate", "turns")


@defaults(model="arl/tiny-qwen2-vl-3m", group_size=8, batch_prompts=8, max_tokens=96, max_turns=3, max_tool_calls=2,
          max_trajectory_tokens=512, loss_fn="ppo", adv_scale="std", learning_rate=1e-4, sft_steps=600,
          sft_learning_rate=2e-3, steps=100, eval_every=20)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, LossConfig, AgentConfig, SamplingConfig):
    """Spec-o3's fields: the questions and their splits, whether the tool is offered (the chapter's
    control), the rollout budgets and the cold start, and the policy-update ones it shares with GRPO."""

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
        if self.eval_split not in ("test", "dev"):
            raise ValueError(f"eval_split={self.eval_split!r}: use test or dev")
        self.task_list()

    def task_list(self) -> list[str]:
        return comma_list("tasks", self.tasks, spectra.TASKS)


PRESETS = {
    "smoke": dict(steps=2, batch_prompts=2, group_size=4, sft_steps=80, sft_batch_size=4, n_train=5, n_dev=5, n_test=5,
                  eval_every=1, save_every=1),
    "mini": {},
    # the reference lab's budgets on a real VLM with LoRA (not run here: it needs a GPU)
    "full": dict(model="Qwen/Qwen2.5-VL-3B-Instruct", lora_rank=32, learning_rate=1e-6, sft_steps=0, tool_schemas=True,
                 max_tokens=2048, max_turns=8, max_tool_calls=7, max_trajectory_tokens=16384, max_observation_tokens=512),
}


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


def make_task(cfg: Config) -> EnvTask:
    """The generated questions (split seed 0) as `spec-o3` episodes; the cold start on their demonstrations."""
    train, dev, test = spectra.make_split(cfg.n_train, cfg.n_dev, cfg.n_test, tasks=cfg.task_list())
    processor = models.load_image_processor(cfg.model)

    def cold_start() -> str | None:
        envs = [SpecEnv(q, cfg.tool) for q in train]
        conversations = [(e.initial_messages(), e.tools, demonstration(q, cfg.tool)) for q, e in zip(train, envs)]
        shown = [[q.question_text(), q.answer, str(d[-1]["content"])] for q, (_, _, d) in zip(train[::50], conversations[::50])]
        return cfg.demonstration_cold_start(f"spec-o3-{content_digest(shown)}-{len(train)}-tool{int(cfg.tool)}"
                                            f"-schemas{int(cfg.tool_schemas)}", conversations, processor=processor)

    def score(envs) -> dict[str, float]:
        overall, per_task = macro_f1([e.question.task for e in envs], [e.question.answer for e in envs],
                                     [e.prediction for e in envs])
        return {"macro_f1": overall, **{f"{task}/f1": v for task, v in per_task.items()}}

    return EnvTask(train, test if cfg.eval_split == "test" else dev, lambda q: SpecEnv(q, cfg.tool), cfg.budgets(),
                   cfg.tool_schemas, describe=lambda q: {"question": q.question_text(), "answer": q.answer, "task": q.task,
                                                         "object": q.spectrum.id},
                   tag=lambda q: q.task, summary_keys=SUMMARY_KEYS, cold_start=cold_start, processor=processor, score=score)


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = make_task(cfg)
    session = open_session(cfg, run, resume, task)
    client, chat, loss = session.client, task.chat(session.tokenizer), objective(cfg)
    for step in session.steps("spec-o3", shown=("reward/mean", "rollout/correct")):
        t0, stats = time.perf_counter(), update.StepStats(loss)
        # 1. play a group of episodes per question from the current weights; each zoom renders a new image
        questions = batch.step_items(task.train, step, cfg.batch_prompts)
        groups = rollout_groups(client.save_weights_and_get_sampling_client(), task.envs(questions, cfg.group_size), chat,
                                task.budgets, cfg.temperature, request_seed(cfg.seed, step))
        # 2. reward: 1[correct] - 0.2 * 1[bad format], from the environment, with the episodes' tool calls and stops
        metrics = {**batch.episode_metrics(groups, ("correct", "answered")), "time/sample": time.perf_counter() - t0}
        # 3. group-relative advantage, scaled by the group's std (adv_scale), and the episodes it trains
        adv_BG, kept = batch.episode_advantages(groups, cfg.adv_scale)

        # 4. datums: the policy's tokens carry the advantage; the images and the tool's output are context
        # (weight 0), each image on its placeholder positions; 5. the update
        for mb in update.minibatches(kept, loss, cfg.batch_prompts * cfg.group_size, cfg.minibatches):
            datums = [trajectory_datum(r.prompt, r.tokens, r.mask_T(), r.logprobs, a, r.images, r.image_pad_id)
                      for r, a in zip(mb.rollouts, mb.advantages)]
            fb = client.forward_backward_custom(datums, mb.loss) if mb.loss else client.forward_backward(datums, *loss.builtin)
            stats.add(mb, fb.result(), client.optim_step(cfg.adam(step)).result())

        # 6. log: per-task correctness of the step's episodes, what was trained and what was context; the rows
        # name their images (stored once in the run folder) for `arl show`
        metrics.update(batch.tagged_metrics(groups, [q.task for q in questions], "correct"))
        trained = batch.trained_metrics(kept, metrics["time/sample"], time.perf_counter() - t0)
        session.end_step(step + 1, {**metrics, **stats.metrics(), **trained},
                         task.rows(questions, groups, adv_BG, run.save_image))
    finish(session, f"Spec-o3 ({'tool' if cfg.tool else 'no tool'}) on generated spectra, {cfg.model}", asdict(cfg))
    return run


def same_update(cfg_a: Config, cfg_b: Config) -> bool:
    """Whether two configs make the same update (`update.same_update` of `objective`)."""
    return update.same_update(cfg_a, cfg_b, objective)
