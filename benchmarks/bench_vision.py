"""Image-prompt sampling speed: our SamplingClient against `transformers` `generate`, on the same tiny
vision-language model (arl/tiny-qwen2-vl-3m, Qwen2-VL), the same image prompts, the same number of
samples and exactly the same number of new tokens.

    python benchmarks/bench_vision.py [--threads 2] [--repeats 5]

The default batch is one Vision GRPO step: 8 figure prompts (a 112x112 image, 16 image positions,
and the question with its options through the chat template), a group of 8 samples each, 24 new
tokens per sample. `generate` gets the prompts left-padded with their pixel patches, patch grids and
token types, `num_return_sequences=8`, `do_sample=True`, `min_new_tokens = max_new_tokens`. Both run
on the engine thread and take turns round by round (bench_engine.py says why).
"""

from __future__ import annotations

import argparse
import asyncio
import io
import json
import statistics
import sys
from pathlib import Path

import torch
from PIL import Image, ImageDraw

import arl
from arl import models, settings
from arl.backend.local.engine import ENGINE
from arl.models.images import image_chunk, split_at_image_pads

sys.path.insert(0, str(Path(__file__).parent))
from bench_engine import cpu_busy_snapshot, other_cores_busy, timed_rounds  # noqa: E402

MODEL = "arl/tiny-qwen2-vl-3m"
COLOURS = ("red", "green", "blue", "black")


def figure(i: int) -> bytes:
    """A 112x112 figure: i % 4 + 1 dots in a colour, the kind of picture the chapter asks about."""
    image = Image.new("RGB", (112, 112), "white")
    draw = ImageDraw.Draw(image)
    for k in range(i % 4 + 1):
        x, y = 14 + 24 * k, 20 + 18 * ((i + k) % 4)
        draw.ellipse((x, y, x + 14, y + 14), fill=COLOURS[i % 4])
    buf = io.BytesIO()
    image.save(buf, format="PNG")
    return buf.getvalue()


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, default=settings.get().num_threads)
    ap.add_argument("--prompts", type=int, default=8)
    ap.add_argument("--samples", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=24)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--out", default="benchmarks/results/vision-sampling.json")
    args = ap.parse_args()
    arl.configure(num_threads=args.threads)
    start = cpu_busy_snapshot()

    loaded = ENGINE.call(models.load_model, MODEL)
    tok, lm, processor = loaded.tokenizer, loaded.model.eval(), models.load_image_processor(MODEL)
    pad_id = tok.convert_tokens_to_ids("<|image_pad|>")
    question = "How many dots are in the figure?\nA. 1\nB. 2\nC. 3\nD. 4\nAnswer with \\boxed{A}, \\boxed{B}, \\boxed{C} or \\boxed{D}."
    ids = tok.apply_chat_template([{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": question}]}],
                                  add_generation_prompt=True, tokenize=True, return_dict=False)
    pngs = [figure(i) for i in range(args.prompts)]
    prompts = [split_at_image_pads(ids, [image_chunk(p, processor)], pad_id) for p in pngs]
    n_new = args.prompts * args.samples * args.new_tokens

    sampler = arl.ServiceClient().create_sampling_client(base_model=MODEL)
    params = arl.SamplingParams(max_tokens=args.new_tokens, stop=[], seed=0)

    def ours():
        async def run():
            return await asyncio.gather(*[sampler.sample_async(p, args.samples, params) for p in prompts])
        res = asyncio.run(run())
        assert sum(len(s.tokens) for r in res for s in r.sequences) == n_new

    expanded = [loaded.images.expand(p) for p in prompts]
    width = max(len(e[0]) for e in expanded)
    pad = tok.pad_token_id
    input_ids = torch.tensor([[pad] * (width - len(e[0])) + e[0] for e in expanded])
    mask = torch.tensor([[0] * (width - len(e[0])) + [1] * len(e[0]) for e in expanded])
    types = torch.tensor([[0] * (width - len(e[1])) + e[1] for e in expanded])
    pixel_values, grid_thw = loaded.images.pixels([c for e in expanded for c in e[2]])

    def hf_generate():
        with torch.no_grad():
            return lm.generate(input_ids=input_ids, attention_mask=mask, pixel_values=pixel_values,
                               image_grid_thw=grid_thw, mm_token_type_ids=types, do_sample=True,
                               num_return_sequences=args.samples, max_new_tokens=args.new_tokens,
                               min_new_tokens=args.new_tokens, use_cache=True, pad_token_id=pad, temperature=1.0,
                               top_k=0, top_p=1.0)

    def hf():
        out = ENGINE.call(hf_generate)
        assert out.shape == (args.prompts * args.samples, width + args.new_tokens)

    rounds_ours, rounds_hf = timed_rounds([ours, hf], args.repeats)
    t_ours, t_hf = min(rounds_ours), min(rounds_hf)
    ratios = sorted(h / o for o, h in zip(rounds_ours, rounds_hf))
    result = {
        "model": MODEL, "params": sum(p.numel() for p in lm.parameters()), "threads": args.threads,
        "batch": f"{args.prompts} image prompts ({len(expanded[0][0])} positions, 16 of them image) x "
                 f"{args.samples} samples x {args.new_tokens} new tokens",
        "sample_tokens_per_s": round(n_new / t_ours, 1), "hf_generate_tokens_per_s": round(n_new / t_hf, 1),
        "sample_speedup_vs_hf": round(t_hf / t_ours, 2),
        "speedup_per_round": f"median {statistics.median(ratios):.2f}, range {ratios[0]:.2f}-{ratios[-1]:.2f}",
        "other_cores_busy": round(other_cores_busy(start), 2),
    }
    for key, value in result.items():
        print(f"{key:28} {value}")
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
