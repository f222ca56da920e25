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

from ..rl import batch, update
from ..rl.config import AgentConfig, LossConfig, OptimConfig, RunConfig, SamplingConfig, SessionConfig, defaults, objective
from ..rl.session import finish, open_session
from ..rl.spec import AGENT_DEFAULTS, SpecConfig, spec_task
from ..rollout import request_seed, rollout_groups, trajectory_datum
from ..track import RunDir


@defaults(**AGENT_DEFAULTS, group_size=8, batch_prompts=8, loss_fn="ppo", adv_scale="std", learning_rate=1e-4, steps=40,
          eval_every=20)
@dataclass
class Config(RunConfig, SessionConfig, OptimConfig, LossConfig, AgentConfig, SamplingConfig, SpecConfig):
    """Spec-o3's fields: the questions and their splits, whether the tool is offered (the chapter's
    control), the rollout budgets and the cold start, and the policy-update ones it shares with GRPO."""


PRESETS = {
    "smoke": dict(steps=2, batch_prompts=2, group_size=4, sft_steps=80, sft_batch_size=4, n_train=5, n_dev=5, n_test=5,
                  eval_every=1, save_every=1),
    "mini": {},
    # the reference lab's budgets on a real VLM with LoRA (not run here: it needs a GPU)
    "full": dict(model="Qwen/Qwen2.5-VL-3B-Instruct", lora_rank=32, learning_rate=1e-6, sft_steps=0, tool_schemas=True,
                 max_tokens=2048, max_turns=8, max_tool_calls=7, max_trajectory_tokens=16384, max_observation_tokens=512),
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    task = spec_task(cfg)
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
