"""`arl export`: a checkpoint becomes a Hugging Face folder that `transformers` (and peft) load alone and
that scores a prompt exactly as the engine does; bad input is refused before anything is written."""

import json
import shutil
import subprocess
import sys
import textwrap

import pytest
from conftest import TINY

import arl
from arl import cli, models
from arl.export import ExportError, export, hub_name

VLM = "arl/tiny-qwen2-vl-3m"
ATOL = 1e-4
"""Engine vs `transformers` logprobs, both float32 on the CPU: the engine's sampler runs its own decoder
(and an adapter runs unmerged in peft), so the sums differ in the last bits, about 1e-6 here."""
MESSAGES = [{"role": "user", "content": "What is 7 + 8?"}]


def trained(client):
    """`client` one large step away from its base, so every weight or adapter (B included) has moved."""
    tok = client.get_tokenizer()
    ids = tok.encode("Q: 7+8= A: 15 and the kitchen door is open", add_special_tokens=False)
    datum = arl.Datum(model_input=arl.ModelInput.from_ints(ids[:-1]), loss_fn_inputs={"target_tokens": ids[1:]})
    client.forward_backward([datum], "cross_entropy")
    client.optim_step(arl.AdamParams(learning_rate=2e-2)).result()
    return client


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """A run folder as an RL run leaves it: a full fine-tune's `save_state` and `latest.json` naming it."""
    run = tmp_path_factory.mktemp("run")
    svc = arl.ServiceClient(checkpoint_dir=str(run / "checkpoints"))
    trained(svc.create_full_training_client(TINY, seed=0)).save_state("step-0001").result()
    latest = {"step": 1, "path": "checkpoints/training_state/step-0001"}  # relative, as rl.session writes it
    (run / "checkpoints" / "latest.json").write_text(json.dumps(latest))
    return run


@pytest.fixture(scope="module")
def lora_uri(service):
    client = trained(service.create_lora_training_client(TINY, rank=4, seed=0))
    return client.save_state("export-lora", overwrite=True).result().path


@pytest.fixture(scope="module")
def prompt_ids(service):
    tok = service.create_sampling_client(base_model=TINY).get_tokenizer()
    prompt = tok.apply_chat_template(MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=False)
    return prompt + tok.encode("15, and the door", add_special_tokens=False)


LOAD = textwrap.dedent("""
    import json, sys
    import torch
    import transformers
    from peft import PeftModel

    out = []
    for case in json.loads(sys.argv[1]):
        auto = getattr(transformers, case["auto"])
        folder = case["folder"]
        if case["form"] == "adapter":
            model = PeftModel.from_pretrained(auto.from_pretrained(folder + "/base"), folder)
        else:
            model = auto.from_pretrained(folder)
        tok = transformers.AutoTokenizer.from_pretrained(folder)
        prompt = tok.apply_chat_template(case["messages"], add_generation_prompt=True, tokenize=True, return_dict=False)
        ids = torch.tensor([case["ids"]])
        with torch.no_grad():
            logp = torch.log_softmax(model.eval()(input_ids=ids).logits[0, :-1].double(), -1)
        greedy = None
        if case["auto"] == "AutoModelForCausalLM":
            start = torch.tensor([prompt])
            greedy = model.generate(input_ids=start, max_new_tokens=16, do_sample=False)[0, len(prompt):].tolist()
        out.append({"logprobs": logp.gather(-1, ids[0, 1:, None])[:, 0].tolist(), "prompt": prompt, "greedy": greedy,
                    "processor": type(transformers.AutoImageProcessor.from_pretrained(folder)).__name__
                    if case["auto"] == "AutoModelForImageTextToText" else None})
    assert not any(m == "arl" or m.startswith("arl.") for m in sys.modules), "the export must load without arl"
    print(json.dumps(out))
""")


def load_alone(cases: list[dict], tmp_path) -> list[dict]:
    """Load each export in a fresh interpreter that imports `transformers` and peft, never arl."""
    done = subprocess.run([sys.executable, "-c", LOAD, json.dumps(cases)], capture_output=True, text=True,
                          cwd=tmp_path, timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def engine_logprobs(service, checkpoint: str, ids: list[int]) -> list[float]:
    sampler = service.create_sampling_client(model_path=checkpoint)
    return sampler.compute_logprobs(arl.ModelInput.from_ints(ids)).result()[1:]


def engine_greedy(service, checkpoint: str, prompt: list[int]) -> list[int]:
    """The engine's greedy answer, ending where `generate` ends: at the generation config's stop ids."""
    sampler = service.create_sampling_client(model_path=checkpoint)
    tok = sampler.get_tokenizer()
    params = arl.SamplingParams(max_tokens=16, temperature=0.0, stop=[tok.eos_token_id, tok.pad_token_id])
    return sampler.sample(arl.ModelInput.from_ints(prompt), 1, params).result().sequences[0].tokens


def test_exports_load_in_transformers_alone_and_score_as_the_engine(service, run_dir, lora_uri, prompt_ids, tmp_path):
    vlm = trained(service.create_lora_training_client(VLM, rank=4, seed=0))
    vlm_uri = vlm.save_state("export-vlm", overwrite=True).result().path
    exports = [
        (export(str(run_dir), tmp_path / "full"), str(run_dir / "checkpoints/training_state/step-0001")),
        (export(lora_uri, tmp_path / "merged", merge=True), lora_uri),
        (export(lora_uri, tmp_path / "adapter"), lora_uri),
        (export(vlm_uri, tmp_path / "vlm", merge=True), vlm_uri),
    ]
    assert [e.form for e, _ in exports] == ["full", "merged", "adapter", "merged"]
    adapter = json.loads((tmp_path / "adapter" / "adapter_config.json").read_text())
    assert adapter["base_model_name_or_path"] == "base" and (tmp_path / "adapter/base/config.json").is_file()
    for e, _ in exports:
        model_folder = e.folder / "base" if e.form == "adapter" else e.folder
        assert {"config.json", "generation_config.json", "tokenizer.json"} <= {p.name for p in model_folder.iterdir()}
        assert (e.folder / "README.md").is_file() and (e.folder / "tokenizer.json").is_file()
    cases = [{"folder": str(e.folder), "form": e.form, "ids": prompt_ids, "messages": MESSAGES,
              "auto": "AutoModelForImageTextToText" if e.base_model == VLM else "AutoModelForCausalLM"}
             for e, _ in exports]
    loaded = load_alone(cases, tmp_path)
    n_prompt = len(service.create_sampling_client(base_model=TINY).get_tokenizer().apply_chat_template(
        MESSAGES, add_generation_prompt=True, tokenize=True, return_dict=False))
    for (e, checkpoint), got in zip(exports, loaded):
        assert got["prompt"] == prompt_ids[:n_prompt], f"{e.form}: the chat template did not travel"
        assert got["logprobs"] == pytest.approx(engine_logprobs(service, checkpoint, prompt_ids), abs=ATOL), e.form
        if got["greedy"] is not None:  # and answers as the engine does
            assert got["greedy"] == engine_greedy(service, checkpoint, got["prompt"]), e.form
    assert loaded[-1]["processor"].startswith("Qwen2VLImageProcessor")


def test_the_adapter_names_a_hub_base_by_its_hub_name(service, tmp_path):
    """A base from the hub cache is named `ORG/NAME` and not copied: the hub holds those very weights."""
    assert hub_name(tmp_path / "hub" / "models--Qwen--Qwen3-0.6B" / "snapshots" / "0123abcd") == "Qwen/Qwen3-0.6B"
    assert hub_name(tmp_path / "my-model") is None
    snapshot = tmp_path / "hub" / "models--arl--tiny" / "snapshots" / "0123abcd"
    shutil.copytree(models.model_dir(TINY), snapshot)
    client = trained(service.create_lora_training_client(str(snapshot), rank=4, seed=0))
    e = export(client.save_weights_for_sampler("export-hub").result().path, tmp_path / "out")
    assert json.loads((e.folder / "adapter_config.json").read_text())["base_model_name_or_path"] == "arl/tiny"
    assert not (e.folder / "base").exists() and (e.folder / "tokenizer.json").is_file()
    assert 'from_pretrained("arl/tiny")' in (e.folder / "README.md").read_text()


def test_bad_input_is_refused_before_anything_is_written(run_dir, lora_uri, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(ExportError, match="neither a run folder"):
        export(str(tmp_path / "nowhere"), out)
    with pytest.raises(ValueError, match="expected arl://RUN/sampler_weights/NAME"):
        export("arl://pytest/bogus", out)
    with pytest.raises(FileNotFoundError, match="no checkpoint at"):
        export("arl://pytest/training_state/never-saved", out)
    empty_run = tmp_path / "empty-run"
    (empty_run / "checkpoints").mkdir(parents=True)
    with pytest.raises(ExportError, match="has no checkpoint yet"):
        export(str(empty_run), out)
    remote_run = tmp_path / "remote-run"
    (remote_run / "checkpoints").mkdir(parents=True)
    (remote_run / "checkpoints" / "latest.json").write_text(json.dumps({"step": 2, "path": "tinker://r1/weights/step-0002"}))
    with pytest.raises(ExportError, match="trained on a remote service"):
        export(str(remote_run), out)
    assert not out.exists()

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep me")
    with pytest.raises(ExportError, match="--force"):
        export(lora_uri, mine)
    with pytest.raises(ExportError, match="not an arl export"):
        export(lora_uri, mine, force=True)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]

    export(lora_uri, out)
    export(str(run_dir), out, force=True)  # an earlier export is replaced, as a whole
    assert json.loads((out / "arl_export.json").read_text())["form"] == "full" and not (out / "base").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no partial folder left


def test_cli_exports_and_says_what_is_wrong_in_one_line(run_dir, tmp_path, capsys):
    assert cli.main(["export", str(run_dir), str(tmp_path / "x")]) == 0
    assert "full fine-tune" in capsys.readouterr().out
    assert cli.main(["export", str(run_dir), str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("arl export:") and "--force" in err and "\n" not in err
    with pytest.raises(SystemExit):
        cli.main(["export", "--help"])
    assert "--merge" in capsys.readouterr().out
