"""`arl serve` driven by the unmodified `tinker` SDK and tinker-cookbook's own loops (docs/serve.md).

One server (a subprocess, tests/serve_util.py) serves the whole module, float64 and single-threaded like
the smoke runs. The cookbook runs in a working folder that holds what it would fetch from the hub:
the tiny model under a name its model table knows (`Qwen/Qwen3-8B`, whose renderer `qwen3` reproduces
the tiny model's chat template) and the datasets under their hub names, which `datasets.load_dataset`
reads as local folders. Nothing is patched: the loops get their settings through their Config objects.
"""

from __future__ import annotations

import asyncio
import json
import math

import httpx
import pytest

pytest.importorskip("fastapi")
tinker = pytest.importorskip("tinker")
pytest.importorskip("tinker_cookbook")

import smoke
from conftest import TINY
from serve_util import serving
from tinker import types
from tinker.proto import tinker_public_pb2 as pb

MODEL = "Qwen/Qwen3-8B"
"""The tiny model's folder, named so the cookbook picks the `qwen3` renderer."""
QUESTION_SUFFIX = " Provide a numerical answer without units, written inside \\boxed{}."
RL_PREFIX = [  # rl_loop's few-shot turn, copied: the warm-up below trains on the exact prompt it builds
    {"role": "user", "content": "How many r's are in strawberry?" + QUESTION_SUFFIX},
    {"role": "assistant", "content": "Let's spell the word out and number all the letters: 1) s 2) t 3) r 4) a "
     "5) w 6) b 7) e 8) r 9) r 10) y. We have r's at positions 3, 8, and 9. \\boxed{3}"},
]


def write_jsonl(path, rows) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    from arl.models import model_dir

    d = tmp_path_factory.mktemp("serve")
    (d / "Qwen").mkdir()
    (d / MODEL).symlink_to(model_dir(TINY))
    gsm8k = d / "openai" / "gsm8k"
    write_jsonl(gsm8k / "main" / "train.jsonl", [{"question": "What is 1 + 2?", "answer": "1 + 2 = 3\n#### 3"}] * 4)
    (gsm8k / "README.md").write_text("---\nconfigs:\n- config_name: main\n  data_files:\n  - split: train\n"
                                     "    path: main/train.jsonl\n---\n")
    chats = [[{"role": "user", "content": f"Say {w}."}, {"role": "assistant", "content": f"{w}!"}]
             for w in ("hello", "yes", "no", "blue")]
    write_jsonl(d / "HuggingFaceH4" / "no_robots" / "train.jsonl", [{"messages": m} for m in chats])
    return d


@pytest.fixture(scope="module")
def url(workdir):
    with serving(workdir / "home", env=smoke.env(), cwd=workdir) as base_url:
        yield base_url


@pytest.fixture(scope="module", autouse=True)
def sdk_env(workdir):
    """The SDK's placeholder key, no telemetry, and no hub: everything comes from the working folder."""
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(workdir)
        for key, value in {"TINKER_API_KEY": "tml-local", "TINKER_TELEMETRY": "0", "HF_HUB_OFFLINE": "1",
                           "HF_DATASETS_OFFLINE": "1", "WANDB_MODE": "disabled"}.items():
            mp.setenv(key, value)
        yield


def datum(tokens: list[int], weights: list[float] | None = None) -> types.Datum:
    inputs = {"target_tokens": tokens[1:], "weights": weights or [1.0] * (len(tokens) - 1)}
    return types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs)


def metric_rows(log_path) -> list[dict]:
    return [json.loads(line) for line in (log_path / "metrics.jsonl").read_text().splitlines()]


# -- (a) the cookbook's loops, unchanged --------------------------------------------------------
def test_sl_loop_runs_unchanged(url, workdir):
    from tinker_cookbook.recipes import sl_loop

    log_path = workdir / "runs" / "sl"
    sl_loop.main(sl_loop.Config(base_url=url, log_path=str(log_path), model_name=MODEL, batch_size=2, max_steps=2,
                                lora_rank=8, learning_rate=1e-3, save_every=0, max_length=256))
    rows = metric_rows(log_path)
    assert [r["step"] for r in rows] == [0, 1]
    assert all(math.isfinite(r["train_mean_nll"]) and r["num_sequences"] == 2 for r in rows)
    final = json.loads((log_path / "checkpoints.jsonl").read_text().splitlines()[-1])
    assert final["state_path"].startswith("tinker://") and final["sampler_path"].startswith("tinker://")
    run_id = final["state_path"].split("/")[2]
    listed = tinker.RestClient(base_url=url).list_checkpoints(run_id).result().checkpoints
    assert {c.tinker_path for c in listed} == {final["state_path"], final["sampler_path"]}


@pytest.fixture(scope="module")
def warm_state(url, workdir):
    """A LoRA that answers rl_loop's question with \\boxed{3} or \\boxed{4} about half the time each, so that
    its groups have rewards that differ and the loop really trains (a random model never writes \\boxed)."""
    from tinker_cookbook import renderers
    from tinker_cookbook.tokenizer_utils import get_tokenizer

    tokenizer = get_tokenizer(MODEL)
    renderer = renderers.get_renderer("qwen3", tokenizer)
    prompt = renderer.build_generation_prompt([*RL_PREFIX, {"role": "user", "content": "What is 1 + 2?" + QUESTION_SUFFIX}])
    stop = renderer.get_stop_sequences()
    data = []
    for answer in ("3", "4"):
        target = tokenizer.encode(f"\\boxed{{{answer}}}", add_special_tokens=False) + stop
        tokens = prompt.to_ints() + target
        data.append(datum(tokens, [0.0] * (prompt.length - 1) + [1.0] * len(target)))
    with tinker.ServiceClient(base_url=url) as service:
        client = service.create_lora_training_client(base_model=MODEL, rank=32, seed=0).result()
        for _ in range(50):
            client.forward_backward(data, "cross_entropy")
            client.optim_step(types.AdamParams(learning_rate=3e-3))
        return client.save_state("warm").result().path


@pytest.mark.parametrize("loss_fn", [None, "importance_sampling"], ids=["default-stable_reinforce", "importance_sampling"])
def test_rl_loop_runs_unchanged(url, workdir, warm_state, loss_fn):
    """rl_loop resumes from the warm-up's state through its own checkpoints.jsonl (create-via-load), samples
    groups with sequence ids, and trains with its loss: by default stable_reinforce with provenance."""
    from tinker_cookbook.recipes import rl_loop

    log_path = workdir / "runs" / f"rl-{loss_fn}"
    write_jsonl(log_path / "checkpoints.jsonl", [{"name": "warm", "batch": 0, "state_path": warm_state}])
    options = {} if loss_fn is None else {"loss_fn": loss_fn}
    config = rl_loop.Config(base_url=url, log_path=str(log_path), model_name=MODEL, batch_size=2, group_size=8,
                            max_tokens=8, max_steps=2, save_every=0, learning_rate=1e-3, **options)
    assert config.loss_fn == (loss_fn or "stable_reinforce")
    rl_loop.main(config)
    rows = metric_rows(log_path)
    assert [r["step"] for r in rows] == [0, 1]
    assert all(0 < r["reward/total"] < 1 for r in rows), rows
    assert all(math.isfinite(r["optim/grad_norm"]) and r["optim/grad_norm"] > 0 for r in rows), "a step did not train"
    final = json.loads((log_path / "checkpoints.jsonl").read_text().splitlines()[-1])
    assert final["state_path"].endswith("/weights/final") and final["sampler_path"].endswith("/sampler_weights/final")


def test_every_builtin_loss_by_name(url):
    """Each of arl's losses through the SDK: finite `loss:sum` and metric keys the SDK's merger accepts."""
    client = tinker.ServiceClient(base_url=url).create_lora_training_client(base_model=TINY, rank=4).result()
    tokens = [3, 1, 4, 1, 5, 9, 2]
    inputs = {"target_tokens": tokens[1:], "logprobs": [-7.5] * 6, "advantages": [0.0, 0.0, 1.0, 1.0, -0.5, 1.0]}
    policy = types.Datum(model_input=types.ModelInput.from_ints(tokens[:-1]), loss_fn_inputs=inputs)
    marked = policy.with_provenance(
        model_input=[types.PromptProvenanceSpan(sequence_id="s", length=2), types.SampledProvenanceSpan(sequence_id="s", length=4)],
        loss_fn_inputs=[types.PromptProvenanceSpan(sequence_id="s", offset=1, length=1),
                        types.SampledProvenanceSpan(sequence_id="s", length=5)])
    cases = {"cross_entropy": datum(tokens), "importance_sampling": policy, "ppo": policy, "cispo": policy,
             "dro": policy, "gspo": policy, "stable_reinforce": marked}
    for loss_fn, d in cases.items():
        out = client.forward_backward([d], loss_fn).result()
        assert math.isfinite(out.metrics["loss:sum"]), loss_fn
        assert all(key.count(":") == 1 for key in out.metrics), out.metrics
        assert out.loss_fn_outputs[0]["logprobs"].shape == [6]
    assert client.optim_step(types.AdamParams(learning_rate=1e-3)).result().metrics["optim/grad_norm"] > 0


# -- (c) concurrent clients -----------------------------------------------------------------------
def test_concurrent_sampling_equals_one_at_a_time(url):
    """Several sampling requests to two sampling clients in flight at once, beside a training client, give
    what the same seeded requests give one at a time; the training steps give what they give alone."""
    prompts = [[1, 2, 3], [4, 5, 6, 7], [8, 9], [10, 11, 12, 13, 14]]
    params = [types.SamplingParams(max_tokens=6, seed=i, temperature=1.0) for i in range(len(prompts))]
    batch = [datum([1, 5, 9, 13, 17, 21]), datum([2, 4, 6, 8])]

    async def main():
        service = tinker.ServiceClient(base_url=url)
        samplers = [await service.create_sampling_client(base_model=TINY) for _ in range(2)]
        trainers = [await service.create_lora_training_client(base_model=TINY, rank=4, seed=1) for _ in range(2)]

        async def train(client):
            losses = []
            for _ in range(3):
                fwd = client.forward_backward(batch, "cross_entropy")
                opt = client.optim_step(types.AdamParams(learning_rate=1e-2))
                losses.append((await fwd).metrics["loss:sum"])
                await opt
            return losses

        async def sample(i):
            return await samplers[i % 2].sample(types.ModelInput.from_ints(prompts[i]), 2, params[i],
                                                include_prompt_logprobs=True)

        together = await asyncio.gather(train(trainers[0]), *[sample(i) for i in range(len(prompts))])
        alone = [await sample(i) for i in range(len(prompts))]
        alone_losses = await train(trainers[1])
        return together[0], together[1:], alone_losses, alone

    losses, together, alone_losses, alone = asyncio.run(main())
    assert losses == pytest.approx(alone_losses, rel=1e-9) and losses[-1] < losses[0]
    for a, b in zip(together, alone):
        assert [s.tokens for s in a.sequences] == [s.tokens for s in b.sequences]
        for x, y in zip(a.sequences, b.sequences):
            assert x.logprobs == pytest.approx(y.logprobs, abs=1e-5)
        assert a.prompt_logprobs[0] is None and a.prompt_logprobs[1:] == pytest.approx(b.prompt_logprobs[1:], abs=1e-5)
        assert len({s.sequence_id for s in a.sequences}) == 2


# -- (e) errors ------------------------------------------------------------------------------------
def test_errors_are_clear_and_leave_the_server_working(url):
    service = tinker.ServiceClient(base_url=url)
    client = service.create_lora_training_client(base_model=TINY, rank=4, seed=2).result()
    good = datum([3, 1, 4, 1, 5, 9])

    with pytest.raises(tinker.NotFoundError, match="unknown training run 'sess-nope:train:0'"):
        tinker.RestClient(base_url=url).get_training_run("sess-nope:train:0").result()
    with pytest.raises(tinker.NotFoundError, match="no checkpoint"):
        service.create_sampling_client(model_path="tinker://nope/sampler_weights/x").result()

    short = types.Datum(model_input=types.ModelInput.from_ints([3, 1, 4, 1, 5]),
                        loss_fn_inputs={"target_tokens": [1, 4, 1], "weights": [1.0] * 5})
    with pytest.raises(tinker.BadRequestError, match=r"data\[0\].*'target_tokens'.* length 3 but model_input has length 5"):
        client.forward_backward([short], "cross_entropy").result()
    no_target = types.Datum(model_input=types.ModelInput.from_ints([3, 1, 4]), loss_fn_inputs={"weights": [1.0] * 3})
    with pytest.raises(tinker.RequestFailedError, match=r"data\[0\]\.loss_fn_inputs lacks \['target_tokens'\]"):
        client.forward_backward([no_target], "cross_entropy").result()
    bad_id = datum([3, 1, 4, 10**6])
    with pytest.raises(tinker.RequestFailedError, match="outside the vocabulary"):
        client.forward([bad_id], "cross_entropy").result()

    # an unknown loss cannot leave the SDK (it checks the name), so it goes on the wire by hand, to a model
    # of its own (its seq ids are the SDK's to count)
    spare = service.create_lora_training_client(base_model=TINY, rank=4).result()
    msg = pb.ForwardBackwardRequest(model_id=spare.model_id, seq_id=1, loss_fn="nope")
    msg.data.add().model_input.add().encoded_text.tokens = b"\x01\x00\x00\x00"
    with httpx.Client(base_url=url, headers={"X-API-Key": "tml-local"}) as http:
        request_id = http.post("/api/v1/forward_backward", content=msg.SerializeToString()).json()["request_id"]
        failed = http.post("/api/v1/retrieve_future", json={"request_id": request_id}).json()
        msg.model_id = "sess-nope:train:0"
        unknown = http.post("/api/v1/forward_backward", content=msg.SerializeToString())
    assert failed["category"] == "user" and "loss_fn='nope' is not a built-in loss" in failed["error"]
    assert unknown.status_code == 404 and "unknown model_id 'sess-nope:train:0'" in unknown.json()["detail"]

    client.save_state("taken").result()
    with pytest.raises(tinker.RequestFailedError, match="taken.*exists"):
        client.save_state("taken").result()
    assert client.save_state("taken", overwrite=True).result().path.endswith("/weights/taken")

    # the model still trains and samples, and exactly as a client that never saw an error
    fresh = service.create_lora_training_client(base_model=TINY, rank=4, seed=2).result()
    results = []
    for c in (client, fresh):
        before = c.forward_backward([good], "cross_entropy").result().metrics["loss:sum"]
        c.optim_step(types.AdamParams(learning_rate=1e-2)).result()
        after = c.forward([good], "cross_entropy").result().metrics["loss:sum"]
        sampler = c.save_weights_and_get_sampling_client().result()
        res = sampler.sample(types.ModelInput.from_ints([3, 1]), 2, types.SamplingParams(max_tokens=4, seed=7)).result()
        results.append(([before, after], [s.tokens for s in res.sequences]))
    (losses, tokens), (fresh_losses, fresh_tokens) = results
    assert losses[1] < losses[0] and losses == pytest.approx(fresh_losses, rel=1e-9) and tokens == fresh_tokens


def test_bad_api_key_is_refused(tmp_path, monkeypatch):
    with serving(tmp_path / "home", env=smoke.env(), api_key="tml-secret") as secured:
        monkeypatch.setenv("TINKER_API_KEY", "tml-wrong")
        with pytest.raises(tinker.AuthenticationError, match="invalid or missing API key"):
            tinker.ServiceClient(base_url=secured).create_sampling_client(base_model=TINY).result()
        monkeypatch.setenv("TINKER_API_KEY", "tml-secret")
        sampler = tinker.ServiceClient(base_url=secured).create_sampling_client(base_model=TINY).result()
        assert len(sampler.sample(types.ModelInput.from_ints([1, 2]), 1, types.SamplingParams(max_tokens=2)).result().sequences) == 1


# -- (b) the REST surface, ordering and idempotency ------------------------------------------------
def test_checkpoint_and_run_endpoints(url):
    service = tinker.ServiceClient(base_url=url)
    client = service.create_lora_training_client(base_model=TINY, rank=4).result()
    state = client.save_state("s").result().path
    weights = client.save_weights_for_sampler("w").result().path
    rest = tinker.RestClient(base_url=url)
    assert {c.tinker_path for c in rest.list_checkpoints(client.model_id).result().checkpoints} == {state, weights}
    assert {state, weights} <= {c.tinker_path for c in rest.list_user_checkpoints(limit=1000).result().checkpoints}
    run = rest.get_training_run(client.model_id).result()
    assert run.is_lora and run.lora_rank == 4 and run.base_model == TINY and run.last_checkpoint.tinker_path == state
    assert client.model_id in {r.training_run_id for r in rest.list_training_runs(limit=1000).result().training_runs}
    info = rest.get_weights_info_by_tinker_path(weights).result()
    assert info.base_model == TINY and info.is_lora and info.lora_rank == 4
    assert TINY in {m.model_name for m in rest.get_server_capabilities().result().supported_models}
    sampler = service.create_sampling_client(model_path=weights).result()
    assert rest.get_sampler(sampler._sampling_session_id).result().model_path == weights
    rest.delete_checkpoint_from_tinker_path(state).result()
    assert [c.tinker_path for c in rest.list_checkpoints(client.model_id).result().checkpoints] == [weights]
    with pytest.raises(tinker.NotFoundError, match="no checkpoint"):
        rest.delete_checkpoint_from_tinker_path(state).result()
    # a fresh client from the sampler weights (create-via-load: the id the SDK derives itself)
    resumed = service.create_training_client_from_state(weights).result()
    assert resumed.model_id.startswith(f"{resumed.holder.get_session_id()}:train:")
    assert resumed.forward([datum([1, 2, 3])], "cross_entropy").result().loss_fn_outputs[0]["logprobs"].shape == [2]


def test_requests_run_in_seq_order_and_resends_are_deduplicated(url):
    """Submits that arrive out of order run in seq_id order; a re-sent seq_id gets its first request id."""
    from tinker.proto.request_conv import forward_backward_request_to_proto

    service = tinker.ServiceClient(base_url=url)
    model_id = service.create_lora_training_client(base_model=TINY, rank=4, seed=3).result().model_id

    def fb(seq_id, forward_only):
        request = types.ForwardBackwardRequest(model_id=model_id, seq_id=seq_id, forward_backward_input=types.ForwardBackwardInput(
            data=[datum([5, 6, 7, 8])], loss_fn="cross_entropy"))
        msg = forward_backward_request_to_proto(request)
        msg.forward_only = forward_only
        return http.post("/api/v1/forward_backward", content=msg.SerializeToString()).json()["request_id"]

    def result(request_id):
        response = http.post("/api/v1/retrieve_future", json={"request_id": request_id})
        return response.json() if "json" in response.headers["content-type"] else pb.ForwardBackwardOutput.FromString(response.content)

    with httpx.Client(base_url=url, headers={"X-API-Key": "tml-local"}, timeout=60) as http:
        third = fb(3, forward_only=True)  # arrives first, runs last
        second = http.post("/api/v1/optim_step", json={"model_id": model_id, "seq_id": 2, "type": "optim_step",
                                                        "adam_params": {"learning_rate": 0.05}}).json()["request_id"]
        first = fb(1, forward_only=False)
        assert fb(1, forward_only=False) == first and fb(3, forward_only=True) == third
        losses = [result(first).metrics["loss:sum"], result(third).metrics["loss:sum"]]
        assert "optim/grad_norm" in result(second)["metrics"]
    assert losses[1] < losses[0], "the forward at seq 3 ran before the step at seq 2"
