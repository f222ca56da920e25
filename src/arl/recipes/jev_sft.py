"""Jev's control: keep training the cold start to write its answers out, for Jev's wall time, and read every
split the way such a model answers (each question after its own earlier answers).

Jev trains one position per question and reads every answer in one forward pass. The ordinary way is SFT
on the answers written out and reading them back as the model writes them. If that, continued for the
same wall time from the same cold start, is as accurate and as well calibrated, the markers bought speed
and not skill. Loss: token-mean cross entropy over the written answers (`arl.decide.written_example`), at
the cold start's learning rate, from its weights and optimizer state; the stages and T as in Jev.

    arl run jev-sft --preset mini time_budget_s=280
"""

from __future__ import annotations

import random
from dataclasses import asdict, dataclass

from ..decide import DecisionFormat, written_example
from ..rl.config import RunConfig, defaults
from ..rl.control import ContinuedSFT, SFTLoop
from ..rl.decisions import EVAL_SPLITS, DecisionConfig, finish_stages, read_splits
from ..rl.session import service
from ..rollout import sft_datum
from ..track import RunDir


@defaults(batch_size=16, eval_every=50)
@dataclass
class Config(RunConfig, DecisionConfig, ContinuedSFT):
    """The records, the cold start it continues (Jev's), and how long it trains."""


PRESETS = {
    "smoke": dict(time_budget_s=0, steps=2, batch_size=4, n_train=16, n_dev=4, n_calibration=6, n_test=4, n_hard=4,
                  sft_steps=2, eval_every=1),
    "mini": {},
}


def main(cfg: Config, run: RunDir, resume: bool = False) -> RunDir:
    if resume:
        raise ValueError("the SFT control does not resume: it is minutes long, start it again")
    svc = service(cfg, run)
    splits = cfg.data_splits()
    client = svc.create_training_client_from_state_with_optimizer(cfg.start_weights(splits["train"]))
    tok = client.get_tokenizer()
    fmt = DecisionFormat.for_tokenizer(tok)
    examples = [written_example(tok, fmt, r) for r in splits["train"]]

    def read(names=EVAL_SPLITS) -> tuple[dict[str, list], dict[str, float]]:
        """(candidate logprobs of every question of each split, eval/SPLIT/* metrics at T = 1), as written."""
        return read_splits(client.save_weights_and_get_sampling_client(), tok, fmt, splits, names, cfg.topk, written=True)

    base, _ = read()
    adam, rng = cfg.sft_adam(), random.Random(cfg.seed)
    loop = SFTLoop(cfg, run, lambda step: read(("dev",))[1], "jev-sft")
    for _ in loop:  # from the cold start's weights and optimizer state, until the budget is spent
        batch = rng.sample(examples, min(cfg.batch_size, len(examples)))
        n_tokens = sum(len(completion) for _, completion in batch)  # token mean over the written answers
        datums = [sft_datum(prompt, completion, 1.0 / n_tokens) for prompt, completion in batch]
        fb = client.forward_backward(datums, "cross_entropy")
        client.optim_step(adam).result()
        loop.end_step(fb.result(), len(datums))
    trained, final = read()
    finish_stages(run, None, splits, base, trained, loop.steps, final | {"time/trained": loop.trained_s},
                  f"Jev's SFT control on {cfg.model} (answers written out)", asdict(cfg))
    return run
