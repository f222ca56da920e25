"""Tinker 0.38 fidelity of the in-process client: a script written for `tinker` runs with
`import arl as tinker`, and so do the cookbook's minimal loops (`rl_loop`, `sl_loop`) with `tinker`
aliased to `arl` in `sys.modules`."""

import asyncio
import json
import os
import subprocess
import sys
import uuid

import numpy as np
import pytest

import arl as tinker
from arl import checkpoints
from arl.types.tensor_data import TensorData
from conftest import TINY


@pytest.fixture(scope="module")
def service():
    return tinker.ServiceClient(run_name=f"fidelity-{uuid.uuid4().hex[:8]}")


@pytest.fixture(scope="module")
def client(service):
    return service.create_lora_training_client(base_model=TINY, rank=8, seed=0).result()


def _group(client, n=4):
    tok = client.get_tokenizer()
    prompt = tinker.ModelInput.from_ints(tok.encode("Q: 2+2= A:", add_special_tokens=False))
    sampler = client.save_weights_and_get_sampling_client(record_stability_info=True).result()
    params = tinker.types.SamplingParams(max_tokens=6, seed=1, stop=[])
    return prompt, sampler.sample(prompt=prompt, num_samples=n, sampling_params=params).result()


def _datum(prompt, seq, advantage, with_mask=False):
    """The cookbook rl_loop's datum: prompt + all but the last sampled token, targets shifted by one."""
    ob_len = prompt.length - 1
    model_input = prompt.append(tinker.types.EncodedTextChunk(tokens=seq.tokens[:-1]))
    inputs = {
        "target_tokens": TensorData.from_numpy(np.array([0] * ob_len + seq.tokens)),
        "logprobs": [0.0] * ob_len + seq.logprobs,
        "advantages": [0.0] * ob_len + [advantage] * len(seq.tokens),
    }
    if with_mask:
        inputs["sequence_ratio_mask"] = [0.0] * ob_len + [1.0] * len(seq.tokens)
    return tinker.types.Datum(model_input=model_input, loss_fn_inputs=inputs)


def test_client_creation_returns_the_client_and_a_future_of_it(service, client):
    assert isinstance(client, tinker.TrainingClient)
    assert client.result() is client and client.done()
    assert asyncio.run(_awaited(client)) is client
    sampler = service.create_sampling_client(base_model=TINY).result()
    assert isinstance(sampler, tinker.SamplingClient) and asyncio.run(_awaited(sampler)) is sampler


async def _awaited(x):
    return await x


def test_sequence_ids_gspo_and_stable_reinforce(client):
    prompt, res = _group(client)
    ids = [s.sequence_id for s in res.sequences]
    assert all(isinstance(i, str) and i for i in ids) and len(set(ids)) == len(ids)
    assert all(s.stop_reason in ("stop", "length") for s in res.sequences)
    advantages = [1.0, -1.0, 0.5, -0.5]

    gspo = [_datum(prompt, s, a, with_mask=True) for s, a in zip(res.sequences, advantages)]
    out = client.forward_backward(gspo, loss_fn="gspo", loss_fn_config={"clip_high_threshold": 1.01}).result()
    # on-policy every sequence ratio is 1 (the sampler and the trainer agree), so nothing is clipped
    assert out.metrics["gspo/seq_ratio_mean"] == pytest.approx(1.0, abs=1e-4)
    assert out.metrics["gspo/clip_frac_mean"] == 0.0

    stable = []
    for s, a in zip(res.sequences, advantages):
        d = _datum(prompt, s, a)
        stable.append(d.with_provenance(
            model_input=[tinker.PromptProvenanceSpan(sequence_id=s.sequence_id, length=prompt.length),
                         tinker.SampledProvenanceSpan(sequence_id=s.sequence_id, length=len(s.tokens) - 1)],
            loss_fn_inputs=[tinker.types.PromptProvenanceSpan(sequence_id=s.sequence_id, offset=1, length=prompt.length - 1),
                            tinker.types.SampledProvenanceSpan(sequence_id=s.sequence_id, length=len(s.tokens))],
        ))
    out = client.forward_backward(stable, loss_fn="stable_reinforce").result()
    assert out.metrics["tokens/active"] == sum(len(s.tokens) for s in res.sequences)
    client.optim_step(tinker.AdamParams(learning_rate=1e-3)).result()
    with pytest.raises(ValueError, match="with_provenance"):
        client.forward_backward([_datum(prompt, res.sequences[0], 1.0)], loss_fn="stable_reinforce")
    with pytest.raises(ValueError, match="tile it exactly"):
        stable[0].with_provenance(model_input=[tinker.PromptProvenanceSpan(sequence_id="x", length=1)],
                                  loss_fn_inputs=stable[0].loss_fn_input_spans)


def test_save_state_refuses_to_overwrite(client):
    first = client.save_state("fidelity-state").result().path
    with pytest.raises(tinker.ConflictError, match="overwrite=True"):
        client.save_state("fidelity-state")
    assert client.save_state("fidelity-state", overwrite=True).result().path == first
    # Tinker's positional order is create_sampling_client(model_path, base_model)
    assert tinker.ServiceClient().create_sampling_client(first).result().model_path == first


def test_rest_client_lists_and_deletes_checkpoints(service, client):
    client.save_weights_for_sampler("fidelity-sampler").result()
    rest = service.create_rest_client()
    ids = [c.checkpoint_id for c in rest.list_checkpoints(client.run).result().checkpoints]
    assert "sampler_weights/fidelity-sampler" in ids
    run = rest.get_training_run(client.run).result()
    assert run.base_model == TINY and run.is_lora and run.lora_rank == 8
    assert client.run in [r.training_run_id for r in rest.list_training_runs(limit=1000).result().training_runs]
    rest.delete_checkpoint(client.run, "sampler_weights/fidelity-sampler").result()
    ids = [c.checkpoint_id for c in rest.list_checkpoints(client.run).result().checkpoints]
    assert "sampler_weights/fidelity-sampler" not in ids
    with pytest.raises(tinker.NotFoundError):
        rest.delete_checkpoint(client.run, "sampler_weights/fidelity-sampler")


COOKBOOK_DRIVER = """
import sys

import datasets

import arl
import arl.types.tensor_data

sys.modules.update({"tinker": arl, "tinker.types": arl.types, "tinker.types.tensor_data": arl.types.tensor_data})

from tinker_cookbook import model_info, tokenizer_utils
from tinker_cookbook.recipes import rl_loop, sl_loop

MODEL, out = sys.argv[1], sys.argv[2]
# stand-ins for the outside world only, the loops themselves run unmodified: the hub's datasets,
# the hub's tokenizer (through the cookbook's own registry) and its model table's renderer choice
LOCAL = {
    "openai/gsm8k": {"question": [f"What is {a} + {a}?" for a in range(4)],
                     "answer": [f"{a} + {a} = {2 * a}\\n#### {2 * a}" for a in range(4)]},
    "HuggingFaceH4/no_robots": {"messages": [[{"role": "user", "content": f"Say {w}."},
                                              {"role": "assistant", "content": f"{w}!"}] for w in ("hi", "yes", "no", "ok")]},
}
hub_load = datasets.load_dataset
datasets.load_dataset = lambda path, *a, **k: (datasets.DatasetDict({"train": datasets.Dataset.from_dict(LOCAL[path])})
                                               if path in LOCAL else hub_load(path, *a, **k))
tokenizer_utils.register_tokenizer(MODEL, lambda: arl.models.load_model(MODEL).tokenizer)
recommended = model_info.get_recommended_renderer_name
model_info.get_recommended_renderer_name = lambda name: "qwen3" if name == MODEL else recommended(name)

rl = dict(log_path=f"{out}/rl", model_name=MODEL, batch_size=2, group_size=2, max_tokens=8, lora_rank=8,
          save_every=0, max_steps=2, ttl_seconds=None)
rl_loop.main(rl_loop.Config(**rl))
rl_loop.main(rl_loop.Config(**rl))  # resumes from its checkpoints.jsonl: nothing left to do but the final save
sl_loop.main(sl_loop.Config(log_path=f"{out}/sl", model_name=MODEL, batch_size=2, max_length=128, lora_rank=8,
                            save_every=0, max_steps=2, ttl_seconds=None))
"""


def test_cookbook_rl_loop_and_sl_loop_run_on_arl(tmp_path):
    """The cookbook's loops, tinker aliased to arl, 2 steps each on the tiny model. rl_loop uses its
    default loss (stable_reinforce, provenance, record_stability_info); the random tiny model earns no
    reward, so its groups have zero advantage and the loop skips the update (test above covers it)."""
    pytest.importorskip("tinker_cookbook")
    driver = tmp_path / "driver.py"
    driver.write_text(COOKBOOK_DRIVER)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1"}
    proc = subprocess.run([sys.executable, str(driver), TINY, str(tmp_path)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-4000:]
    for loop in ("rl", "sl"):
        steps = [json.loads(line) for line in (tmp_path / loop / "metrics.jsonl").read_text().splitlines()]
        assert [m["step"] for m in steps] == [0, 1]
        saved = [json.loads(line) for line in (tmp_path / loop / "checkpoints.jsonl").read_text().splitlines()]
        assert saved[-1]["name"] == "final" and saved[-1]["state_path"].startswith("arl://")
        checkpoints.read_meta(saved[-1]["sampler_path"])
    sl_steps = [json.loads(line) for line in (tmp_path / "sl" / "metrics.jsonl").read_text().splitlines()]
    assert all(np.isfinite(m["train_mean_nll"]) for m in sl_steps)
    assert "Resuming from batch 2" in proc.stderr + proc.stdout
