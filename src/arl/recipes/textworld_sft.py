"""The TextWorld agent's control: continue the cold start's SFT on the same walkthroughs, for the RL
run's wall time, and evaluate with the same held-out protocol (the same games, budgets and charges).

If continued SFT for the GRPO run's wall time wins as many held-out games, the reward added nothing the
walkthroughs did not already carry. Loss: token-mean cross entropy over the assistant's `act` calls
(the game's answers and the template are context with weight 0), at the cold start's learning rate,
from the cold start's last stage (its weights and optimizer state).

    arl run textworld-sft --preset mini time_budget_s=120
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from ..rl.config import AgentConfig, RunConfig, defaults
from ..rl.control import ContinuedSFT, SFTLoop, finish_control
from ..rl.games import SUMMARY_KEYS, GamesConfig, games_task
from ..rl.session import service
from ..rollout import sft_datum
from ..track import RunDir


@defaults(max_trajectory_tokens=1024, sft_steps=300, batch_size=16, eval_every=1000)
@dataclass
class Config(RunConfig, AgentConfig, GamesConfig, ContinuedSFT):
    """The games, the episodes' budgets, the cold start it continues (the TextWorld chapter's), and how long
    it trains."""


PRESETS = {
    "smoke": dict(model="arl/tiny-qwen3-0.5m", time_budget_s=0, steps=2, batch_size=4, max_tokens=32, max_turns=2,
                  sft_steps=60, sft_stages=1, n_train=4, n_test=2, max_rooms=1, n_objects=3, max_quest_length=2,
                  eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the SFT control does not resume: it is minutes long, start it again")
    svc = service(cfg, run)
    task = games_task(cfg, *cfg.splits())
    client = svc.create_training_client_from_state_with_optimizer(task.start_weights())
    tok = client.get_tokenizer()
    adam, rng = cfg.sft_adam(), random.Random(cfg.seed)
    examples = task.sft_examples(tok)
    loop = SFTLoop(cfg, run, lambda step: task.held_out(run, step, client.save_weights_and_get_sampling_client(), tok),
                   "textworld-sft")
    for _ in loop:  # from the cold start's weights and optimizer state, until the budget is spent
        demos = rng.sample(examples, min(cfg.batch_size, len(examples)))
        # token-mean cross entropy over the act calls (mask 1); the game's answers and the template weigh 0
        n_tokens = sum(sum(mask) for _, _, mask in demos)
        datums = [sft_datum(prompt, tokens, [m / n_tokens for m in mask]) for prompt, tokens, mask in demos]
        fb = client.forward_backward(datums, "cross_entropy")
        client.optim_step(adam).result()
        loop.end_step(fb.result(), len(datums))
    finish_control(run, f"TextWorld SFT control on generated games, {cfg.model}", SUMMARY_KEYS, loop.steps,
                   loop.trained_s, asdict(cfg))
    return run
