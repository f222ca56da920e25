"""Probe behind Spec-o3's rendering: can the tiny VLM learn YES/NO from a zoomed window alone?

SFT from the untrained `arl/tiny-qwen2-vl-3m` on (window image + the task's code) -> YES/NO, no tool and
no demonstration text, so that only the image can decide; dev accuracy per task (40 questions each,
greedy) every 100 steps. Compares the curve drawn as a 2-px line (`--line`) with the filled silhouette
that `arl.data.spectra.render` draws, and the deciding window (`--half 0`) with a narrower one centred
on the deciding feature (`--half 30`: +-30 A).

    .venv/bin/python scripts/spec_zoom_probe.py [--line] [--half 0] [--steps 400]

Measured on 2 cores (seed 7 questions, 400 per task, 40 dev per task; one thread, beside other work):
`--line`, either window: 50% on every task at steps 100-400 (one constant answer); filled (the default),
deciding window: step 100 cv 45, cc 90, ss 97.5, gm 62.5, wd 92.5; step 400 cv 100, cc 100, ss 100,
gm 62.5, wd 95.
"""

from __future__ import annotations

import argparse
import random
import time

from arl import models
from arl.client import ServiceClient
from arl.coldstart import encode_chat
from arl.data import spectra
from arl.models.images import image_chunk, split_at_image_pads
from arl.rollout import sft_datum
from arl.settings import configure
from arl.types import AdamParams, SamplingParams

MODEL = "arl/tiny-qwen2-vl-3m"
CENTRE = {"cv": 4686.0, "wd": 4340.5, "cc": 5165.0, "ss": 6345.0, "gm": 8188.0}
"""The deciding feature's rest wavelength per task (He II, H-gamma, the C2 head, a ZrO head, Na I)."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", default=",".join(spectra.TASKS))
    parser.add_argument("--half", type=float, default=0.0, help="window half-width (A); 0 = the deciding window")
    parser.add_argument("--line", action="store_true", help="draw the curve as a 2-px line, not filled")
    parser.add_argument("--steps", type=int, default=400)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    configure(num_threads=args.threads)
    tasks = args.tasks.split(",")
    train, dev, _ = spectra.make_split(400 * len(tasks), 40 * len(tasks), 5, seed=7, tasks=tasks)
    client = ServiceClient(run_name="spec-zoom-probe").create_full_training_client(MODEL, seed=0)
    tok, processor = client.get_tokenizer(), models.load_image_processor(MODEL)
    pad = tok.convert_tokens_to_ids("<|image_pad|>")

    def prompt(q: spectra.Question):
        lo, hi = q.deciding_window if args.half <= 0 else (CENTRE[q.task] - args.half, CENTRE[q.task] + args.half)
        png = spectra.render(q.spectrum.rest_wave(), q.spectrum.flux, lo, hi, spectra.ZOOM_SIZE, fill=not args.line)
        ids = encode_chat(tok, [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": f"{q.task}?"}]}])
        return split_at_image_pads(ids, [image_chunk(png, processor)], pad)

    examples = [(prompt(q), tok.encode(q.answer, add_special_tokens=False) + [tok.eos_token_id]) for q in train]
    held_out = [(prompt(q), q) for q in dev]
    adam = AdamParams(learning_rate=2e-3, weight_decay=0.0, grad_clip_norm=1.0)
    rng, t0 = random.Random(0), time.time()
    for step in range(1, args.steps + 1):
        batch = rng.sample(examples, 32)
        n_tokens = sum(len(c) for _, c in batch)
        client.forward_backward([sft_datum(p, c, 1 / n_tokens) for p, c in batch], "cross_entropy").result()
        client.optim_step(adam).result()
        if step % 100 == 0:
            sampler = client.save_weights_and_get_sampling_client()
            futures = [sampler.sample(p, 1, SamplingParams(max_tokens=3, temperature=0.0)) for p, _ in held_out]
            said = [tok.decode(f.result().sequences[0].tokens).strip() for f in futures]
            accuracy = {t: 100 * sum(s.startswith(q.answer) for s, (_, q) in zip(said, held_out) if q.task == t)
                        / sum(q.task == t for _, q in held_out) for t in tasks}
            print(f"step {step} ({time.time() - t0:.0f} s): " + ", ".join(f"{t} {a:.1f}" for t, a in accuracy.items()),
                  flush=True)


if __name__ == "__main__":
    main()
