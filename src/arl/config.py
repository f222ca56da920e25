"""Chapter configs: a dataclass whose field docs are the `--help`, presets, and `key=value` overrides.

A recipe declares `Config` (a dataclass; each field followed by a docstring) and `PRESETS`
(preset name -> overrides). `resolve` turns a preset plus command-line overrides into a Config,
failing before any work on an unknown key or a value of the wrong type.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
import importlib.util
import inspect
import math
import os
import types
import typing
from pathlib import Path


ALIASES = {"lr": "learning_rate", "loss": "loss_fn", "group": "group_size", "n": "group_size",
           "batch_size": "batch_prompts", "max_new_tokens": "max_tokens", "rank": "lora_rank"}
"""Names from other frameworks, for the did-you-mean of an unknown key."""


def field_docs(cls) -> dict[str, str]:
    """The docstring under each field of a dataclass, read from its source (base classes included)."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if dataclasses.is_dataclass(klass):
            docs.update(_own_field_docs(klass))
    return docs


def _own_field_docs(cls) -> dict[str, str]:
    try:
        tree = ast.parse(inspect.getsource(cls))
    except (OSError, TypeError):
        return {}
    docs, last = {}, None
    for node in tree.body[0].body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            last = node.target.id
        elif last and isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            docs[last] = " ".join(node.value.value.split())
            last = None
        else:
            last = None
    return docs


def require_positive(cfg, *names: str) -> None:
    """For a config's `validate`: each named field must be at least 1, else an error naming it."""
    for name in names:
        if getattr(cfg, name) < 1:
            raise ValueError(f"{name}={getattr(cfg, name)}: must be at least 1")


EVAL_SPLITS = ("test", "dev")
"""What a chapter's held-out evaluation can play: test (the reported results) or dev (where presets, cold
starts and reward shaping are chosen, so that the test split is read once, at the end)."""


def check_eval_split(fields) -> None:
    """For a config's `validate`: `eval_split` is test or dev, and dev, when chosen, is not empty (`n_dev`)."""
    if fields.eval_split not in EVAL_SPLITS:
        raise ValueError(f"eval_split={fields.eval_split!r}: use test (the reported results) or dev (choosing settings)")
    if fields.n_dev < 0:
        raise ValueError(f"n_dev={fields.n_dev}: must be >= 0")
    if fields.eval_split == "dev" and fields.n_dev < 1:
        raise ValueError("eval_split=dev: set n_dev to 1 or more development items")


def comma_list(name: str, value: str, allowed) -> list[str]:
    """A field's `value`, a comma-separated subset of `allowed`, as a list (an error naming the field
    `name` and the allowed values when it is empty or holds an unknown one)."""
    items = [x.strip() for x in value.split(",") if x.strip()]
    if not items or set(items) - set(allowed):
        raise ValueError(f"{name}={value!r}: use a comma-separated subset of {', '.join(allowed)}")
    return items


def _convert(name: str, text: str, annotation):
    hint = typing.get_origin(annotation) or annotation
    args = typing.get_args(annotation)
    if (hint is typing.Union or hint is types.UnionType) and type(None) in args:
        if text.lower() in ("none", "null", ""):
            return None
        return _convert(name, text, next(a for a in args if a is not type(None)))
    try:
        if annotation is bool:
            if text.lower() in ("1", "true", "yes", "on"):
                return True
            if text.lower() in ("0", "false", "no", "off"):
                return False
            raise ValueError(text)
        if annotation in (int, float, str):
            return annotation(text)
    except ValueError:
        raise ValueError(f"{name}={text!r}: expected {annotation.__name__}") from None
    raise ValueError(f"{name}: unsupported config type {annotation}")


def resolve(config_cls, presets: dict[str, dict], preset: str, overrides: list[str] | dict) -> typing.Any:
    """Config for `preset` with `overrides` ("key=value" strings or a dict) applied."""
    if preset not in presets:
        raise ValueError(f"--preset {preset!r}: choose one of {sorted(presets)}")
    hints = typing.get_type_hints(config_cls)
    names = [f.name for f in dataclasses.fields(config_cls)]
    values = dict(presets[preset])
    items = overrides.items() if isinstance(overrides, dict) else [split_override(o) for o in overrides]
    for key, value in items:
        if key not in names:
            close = [n for n in names if n == ALIASES.get(key)] or difflib.get_close_matches(key, names, n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ValueError(f"unknown config key {key!r}{hint}; `arl run CHAPTER --help` lists them")
        values[key] = _convert(key, value, hints[key]) if isinstance(value, str) and hints[key] is not str else value
    cfg = config_cls(**values)
    check_common(cfg)
    if hasattr(cfg, "validate"):
        cfg.validate()
    check_backend(cfg)
    return cfg


def check_common(cfg) -> None:
    """Rules every chapter's fields follow, by name, so that no chapter has to repeat them: numbers are
    finite; the signs of learning rates, temperatures, time limits, threads. (The CLI also checks that
    `model` names a model and `tracker` a tracker: `arl.cli.check_names`.)"""
    for f in dataclasses.fields(cfg):
        name, value = f.name, getattr(cfg, f.name)
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{name}={value}: must be a finite number")
        if value is None or isinstance(value, bool):
            continue
        if name == "learning_rate" or name.endswith("_learning_rate"):
            sentinel = f.default == -1 and value == -1  # a control's "the cold start's rate"
            if value <= 0 and not sentinel:
                raise ValueError(f"{name}={value}: must be greater than 0" + (" (or -1: the cold start's)" if f.default == -1 else ""))
        elif name.endswith("_s") and value < 0:
            raise ValueError(f"{name}={value}: a time in seconds must be >= 0")
        elif name == "temperature" and value < 0:
            raise ValueError(f"{name}={value}: must be >= 0 (0 = greedy)")
        elif name in ("threads", "lora_rank", "warmup_steps") and value < 0:
            raise ValueError(f"{name}={value}: must be >= 0")
        elif name in ("grad_clip_norm", "kl_coef") and value < 0:
            raise ValueError(f"{name}={value}: must be >= 0 (0 = off)")


BACKENDS = ("local", "tinker")
SUGGESTED_LORA_RANK = 32
"""The rank the error of a remote run with lora_rank=0 suggests (the Tinker SDK's default)."""


def check_backend(cfg) -> None:
    """`backend` and `base_url`, after the chapter's own checks (a chapter that cannot run remotely says
    why first). A remote service trains LoRA from a base model it has, so a remote run must not need what
    only this machine has: full fine-tuning (lora_rank=0, or a chapter without lora_rank, which fine-tunes
    every weight or trains on local cold starts) or a cold start trained here (a `*sft_steps` field > 0).
    Refused here, before the run folder exists; so is a run without the SDK or an API key."""
    backend, base_url = getattr(cfg, "backend", "local"), getattr(cfg, "base_url", None)
    if backend not in BACKENDS:
        raise ValueError(f"backend={backend!r}: use local (this machine's engine) or tinker (a Tinker-compatible service)")
    if base_url is not None and not base_url.startswith(("http://", "https://")):
        raise ValueError(f"base_url={base_url!r}: use the service's http:// or https:// address")
    if backend == "local":
        if base_url is not None:
            raise ValueError(f"base_url={base_url!r} is read with backend=tinker only; add backend=tinker or drop base_url")
        return
    if not hasattr(cfg, "lora_rank"):
        raise ValueError(f"backend={backend}: this chapter fine-tunes every weight or trains on cold starts made on "
                         "this machine, which no Tinker-compatible service can do or load; run it with backend=local")
    fixes = []
    if cfg.lora_rank == 0:
        fixes.append(f"lora_rank=0 is full fine-tuning, which no Tinker-compatible service has: set a LoRA rank "
                     f"(e.g. lora_rank={SUGGESTED_LORA_RANK})")
    cold = [f.name for f in dataclasses.fields(cfg) if f.name.endswith("sft_steps") and getattr(cfg, f.name) > 0]
    if cold:
        fixes.append(f"{', '.join(f'{n}={getattr(cfg, n)}' for n in cold)}: a cold start trained on this machine, "
                     f"which the service cannot load: set {' '.join(f'{n}=0' for n in cold)} (RL from the base model)")
    if fixes:
        raise ValueError(f"backend={backend}: {'; '.join(fixes)}")
    if importlib.util.find_spec("tinker") is None:
        raise ValueError(f"backend={backend} needs the tinker SDK; install it with: pip install 'agentic-rl-lab[serve]'")
    if not (os.environ.get("TINKER_API_KEY") or os.environ.get("TINKER_CREDENTIAL_CMD")
            or Path("~/.tinker/credentials.json").expanduser().is_file()):
        raise ValueError(f"backend={backend} needs an API key: set TINKER_API_KEY (never a setting, so that config.json "
                         "cannot leak it; `arl serve` takes any key that starts with tml-, e.g. tml-local)")


def split_override(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ValueError(f"override {item!r}: write key=value (for example loss_fn=ppo)")
    key, value = item.split("=", 1)
    return key.strip().replace("-", "_"), value.strip()


def help_text(config_cls, presets: dict[str, dict]) -> str:
    docs = field_docs(config_cls)
    lines = ["config fields (override with key=value):"]
    for f in dataclasses.fields(config_cls):
        per_preset = ", ".join(f"{p}: {v[f.name]}" for p, v in presets.items() if f.name in v)
        default = f.default if f.default is not dataclasses.MISSING else "-"
        lines.append(f"  {f.name} = {default!r}" + (f"   [{per_preset}]" if per_preset else ""))
        if f.name in docs:
            lines.append(f"      {docs[f.name]}")
    return "\n".join(lines)
