"""Does an exported run answer held-out prompts as `arl` does? (issue 21)

    python scripts/check_export.py runs/grpo/NAME [--n 50] [--max-tokens 40]

Exports the run's newest checkpoint (`arl export`) to a temporary folder, then greedily answers the first
N held-out test problems of the run's own task twice: with the engine's sampler on the checkpoint
(temperature 0) and with `transformers` alone on the export (`generate(do_sample=False)`, in a child
process that never imports arl), on the same prompt tokens (the chat template applied by the engine).
Prints how many answers are token-for-token identical. Only for chapters whose config has `math_task()` (grpo, dapo, gspo, ...).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import arl
from arl.export import export
from arl.recipes import load

CHILD = textwrap.dedent("""
    import json, sys
    import torch
    from transformers import AutoModelForCausalLM
    folder, prompts, max_tokens, eos = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3]), json.loads(sys.argv[4])
    model = AutoModelForCausalLM.from_pretrained(folder, dtype=torch.float32).eval()
    out = []
    with torch.no_grad():
        for ids in prompts:
            x = torch.tensor([ids])
            y = model.generate(x, max_new_tokens=max_tokens, do_sample=False, eos_token_id=eos, pad_token_id=eos[0])
            out.append(y[0, len(ids):].tolist())
    print(json.dumps(out))
""")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("run", type=Path, help="a finished run folder (runs/grpo/NAME)")
    ap.add_argument("--n", type=int, default=50, help="held-out problems to answer (default 50)")
    ap.add_argument("--max-tokens", type=int, default=None, help="new tokens per answer (default: the run's max_tokens)")
    args = ap.parse_args()

    saved = json.loads((args.run / "config.json").read_text())
    chapter = json.loads((args.run / "run.json").read_text())["chapter"]
    recipe = load(chapter)
    names = {f.name for f in dataclasses.fields(recipe.Config)}
    cfg = recipe.Config(**{k: v for k, v in saved.items() if k in names})
    task = cfg.math_task()
    max_tokens = args.max_tokens or cfg.max_tokens

    with tempfile.TemporaryDirectory() as tmp:
        exported = export(str(args.run), str(Path(tmp) / "export"), merge=True)
        sampler = arl.ServiceClient().create_sampling_client(model_path=str(exported.checkpoint))
        tok = sampler.get_tokenizer()
        prompts = [task.prompt(tok, p) for p in task.test[: args.n]]
        params = arl.SamplingParams(max_tokens=max_tokens, temperature=0.0, stop=[tok.eos_token])
        ours = [sampler.sample(arl.ModelInput.from_ints(p), 1, params).result().sequences[0] for p in prompts]
        child = subprocess.run([sys.executable, "-c", CHILD, str(exported.folder), json.dumps(prompts), str(max_tokens),
                                json.dumps([tok.eos_token_id])], capture_output=True, text=True, check=True)
        theirs = json.loads(child.stdout.strip().splitlines()[-1])

    same = sum(s.tokens == t for s, t in zip(ours, theirs))
    print(f"{args.run}: {exported.form} export of {exported.checkpoint}")
    print(f"held-out problems answered identically (greedy, {max_tokens} new tokens): {same} / {len(prompts)}")
    for p, s, t in list(zip(task.test, ours, theirs))[:3]:
        print(f"  {p.question[:60]!r}: arl {tok.decode(s.tokens)!r} | transformers {tok.decode(t)!r}")
    return 0 if same == len(prompts) else 1


if __name__ == "__main__":
    sys.exit(main())
