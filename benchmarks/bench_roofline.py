"""Sampling against the machine's limit: tokens/s of our sampler and of `transformers` `generate`
across batch sizes and model sizes, each beside the limit of its configuration, all measured in one run.

The limit of one decode step of B sequences is the larger of two times, both from this run's own
measurements:

- compute: model FLOPs (2 x the matmul parameters per token, plus attention's 4 x layers x heads x
  head_dim x context per token) at the measured float32 matmul FLOP/s;
- memory: the bytes the step must read (every matmul weight once, each request's prompt keys/values
  once, each sequence's generated keys/values) at the read bandwidth measured on a buffer of the
  model's weight size, so a tiny model whose weights sit in the CPU's cache is held to the cache's
  bandwidth and SmolLM2-135M to the memory's.

The limit assumes a group's prompt cache is read once per step (what shared-prefix attention does);
`generate` reads it once per sample, so its fraction is of a limit it cannot reach by design.

Batches are GRPO-shaped: B = prompts x samples with 8 samples per prompt from B = 8 on (B < 8: one
prompt, B samples); B = 64 is one step of the mini chapters. Prompts are word problems through the
chat template (about 53 tokens), and every sequence gets exactly `--new-tokens` new tokens.

    python benchmarks/bench_roofline.py [--models arl/tiny-qwen3-2m ...] [--batches 1 2 4 ...]
        [--threads 2] [--png benchmarks/roofline.png]

The contenders take turns within each round (see bench_engine.py); the best round counts.
`other_cores_busy` as in bench_engine.py: read the numbers only when it is near 0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from pathlib import Path

import torch

import arl
from arl import models, settings
from arl.backend.local.engine import ENGINE

from bench_engine import cpu_busy_snapshot, matmul_flops, other_cores_busy, timed_rounds, word_problem_prompts

MODELS = ["arl/tiny-qwen3-0.5m", "arl/tiny-qwen3-2m", "arl/tiny-qwen3-5m", "arl/tiny-qwen3-10m",
          "HuggingFaceTB/SmolLM2-135M-Instruct"]
BATCHES = [1, 2, 4, 8, 16, 32, 64, 128]
GROUP = 8


def read_bandwidth(n_bytes: int, repeats: int = 5) -> float:
    """Bytes/s of summing a float32 buffer of `n_bytes` (at least 1 MiB): a read of every byte once."""
    x = torch.ones(max(n_bytes, 2**20) // 4)
    x.sum()
    best = min(_timed(x.sum) for _ in range(repeats))
    return x.numel() * 4 / best


def _timed(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def shape(batch: int) -> tuple[int, int]:
    """(prompts, samples per prompt) of a decode batch of `batch` sequences."""
    if batch < GROUP:
        return 1, batch
    return batch // GROUP, GROUP


def step_limit(model_info: dict, batch: int, prompt_len: int, new_tokens: int, flops: float, bandwidth: float) -> dict:
    """Seconds per decode step (mean over the new tokens) bound by compute and by memory."""
    prompts, _ = shape(batch)
    L, H, Hkv, D, elt = (model_info[k] for k in ("layers", "heads", "kv_heads", "head_dim", "bytes"))
    mean_generated = (new_tokens - 1) / 2
    context = prompt_len + mean_generated
    compute = batch * (2 * model_info["flop_params"] + 4 * L * H * D * context) / flops
    kv_bytes = 2 * L * Hkv * D * elt * (prompts * prompt_len + batch * mean_generated)
    memory = (model_info["flop_params"] * elt + kv_bytes) / bandwidth
    return {"compute_s": compute, "memory_s": memory, "limit_s": max(compute, memory),
            "bound": "compute" if compute >= memory else "memory"}


def describe(lm) -> dict:
    cfg = lm.config.get_text_config()
    n_embed = lm.get_input_embeddings().weight.numel()
    n_params = sum(p.numel() for p in lm.parameters())
    head = lm.get_output_embeddings().weight
    tied = head.data_ptr() == lm.get_input_embeddings().weight.data_ptr()
    return {"params": n_params, "flop_params": n_params - n_embed + head.numel() if tied else n_params - n_embed,
            "layers": cfg.num_hidden_layers, "heads": cfg.num_attention_heads, "kv_heads": cfg.num_key_value_heads,
            "head_dim": getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads,
            "bytes": head.element_size()}


def measure_model(name: str, batches: list[int], new_tokens: int, repeats: int, flops: float) -> list[dict]:
    loaded = ENGINE.call(models.load_model, name)
    tok, lm = loaded.tokenizer, loaded.model.eval()
    info = describe(lm)
    bandwidth = ENGINE.call(read_bandwidth, info["flop_params"] * info["bytes"])
    sampler = arl.ServiceClient().create_sampling_client(base_model=name)
    params = arl.SamplingParams(max_tokens=new_tokens, stop=[], seed=0)
    rows = []
    for batch in batches:
        n_prompts, n_samples = shape(batch)
        prompts = word_problem_prompts(tok, n_prompts)
        n_new = batch * new_tokens

        def ours():
            async def run():
                return await asyncio.gather(*[sampler.sample_async(arl.ModelInput.from_ints(p), n_samples, params)
                                              for p in prompts])
            res = asyncio.run(run())
            assert sum(len(s.tokens) for r in res for s in r.sequences) == n_new

        width = max(len(p) for p in prompts)
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        ids = torch.tensor([[pad] * (width - len(p)) + p for p in prompts])
        mask = torch.tensor([[0] * (width - len(p)) + [1] * len(p) for p in prompts])

        def hf_generate():
            with torch.no_grad():
                return lm.generate(input_ids=ids, attention_mask=mask, do_sample=True, num_return_sequences=n_samples,
                                   max_new_tokens=new_tokens, min_new_tokens=new_tokens, use_cache=True,
                                   pad_token_id=pad, temperature=1.0, top_k=0, top_p=1.0)

        def hf():
            out = ENGINE.call(hf_generate)
            assert out.shape == (batch, width + new_tokens)

        rounds_ours, rounds_hf = timed_rounds([ours, hf], repeats)
        ours_tps, hf_tps = n_new / min(rounds_ours), n_new / min(rounds_hf)
        limit = step_limit(info, batch, round(sum(map(len, prompts)) / len(prompts)), new_tokens, flops, bandwidth)
        limit_tps = batch / limit["limit_s"]
        rows.append({"model": name, "params": info["params"], "batch": batch, "prompts": n_prompts,
                     "samples": n_samples, "ours_tokens_per_s": round(ours_tps, 1),
                     "hf_tokens_per_s": round(hf_tps, 1), "speedup_vs_hf": round(ours_tps / hf_tps, 2),
                     "limit_tokens_per_s": round(limit_tps, 1), "bound": limit["bound"],
                     "ours_fraction_of_limit": round(ours_tps / limit_tps, 3),
                     "hf_fraction_of_limit": round(hf_tps / limit_tps, 3),
                     "read_gbytes_per_s": round(bandwidth / 1e9, 1)})
        print(" ".join(f"{k}={v}" for k, v in rows[-1].items() if k != "params"), flush=True)
    return rows


def plot(rows: list[dict], png: Path, flops: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(8, 5.5))
    names = list(dict.fromkeys(r["model"] for r in rows))
    colors = plt.cm.viridis([i / max(len(names) - 1, 1) for i in range(len(names))])
    for name, color in zip(names, colors):
        rs = [r for r in rows if r["model"] == name]
        xs = [r["batch"] for r in rs]
        label = f"{name.split('/')[-1]} ({rs[0]['params'] / 1e6:.1f}M)"
        ax.plot(xs, [r["ours_tokens_per_s"] for r in rs], "-o", color=color, label=f"ours, {label}")
        ax.plot(xs, [r["hf_tokens_per_s"] for r in rs], "--x", color=color, alpha=0.8)
        ax.plot(xs, [r["limit_tokens_per_s"] for r in rs], ":", color=color, alpha=0.8)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequences decoded per step (GRPO-shaped: 8 samples per prompt from 8 on)")
    ax.set_ylabel("new tokens / s")
    ax.set_title(f"sampling: ours (solid), HF generate (dashed), limit (dotted); matmul {flops / 1e9:.0f} GFLOP/s")
    ax.grid(True, which="both", alpha=0.3)
    from matplotlib.lines import Line2D

    styles = [Line2D([], [], color="gray", linestyle="--", marker="x", label="HF generate"),
              Line2D([], [], color="gray", linestyle=":", label="limit: max(compute, bytes read)")]
    ax.legend(handles=ax.get_legend_handles_labels()[0] + styles, fontsize=8, loc="lower right")
    fig.tight_layout()
    png.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(png, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=MODELS)
    ap.add_argument("--batches", nargs="+", type=int, default=BATCHES)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--threads", type=int, default=settings.get().num_threads)
    ap.add_argument("--out", default="benchmarks/results/roofline.json")
    ap.add_argument("--png", default="benchmarks/roofline.png")
    args = ap.parse_args()
    bad = [b for b in args.batches if b < 1 or (b >= GROUP and b % GROUP)]
    if bad:
        ap.error(f"--batches {bad}: a batch is 1-{GROUP - 1} (one prompt) or a multiple of {GROUP} (prompts x {GROUP})")
    arl.configure(num_threads=args.threads)
    start = cpu_busy_snapshot()
    flops = ENGINE.call(matmul_flops, args.threads)
    rows = [row for name in args.models for row in measure_model(name, args.batches, args.new_tokens, args.repeats, flops)]
    result = {"threads": args.threads, "new_tokens": args.new_tokens, "matmul_gflops": round(flops / 1e9, 1),
              "other_cores_busy": round(other_cores_busy(start), 2), "rows": rows}
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(result, indent=2))
    plot(rows, Path(args.png), flops)
    print(f"matmul {result['matmul_gflops']} GFLOP/s, other cores busy {result['other_cores_busy']}; {out}, {args.png}")


if __name__ == "__main__":
    main()
