"""The `arl` command."""

from __future__ import annotations

import argparse
import sys
import time


def cmd_models(args) -> int:
    from . import models

    rows = models.list_models()
    print(f"{'name':40} {'kind':6} {'params':>10}  available")
    for m in rows:
        params = f"{m.params / 1e6:.2f}M" if m.params else "-"
        print(f"{m.name:40} {m.kind:6} {params:>10}  {'yes' if m.available else 'no: ' + m.how_to_get}")
    print("\nAny local Hugging Face model folder (a path with config.json) works as base_model too.")
    return 0


def cmd_demo(args) -> int:
    """Sample, train a few supervised steps on one answer, sample again, and show what changed."""
    import arl
    from tqdm import tqdm

    service = arl.ServiceClient(run_name="demo")
    client = service.create_full_training_client(args.model, seed=0)
    tok = client.get_tokenizer()
    question, answer = "What is 2 + 3?", "\\boxed{5}"
    prompt = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                     tokenize=True,
                                     return_dict=False)
    target = tok.encode(answer, add_special_tokens=False) + [tok.eos_token_id]
    n = len(prompt) - 1
    datum = arl.Datum(model_input=arl.ModelInput.from_ints(prompt + target[:-1]),
                      loss_fn_inputs={"target_tokens": [0] * n + target, "weights": [0.0] * n + [1.0] * len(target)})
    params = arl.SamplingParams(max_tokens=12, seed=0, temperature=1.0)

    def show(title):
        sampler = client.save_weights_and_get_sampling_client()
        res = sampler.sample(arl.ModelInput.from_ints(prompt), 4, params).result()
        logp = client.forward([datum], "cross_entropy").result().metrics["loss:sum"]
        print(f"\n{title}: logp(answer) = {-logp:.3f}")
        for s in res.sequences:
            print(f"  {s.text!r}  [{s.stop_reason}]")
        return -logp

    print(f"model {args.model}; prompt: {question!r}; training target: {answer!r}")
    before = show("before training")
    t0 = time.perf_counter()
    for _ in tqdm(range(args.steps), desc="training", unit="step"):
        client.forward_backward([datum], "cross_entropy")
        client.optim_step(arl.AdamParams(learning_rate=args.lr)).result()
    elapsed = time.perf_counter() - t0
    after = show(f"after {args.steps} steps ({elapsed:.1f}s)")
    print(f"\nlogp(answer): {before:.3f} -> {after:.3f}; p(answer) x{2.718281828 ** (after - before):.3g}")
    print("usage:", client.get_usage())
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="arl", description="Agentic RL Lab: RL for LLMs and agents on a laptop CPU.")
    parser.add_argument("--threads", type=int, help="torch threads (default: ARL_NUM_THREADS or min(2, cores))")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("models", help="list the models the local engine can load")
    p.set_defaults(fn=cmd_models)
    p = sub.add_parser("demo", help="engine demo: sample, train a few steps, sample again")
    p.add_argument("--model", default="arl/tiny-qwen3-2m", help="base model (see `arl models`)")
    p.add_argument("--steps", type=int, default=30, help="supervised steps")
    p.add_argument("--lr", type=float, default=3e-3, help="AdamW learning rate")
    p.set_defaults(fn=cmd_demo)
    args = parser.parse_args(argv)
    if args.threads:
        from . import settings

        settings.configure(num_threads=args.threads)
    return args.fn(args)


if __name__ == "__main__":
    sys.exit(main())
