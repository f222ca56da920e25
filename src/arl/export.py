"""`arl export`: a trained checkpoint leaves the lab as a standard Hugging Face folder.

The source is a run folder (its newest checkpoint: `checkpoints/latest.json`, else a Jev run's
`checkpoints/sampler_weights/final`), an `arl://` / `tinker://` URI, or a checkpoint folder. What is
written, with the tokenizer and its chat template (and, for a vision-language model, the image
processor) in every case:

- a full fine-tune, or a LoRA checkpoint with `merge=True`: `config.json`, `model.safetensors`,
  `generation_config.json`; loads with `AutoModelForCausalLM` (`AutoModelForImageTextToText` for a
  vision-language model). The weights are the engine's own (LoRA folded in as the sampler folds it).
- a LoRA checkpoint without `merge`: the peft adapter (`adapter_config.json`,
  `adapter_model.safetensors`). Its `base_model_name_or_path` never names a local cache path: a base
  that came from the Hugging Face hub cache (`.../models--ORG--NAME/snapshots/REV`) is named `ORG/NAME`;
  any other base (the tiny models built locally, SmolLM2 dequantised from its GGUF, a folder of your
  own) is written beside the adapter in `base/`, and named `base`, which is where it lies relative to the
  export. The adapter was trained against exactly those weights, which a hub model of the same name
  may not hold (SmolLM2's GGUF is 4-bit), so the copy is what reproduces the engine.

Every export gets a `README.md` saying how to load it and `arl_export.json` (where it came from). The
folder is written beside OUT_DIR and renamed into place (`checkpoints.atomic_dir`); an OUT_DIR that
holds anything is refused, unless `force` and it is an earlier export (a folder of other files is never
replaced). Every check runs before anything is written.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

from . import checkpoints, models, settings
from .backend.local.trainer import sampling_model_from_checkpoint

RUN_LATEST = Path("checkpoints") / "latest.json"
"""Where an RL run records its newest checkpoint (`rl.session`), relative to the run folder."""
RUN_FINAL = Path("checkpoints") / "sampler_weights" / "final"
"""A run without `latest.json` (Jev) saves its final weights here."""
EXPORT_FILE = "arl_export.json"
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
BASE_DIR = "base"


class ExportError(ValueError):
    """The source is not an exportable checkpoint, or OUT_DIR cannot take the export."""


@dataclass(frozen=True)
class Exported:
    folder: Path
    checkpoint: Path
    """The checkpoint folder that was exported."""
    base_model: str
    form: str
    """`full` (a full fine-tune), `merged` (LoRA folded into the base) or `adapter` (a peft adapter)."""
    base_name: str | None = None
    """An adapter's `base_model_name_or_path` (`ORG/NAME` or `base`); None otherwise."""


def checkpoint_of(source: str) -> str:
    """The checkpoint `source` names: a run folder's newest, else `source` itself (a URI or folder)."""
    folder = Path(source).expanduser()
    if any(source.startswith(s) for s in checkpoints.SCHEMES) or (folder / checkpoints.META_FILE).is_file():
        return source
    latest = folder / RUN_LATEST
    if latest.is_file():
        try:
            path = json.loads(latest.read_text(encoding="utf-8"))["path"]
        except (ValueError, KeyError, TypeError) as e:
            raise ExportError(f"{latest} is not a checkpoint record ({e}); pass a checkpoint folder instead") from None
        if any(path.startswith(s) for s in checkpoints.SCHEMES):  # a run on a remote backend (backend=tinker)
            raise ExportError(f"run folder {folder} trained on a remote service: its newest checkpoint is {path}, which "
                              "lives there; arl export reads local checkpoints (under a local `arl serve`, "
                              "tinker://RUN/weights/NAME is arl://RUN/training_state/NAME in the server's ARL_HOME)")
        return str(folder / path)  # a local run records it relative to the run folder (the run can move)
    if (folder / RUN_FINAL / checkpoints.META_FILE).is_file():
        return str(folder / RUN_FINAL)
    if (folder / "checkpoints").is_dir():
        raise ExportError(f"run folder {folder} has no checkpoint yet ({RUN_LATEST} is missing): export it after "
                          "its first save, or pass a checkpoint folder or arl:// URI")
    raise ExportError(f"{source!r} is neither a run folder (with {RUN_LATEST}), a checkpoint folder (with "
                      f"{checkpoints.META_FILE}) nor an arl:// URI")


def hub_name(model_folder: Path) -> str | None:
    """`ORG/NAME` of a folder in the Hugging Face hub cache (`models--ORG--NAME/snapshots/REV`), whose
    weights are the hub's own; None for any other folder."""
    repo = model_folder.parent.parent.name
    if model_folder.parent.name != "snapshots" or not repo.startswith("models--"):
        return None
    return repo.removeprefix("models--").replace("--", "/", 1)


def check_out_dir(out: Path, force: bool) -> None:
    if out.exists() and not out.is_dir():
        raise ExportError(f"OUT_DIR {out} is a file; choose a folder")
    if out.is_dir() and any(out.iterdir()):
        if not force:
            raise ExportError(f"OUT_DIR {out} exists and is not empty; choose another folder, or pass --force to "
                              "replace an earlier export")
        if not (out / EXPORT_FILE).is_file():
            raise ExportError(f"OUT_DIR {out} holds files that are not an arl export (no {EXPORT_FILE}); --force "
                              "replaces only an earlier export: choose another folder")


def export(source: str, out_dir: str | Path, merge: bool = False, force: bool = False) -> Exported:
    """Write the checkpoint `source` names (see `checkpoint_of`) to `out_dir` as a Hugging Face folder."""
    path = checkpoint_of(source)
    try:
        folder, meta = checkpoints.read_meta(path)
    except ValueError as e:  # an unknown URI form, or damaged metadata
        raise ExportError(str(e)) from None
    checkpoints.verify(folder, meta)
    out = Path(out_dir).expanduser().resolve()
    check_out_dir(out, force)
    settings.apply_threads()
    form = "full" if meta["lora_rank"] is None else "merged" if merge else "adapter"
    base_folder = models.model_dir(meta["base_model"])
    base_name = None if form != "adapter" else hub_name(base_folder) or BASE_DIR
    with checkpoints.atomic_dir(out) as tmp:
        if form == "adapter":
            _write_adapter(folder, meta["base_model"], base_folder, tmp, base_name)
        else:
            model, loaded = sampling_model_from_checkpoint(path)
            _write_model(model, loaded, tmp)
        exported = Exported(out, folder, meta["base_model"], form, base_name)
        (tmp / "README.md").write_text(_readme(exported, is_vision_folder(base_folder)), encoding="utf-8")
        (tmp / EXPORT_FILE).write_text(json.dumps({
            "source": source, "checkpoint": str(folder), "base_model": meta["base_model"], "form": form,
            "lora_rank": meta["lora_rank"], "optim_steps": meta.get("optim_steps"),
        }, indent=2) + "\n", encoding="utf-8")
    return exported


def is_vision_folder(model_folder: Path) -> bool:
    """Whether the model in `model_folder` is a vision-language one (its config has a vision tower)."""
    return "vision_config" in json.loads((model_folder / "config.json").read_text(encoding="utf-8"))


def _write_model(model, loaded, folder: Path) -> None:
    """A complete model folder: weights and configs, tokenizer, and a vision model's image processor."""
    model.save_pretrained(folder)
    loaded.tokenizer.save_pretrained(folder)
    if loaded.images is not None:
        loaded.images.processor.save_pretrained(folder)


def _write_adapter(checkpoint: Path, base_model: str, base_folder: Path, folder: Path, base_name: str) -> None:
    """The checkpoint's adapter files as they are (the trainer's exact tensors), renamed to its portable
    base, with the base's tokenizer, generation config and image processor; and the base model itself in
    `base/` when it has no hub name (a hub-named base's weights are never loaded)."""
    for name in ADAPTER_FILES:
        shutil.copyfile(checkpoint / name, folder / name)
    config_file = folder / "adapter_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8"))
    config["base_model_name_or_path"] = base_name
    config_file.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    models.load_tokenizer(base_model).save_pretrained(folder)
    for name in ("generation_config.json", "preprocessor_config.json"):
        if (base_folder / name).is_file():
            shutil.copyfile(base_folder / name, folder / name)
    if base_name == BASE_DIR:
        loaded = models.load_model(base_model)
        _write_model(loaded.model, loaded, folder / BASE_DIR)


def _readme(e: Exported, vision: bool) -> str:
    """How to load this export, with `transformers` (and peft for an adapter) alone."""
    auto = "AutoModelForImageTextToText" if vision else "AutoModelForCausalLM"
    what = {"full": "A full fine-tune", "merged": "A LoRA fine-tune merged into its base weights",
            "adapter": "A LoRA adapter (peft)"}[e.form]
    lines = ["# Exported by `arl export`", "", f"{what} of `{e.base_model}`, from the checkpoint `{e.checkpoint}`.",
             "", "```python", f"from transformers import AutoTokenizer, {auto}"
             + (", AutoImageProcessor" if vision else ""),
             *(["from peft import PeftModel"] if e.form == "adapter" else []), "",
             f'folder = "{e.folder}"  # this folder, wherever it is now']
    if e.form == "adapter":
        base = f'"{e.base_name}"' if e.base_name != BASE_DIR else f'f"{{folder}}/{BASE_DIR}"'
        lines += [f"model = PeftModel.from_pretrained({auto}.from_pretrained({base}), folder)"]
    else:
        lines += [f"model = {auto}.from_pretrained(folder)"]
    lines += ["tokenizer = AutoTokenizer.from_pretrained(folder)",
              *(["image_processor = AutoImageProcessor.from_pretrained(folder)  # Qwen2-VL's, its pixel bounds"]
                if vision else []),
              'messages = [{"role": "user", "content": "Hi"}]',
              "prompt = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)",
              "```", ""]
    if e.base_name == BASE_DIR:
        lines += [(f"The base model the adapter was trained on is in `{BASE_DIR}/`, a complete model folder; the "
                   f"adapter's `base_model_name_or_path` is `{BASE_DIR}`, relative to this folder. For one folder "
                   "with the adapter folded in, export with `arl export --merge`."), ""]
    return "\n".join(lines)
