"""`ServiceClient`, `TrainingClient` and `SamplingClient`: the Tinker / PyTRIO client API over the local
engine, so that a script written for PyTRIO runs after changing `import pytrio as trio` to
`import arl as trio` and the model name.

Tinker 0.38 returns a *future of the client* from the client-creating methods (`.result()` or `await`
gives the client); PyTRIO and arl's own code use the return value as the client. Both work here: a
client is also a completed future of itself (`_ClientFuture`).

Await conventions follow the reference lab: `forward_backward_async`, `forward_async`,
`optim_step_async`, `save_state_async`, `load_state_async` and `save_weights_for_sampler_async`
return an `APIFuture` after the first await (submit) and the result after the second; `sample_async`,
`compute_logprobs_async`, `create_*_async` and `save_weights_and_get_sampling_client_async` return
their result after one await.

All torch work runs on one engine thread (backend/local/engine.py) in submission order, so a
client's operations keep their order also when futures are submitted back to back without waiting.
"""

from __future__ import annotations

import asyncio
import datetime
import shutil
import uuid
from pathlib import Path
from typing import Any, Callable, ClassVar

import torch

from . import checkpoints, losses, models, settings
from .backend.local.engine import ENGINE
from .backend.local.sampler import LocalSampler, SampleRequest
from .backend.local.trainer import LocalTrainer, TrainerSpec, sampling_model_from_checkpoint
from .types import errors
from .types import (
    AdamParams, APIFuture, Checkpoint, CheckpointsListResponse, Cursor, Datum, ForwardBackwardOutput, ImageChunk,
    LoadStateResponse, ModelInput, OptimStepResponse, SampleResponse, SamplingParams, SaveStateResponse,
    SaveWeightsForSamplerResponse, TrainingRun, TrainingRunsResponse,
)

LORA_RANKS = (1, 512)


def _check_auto_shift(auto_shift: bool) -> None:
    if auto_shift:
        raise ValueError("auto_shift=True is not supported by the local engine: build datums already shifted "
                         "(model_input = P + C[:-1], target_tokens = [0]*(len(P)-1) + C) and pass auto_shift=False")


async def _submit_async(future: APIFuture) -> APIFuture:
    """First await of a double-await method: the operation is already submitted; hand back its future."""
    return future


SAMPLING_CLIENT_KINDS = ("snapshot", "inflight")


class _ClientFuture:
    """A client that is also a completed future of itself, like Tinker 0.38's
    `BackcompatTrainingClientFuture`: `client.result()` and `await client` give the client, and the
    client works directly too. The local engine builds clients synchronously, so there is nothing to wait for."""

    def result(self, timeout: float | None = None):
        return self

    async def result_async(self, timeout: float | None = None):
        return self

    def done(self) -> bool:
        return True

    def __await__(self):
        return self
        yield  # a generator: `await client` finishes at once with the client


class ServiceClient:
    """Entry point: creates training and sampling clients for the local engine.

    `run_name` names the folder its checkpoints go to (`arl://RUN/...`); by default each training
    client gets a fresh one. `checkpoint_dir` puts them in a folder of your own instead (a run
    folder's `checkpoints/`), and their paths are then plain folder paths. Other keyword arguments
    that remote SDKs take (api_key, base_url, user_metadata, ...) are accepted and ignored.
    """

    def __init__(self, run_name: str | None = None, checkpoint_dir: str | None = None, **_remote_options: Any):
        self.run_name = run_name
        self.checkpoint_dir = checkpoint_dir
        settings.apply_threads()

    # -- discovery ----------------------------------------------------------------------------
    def get_supported_models(self) -> list[str]:
        return models.supported_model_names()

    def get_server_capabilities(self) -> dict:
        return {"supported_models": self.get_supported_models(), "backend": "local",
                "device": str(settings.torch_device()), "lora_ranks": list(LORA_RANKS),
                "loss_fns": sorted(losses.LOSSES)}

    # -- training clients ---------------------------------------------------------------------
    def create_lora_training_client(self, base_model: str, rank: int = 32, seed: int | None = None,
                                    train_mlp: bool = True, train_attn: bool = True,
                                    train_unembed: bool = True, **_ignored: Any) -> TrainingClient:
        if not isinstance(rank, int) or not LORA_RANKS[0] <= rank <= LORA_RANKS[1]:
            raise ValueError(f"rank={rank!r}: LoRA rank must be an int in [{LORA_RANKS[0]}, {LORA_RANKS[1]}] "
                             "(the reference lab accepts 4-64); for full fine-tuning use create_full_training_client")
        return self._training_client(TrainerSpec(base_model, rank, seed, train_mlp, train_attn, train_unembed))

    def create_full_training_client(self, base_model: str, seed: int | None = None) -> TrainingClient:
        """Train every weight (no LoRA): the natural choice for the tiny models, which have few."""
        return self._training_client(TrainerSpec(base_model, None, seed))

    def create_training_client_from_state(self, path: str, base_model: str | None = None,
                                          **_remote_options: Any) -> TrainingClient:
        """A new client with the weights of a `save_state` (or sampler) checkpoint and a fresh optimizer.
        Tinker's `user_metadata` / `weights_access_token` are accepted and ignored."""
        return self._client_from_checkpoint(path, base_model, with_optimizer=False)

    def create_training_client_from_state_with_optimizer(self, path: str, base_model: str | None = None,
                                                         **_remote_options: Any) -> TrainingClient:
        """A new client resuming a `save_state` checkpoint exactly: weights and optimizer state."""
        return self._client_from_checkpoint(path, base_model, with_optimizer=True)

    def _client_from_checkpoint(self, path: str, base_model: str | None, with_optimizer: bool) -> TrainingClient:
        _, meta = checkpoints.read_meta(path)
        if base_model is not None and base_model != meta["base_model"]:
            raise ValueError(f"base_model={base_model!r} but checkpoint {path!r} is of {meta['base_model']!r}; "
                             "leave base_model out (the checkpoint records it)")
        client = self._training_client(TrainerSpec.from_meta(meta))
        ENGINE.call(client._trainer.load, path, with_optimizer=with_optimizer)
        return client

    def _training_client(self, spec: TrainerSpec) -> TrainingClient:
        run = self.run_name or f"{spec.base_model.split('/')[-1]}-{uuid.uuid4().hex[:8]}"
        return TrainingClient(ENGINE.call(LocalTrainer, spec), run, self.checkpoint_dir)

    # -- sampling clients ---------------------------------------------------------------------
    def create_sampling_client(self, base_model: str | None = None, model_path: str | None = None,
                               **_ignored: Any) -> SamplingClient:
        """A sampler over `base_model`'s frozen weights, or over a saved checkpoint (`model_path`).

        The positional order is PyTRIO's (base_model first); Tinker's is (model_path, base_model), so a
        checkpoint URI passed first is taken as the model_path. `record_stability_info` and
        `retry_config` are accepted and ignored (every sequence gets a `sequence_id` anyway)."""
        if model_path is None and base_model is not None and base_model.startswith(checkpoints.SCHEMES):
            base_model, model_path = None, base_model
        if model_path is None and base_model is None:
            raise ValueError("create_sampling_client needs base_model or model_path")
        return ENGINE.call(self._sampling_client, base_model, model_path)

    @staticmethod
    def _sampling_client(base_model: str | None, model_path: str | None) -> SamplingClient:
        if model_path is not None:
            model, loaded = sampling_model_from_checkpoint(model_path)
            return SamplingClient(model, loaded.tokenizer, loaded.context_length, loaded.images,
                                  loaded.name, model_path)
        loaded = models.load_model(base_model)
        loaded.model.requires_grad_(False)
        return SamplingClient(loaded.model.to(settings.torch_device()).eval(), loaded.tokenizer,
                              loaded.context_length, loaded.images, loaded.name, None)

    # -- checkpoint metadata ------------------------------------------------------------------
    def create_rest_client(self) -> RestClient:
        """PyTRIO's / Tinker's metadata client, over the local checkpoint folders."""
        return RestClient()

    # -- async twins --------------------------------------------------------------------------
    async def create_lora_training_client_async(self, *args, **kwargs) -> TrainingClient:
        return await asyncio.to_thread(self.create_lora_training_client, *args, **kwargs)

    async def create_full_training_client_async(self, *args, **kwargs) -> TrainingClient:
        return await asyncio.to_thread(self.create_full_training_client, *args, **kwargs)

    async def create_training_client_from_state_async(self, *args, **kwargs) -> TrainingClient:
        return await asyncio.to_thread(self.create_training_client_from_state, *args, **kwargs)

    async def create_training_client_from_state_with_optimizer_async(self, *args, **kwargs) -> TrainingClient:
        return await asyncio.to_thread(self.create_training_client_from_state_with_optimizer, *args, **kwargs)

    async def create_sampling_client_async(self, *args, **kwargs) -> SamplingClient:
        return await asyncio.to_thread(self.create_sampling_client, *args, **kwargs)

    async def get_supported_models_async(self) -> list[str]:
        return self.get_supported_models()

    async def get_server_capabilities_async(self) -> dict:
        return self.get_server_capabilities()


class TrainingClient(_ClientFuture):
    """Trains one model. Gradients accumulate across forward_backward calls until optim_step."""

    def __init__(self, trainer: LocalTrainer, run: str, checkpoint_dir: str | None = None):
        self._trainer = trainer
        self.run = run
        self.model_id = run
        self._checkpoint_dir = checkpoint_dir

    def _checkpoint_path(self, kind: str, name: str) -> str:
        uri = checkpoints.make_uri(self.run, kind, name)  # validates kind and name
        if self._checkpoint_dir is None:
            return uri
        return str(Path(self._checkpoint_dir).resolve() / kind / name)

    def _submit(self, fn: Callable, *args) -> APIFuture:
        return APIFuture(ENGINE.submit(fn, *args))

    # -- compute ------------------------------------------------------------------------------
    def forward(self, data: list[Datum], loss_fn: str = "cross_entropy", loss_fn_config: dict | None = None,
                auto_shift: bool = False) -> APIFuture[ForwardBackwardOutput]:
        """Loss and per-token logprobs without gradients."""
        _check_auto_shift(auto_shift)
        self._trainer.validate(data, loss_fn, loss_fn_config)
        return self._submit(self._trainer.run_loss, data, loss_fn, loss_fn_config, False)

    def forward_backward(self, data: list[Datum], loss_fn: str = "cross_entropy", loss_fn_config: dict | None = None,
                         auto_shift: bool = False) -> APIFuture[ForwardBackwardOutput]:
        """Accumulate the gradient of the summed built-in loss over `data`."""
        _check_auto_shift(auto_shift)
        self._trainer.validate(data, loss_fn, loss_fn_config)
        return self._submit(self._trainer.run_loss, data, loss_fn, loss_fn_config, True)

    def forward_backward_custom(self, data: list[Datum], loss_fn: Callable,
                                loss_fn_config: dict | None = None) -> APIFuture[ForwardBackwardOutput]:
        """Accumulate the exact gradient of `loss_fn(data, logprobs_list) -> (loss, metrics)`.

        The linearisation trick of the reference SDKs: (1) a forward gives each datum's logprobs of its
        `target_tokens`; (2) they become leaf tensors and the custom loss is differentiated locally,
        giving g_t = dL/dlogp_t; (3) a `cross_entropy` forward_backward with weights w_t = -g_t, whose
        gradient sum_t -w_t grad logp_t = sum_t g_t grad logp_t is dL/dtheta by the chain rule.
        `loss_fn_config`, when given, is passed to `loss_fn` as a third argument.
        """
        for i, d in enumerate(data):
            if "target_tokens" not in d.loss_fn_inputs:
                raise ValueError(f"data[{i}].loss_fn_inputs needs 'target_tokens' for forward_backward_custom")
        target_only = [Datum(d.model_input, {"target_tokens": d.loss_fn_inputs["target_tokens"]}) for d in data]
        self._trainer.validate(target_only, "cross_entropy", None)
        return self._submit(self._custom, data, target_only, loss_fn, loss_fn_config)

    def _custom(self, data, target_only, loss_fn, loss_fn_config) -> ForwardBackwardOutput:
        fwd = self._trainer.run_loss(target_only, "cross_entropy", None, backward=False)
        logprobs_list = [out["logprobs"].to_torch().float().requires_grad_(True) for out in fwd.loss_fn_outputs]
        extra = () if loss_fn_config is None else (loss_fn_config,)
        loss, metrics = loss_fn(data, logprobs_list, *extra)
        if not isinstance(loss, torch.Tensor) or loss.dim() != 0:
            raise TypeError("forward_backward_custom: loss_fn must return (scalar torch.Tensor, dict of metrics)")
        loss.backward()
        linear = [
            Datum(d.model_input, {"target_tokens": d.loss_fn_inputs["target_tokens"],
                                  "weights": -(lp.grad if lp.grad is not None else torch.zeros_like(lp))})
            for d, lp in zip(target_only, logprobs_list)
        ]
        out = self._trainer.run_loss(linear, "cross_entropy", None, backward=True)
        custom_metrics = {k: float(v) for k, v in (metrics or {}).items()}
        loss_value = float(loss.detach())
        return ForwardBackwardOutput(
            loss_fn_output_type="custom", loss_fn_outputs=fwd.loss_fn_outputs,
            metrics={**custom_metrics, "loss:sum": loss_value, "loss/custom": loss_value,
                     "tokens/total": out.metrics["tokens/total"]},
        )

    def optim_step(self, adam_params: AdamParams | None = None) -> APIFuture[OptimStepResponse]:
        adam = adam_params or AdamParams()
        if not isinstance(adam, AdamParams):
            raise TypeError(f"optim_step takes AdamParams, got {type(adam).__name__}")
        return self._submit(lambda: OptimStepResponse(metrics=self._trainer.optim_step(adam)))

    # -- checkpoints --------------------------------------------------------------------------
    def save_state(self, name: str, ttl_seconds: int | None = None, overwrite: bool = False,
                   user_metadata: dict[str, str] | None = None) -> APIFuture[SaveStateResponse]:
        """Weights and optimizer state, for resuming (`load_state_with_optimizer`).

        As in both SDKs a name is saved once: saving it again raises `ConflictError` unless
        `overwrite=True` (what a resumed run that redoes a step wants)."""
        uri = self._checkpoint_path("training_state", name)
        if not overwrite and checkpoints.resolve(uri).exists():
            raise errors.ConflictError(f"save_state({name!r}): a checkpoint of that name exists already ({uri}); "
                                       "pass overwrite=True to replace it, or choose another name")

        def run():
            self._trainer.save(uri, "training_state", overwrite=overwrite)
            return SaveStateResponse(path=uri)

        return self._submit(run)

    def save_weights_for_sampler(self, name: str, ttl_seconds: int | None = None,
                                 user_metadata: dict[str, str] | None = None) -> APIFuture[SaveWeightsForSamplerResponse]:
        """Inference weights (a peft adapter for LoRA, full safetensors otherwise)."""
        uri = self._checkpoint_path("sampler_weights", name)

        def run():
            self._trainer.save(uri, "sampler_weights")
            return SaveWeightsForSamplerResponse(path=uri, model=self._trainer.spec.base_model)

        return self._submit(run)

    def load_state(self, path: str) -> APIFuture[LoadStateResponse]:
        checkpoints.read_meta(path)
        return self._submit(lambda: (self._trainer.load(path, with_optimizer=False), LoadStateResponse(path))[1])

    def load_state_with_optimizer(self, path: str) -> APIFuture[LoadStateResponse]:
        checkpoints.read_meta(path)
        return self._submit(lambda: (self._trainer.load(path, with_optimizer=True), LoadStateResponse(path))[1])

    def save_weights_and_get_sampling_client(self, name: str | None = None, retry_config: Any = None,
                                             record_stability_info: bool = False, kind: str = "snapshot") -> SamplingClient:
        """A sampler over a snapshot of the current weights (after all operations submitted so far).

        Tinker's keywords are accepted: `name` and `retry_config` have no effect (as in Tinker 0.38),
        `record_stability_info` needs nothing extra (every sequence gets a `sequence_id`), and
        `kind="inflight"` is served by a snapshot, which always holds the newest weights it may."""
        if kind not in SAMPLING_CLIENT_KINDS:
            raise ValueError(f"kind={kind!r}: use one of {SAMPLING_CLIENT_KINDS}")
        return self._submit(self._snapshot_client).result()

    def _snapshot_client(self) -> SamplingClient:
        t = self._trainer
        return SamplingClient(t.frozen_copy(), t.tokenizer, t.context_length, t.images, t.spec.base_model,
                              f"{self.run}@step{t.optim_steps}")

    def create_sampling_client(self, model_path: str, retry_config: Any = None,
                               record_stability_info: bool = False) -> SamplingClient:
        return ServiceClient().create_sampling_client(model_path=model_path)

    # -- info ---------------------------------------------------------------------------------
    def get_tokenizer(self):
        return self._trainer.tokenizer

    def get_info(self) -> dict:
        t = self._trainer
        return {"model_id": self.run, "base_model": t.spec.base_model, "lora_rank": t.spec.lora_rank,
                "trainable_params": sum(p.numel() for p in t.params), "optim_steps": t.optim_steps}

    def get_usage(self) -> dict[str, int]:
        """Token accounting in the units the reference lab bills: trained and forward-only tokens."""
        return dict(self._trainer.usage)

    # -- async twins --------------------------------------------------------------------------
    async def forward_async(self, *args, **kwargs) -> APIFuture[ForwardBackwardOutput]:
        return await _submit_async(self.forward(*args, **kwargs))

    async def forward_backward_async(self, *args, **kwargs) -> APIFuture[ForwardBackwardOutput]:
        return await _submit_async(self.forward_backward(*args, **kwargs))

    async def forward_backward_custom_async(self, *args, **kwargs) -> APIFuture[ForwardBackwardOutput]:
        return await _submit_async(self.forward_backward_custom(*args, **kwargs))

    async def optim_step_async(self, *args, **kwargs) -> APIFuture[OptimStepResponse]:
        return await _submit_async(self.optim_step(*args, **kwargs))

    async def save_state_async(self, *args, **kwargs) -> APIFuture[SaveStateResponse]:
        return await _submit_async(self.save_state(*args, **kwargs))

    async def load_state_async(self, path: str) -> APIFuture[LoadStateResponse]:
        return await _submit_async(self.load_state(path))

    async def load_state_with_optimizer_async(self, path: str) -> APIFuture[LoadStateResponse]:
        return await _submit_async(self.load_state_with_optimizer(path))

    async def save_weights_for_sampler_async(self, *args, **kwargs) -> APIFuture[SaveWeightsForSamplerResponse]:
        return await _submit_async(self.save_weights_for_sampler(*args, **kwargs))

    async def save_weights_and_get_sampling_client_async(self, name: str | None = None, retry_config: Any = None,
                                                         record_stability_info: bool = False,
                                                         kind: str = "snapshot") -> SamplingClient:
        if kind not in SAMPLING_CLIENT_KINDS:
            raise ValueError(f"kind={kind!r}: use one of {SAMPLING_CLIENT_KINDS}")
        return await self._submit(self._snapshot_client)

    async def get_info_async(self) -> dict:
        return self.get_info()

    async def create_sampling_client_async(self, *args, **kwargs) -> SamplingClient:
        return await asyncio.to_thread(self.create_sampling_client, *args, **kwargs)


class SamplingClient(_ClientFuture):
    """Samples from one frozen set of weights. Concurrent `sample` calls are decoded as one batch."""

    def __init__(self, model, tokenizer, context_length: int, images, base_model: str, model_path: str | None):
        self.usage = {"prefill_tokens": 0, "sample_tokens": 0, "requests": 0}
        self._sampler = LocalSampler(model, tokenizer, context_length, self.usage, images)
        self._tokenizer = tokenizer
        self._images = images
        self.context_length = context_length
        self.base_model = base_model
        self.model_path = model_path
        self.task_id = model_path or f"{base_model}@base"

    def _check_prompt(self, prompt: ModelInput, field_name: str = "prompt") -> tuple[list[int], list[int] | None, list]:
        """(ids with every image expanded to its positions, token types or None, image chunks)."""
        if not isinstance(prompt, ModelInput):
            raise TypeError(f"{field_name} must be a ModelInput (ModelInput.from_ints(tokens)), got {type(prompt).__name__}")
        if prompt.has_images and self._images is None:
            raise ValueError(f"{field_name} holds an ImageChunk but {self.base_model!r} is a text-only model; use a "
                             "vision-language model (arl/tiny-qwen2-vl-3m, a local Qwen2-VL folder) or drop the image")
        if prompt.has_images:
            tokens, types, images = self._images.expand(prompt, field_name)
        else:
            tokens, types, images = prompt.to_ints(), None, []
        text = [t for c in prompt.chunks if not isinstance(c, ImageChunk) for t in c.tokens]
        if not tokens:
            raise ValueError(f"{field_name} is empty; it needs at least one token")
        if len(tokens) >= self.context_length:
            raise ValueError(f"{field_name} has {len(tokens)} tokens but {self.base_model!r} has a context of "
                             f"{self.context_length}; shorten the prompt")
        vocab = self._sampler.vocab_size
        if text and (min(text) < 0 or max(text) >= vocab):
            raise ValueError(f"{field_name} holds a token id outside the vocabulary [0, {vocab})")
        return tokens, types, images

    def sample(self, prompt: ModelInput, num_samples: int = 1, sampling_params: SamplingParams | None = None,
               include_prompt_logprobs: bool = False, topk_prompt_logprobs: int = 0,
               return_text: bool = True) -> APIFuture[SampleResponse]:
        params = sampling_params if sampling_params is not None else SamplingParams()
        if not isinstance(params, SamplingParams):
            raise TypeError(f"sampling_params must be a SamplingParams, got {type(params).__name__}")
        if not isinstance(num_samples, int) or num_samples < 1:
            raise ValueError(f"num_samples must be a positive int, got {num_samples!r}")
        if topk_prompt_logprobs < 0:
            raise ValueError(f"topk_prompt_logprobs must be >= 0, got {topk_prompt_logprobs}")
        tokens, types, images = self._check_prompt(prompt)
        self.usage["requests"] += 1
        req = SampleRequest(tokens, num_samples, params, include_prompt_logprobs, topk_prompt_logprobs, return_text,
                            types, images)
        return APIFuture(self._sampler.submit(req))

    def compute_logprobs(self, prompt: ModelInput) -> APIFuture[list[float | None]]:
        """logp of each token given the ones before it; the first entry is None, and so is every image
        position's (an image position is not a predicted token)."""
        tokens, types, images = self._check_prompt(prompt)
        self.usage["requests"] += 1
        return APIFuture(self._sampler.submit(SampleRequest(tokens, 0, SamplingParams(), True, 0, False, types, images)))

    async def sample_async(self, *args, **kwargs) -> SampleResponse:
        return await self.sample(*args, **kwargs)

    async def compute_logprobs_async(self, prompt: ModelInput) -> list[float | None]:
        return await self.compute_logprobs(prompt)

    def get_tokenizer(self):
        return self._tokenizer

    def get_base_model(self) -> str:
        return self.base_model

    def get_usage(self) -> dict[str, int]:
        """Prefill (prompt) and sampled tokens: the units the reference lab bills sampling in."""
        return dict(self.usage)


class RestClient:
    """PyTRIO's / Tinker's checkpoint metadata client, over the local checkpoint folders
    (`ARL_HOME/checkpoints/RUN/KIND/NAME`): a training run is a run folder, a checkpoint one of its
    `training_state` / `sampler_weights` folders. Checkpoints saved to a `ServiceClient(checkpoint_dir=...)`
    are not under that root and are not listed. Methods return futures (already completed), their
    `_async` twins the result."""

    _KIND_TYPES: ClassVar[dict[str, str]] = {"training_state": "training", "sampler_weights": "sampler"}
    _KIND_ALIASES: ClassVar[dict[str, str]] = {"weights": "training_state", "training_state": "training_state",
                                               "sampler_weights": "sampler_weights"}
    """Tinker names the training-state folder `weights`; both spellings are accepted in ids."""

    def _runs(self) -> list[Path]:
        root = checkpoints.checkpoint_root()
        runs = [d for d in root.iterdir() if d.is_dir()] if root.is_dir() else []
        return sorted(runs, key=lambda d: d.name)

    def _checkpoints(self, run: str) -> list[Checkpoint]:
        out = []
        folder = checkpoints.checkpoint_root() / run
        for kind, ctype in self._KIND_TYPES.items():
            kind_dir = folder / kind
            if not kind_dir.is_dir():
                continue
            for ckpt in sorted(kind_dir.iterdir()):
                if not (ckpt / checkpoints.META_FILE).is_file():
                    continue  # a partial write, or not a checkpoint
                mtime = (ckpt / checkpoints.META_FILE).stat().st_mtime
                out.append(Checkpoint(
                    checkpoint_id=f"{kind}/{ckpt.name}", checkpoint_type=ctype,
                    time=datetime.datetime.fromtimestamp(mtime, datetime.UTC),
                    path=checkpoints.make_uri(run, kind, ckpt.name),
                    size_bytes=sum(f.stat().st_size for f in ckpt.iterdir() if f.is_file()),
                ))
        return sorted(out, key=lambda c: c.time)

    def _run_folder(self, training_run_id: str) -> Path:
        folder = checkpoints.checkpoint_root() / training_run_id
        if not training_run_id or "/" in training_run_id or not folder.is_dir():
            raise errors.NotFoundError(f"training_run_id={training_run_id!r}: no run folder {folder}; "
                                       f"list_training_runs() shows the runs under {checkpoints.checkpoint_root()}")
        return folder

    def get_training_run(self, training_run_id: str, access_scope: str = "owned") -> APIFuture[TrainingRun]:
        return APIFuture.completed(self._training_run(training_run_id))

    def _training_run(self, training_run_id: str) -> TrainingRun:
        self._run_folder(training_run_id)
        ckpts = self._checkpoints(training_run_id)
        if not ckpts:
            raise errors.NotFoundError(f"training run {training_run_id!r} holds no checkpoint")
        _, meta = checkpoints.read_meta(ckpts[-1].path)
        training = [c for c in ckpts if c.checkpoint_type == "training"]
        sampler = [c for c in ckpts if c.checkpoint_type == "sampler"]
        return TrainingRun(
            training_run_id=training_run_id, base_model=meta["base_model"], model_owner="local",
            is_lora=meta["lora_rank"] is not None, lora_rank=meta["lora_rank"], last_request_time=ckpts[-1].time,
            last_checkpoint=training[-1] if training else None, last_sampler_checkpoint=sampler[-1] if sampler else None,
        )

    def list_training_runs(self, limit: int = 20, offset: int = 0,
                           access_scope: str = "owned") -> APIFuture[TrainingRunsResponse]:
        runs = [r.name for r in self._runs() if self._checkpoints(r.name)]
        page = [self._training_run(r) for r in runs[offset:offset + limit]]
        return APIFuture.completed(TrainingRunsResponse(page, Cursor(offset, limit, len(runs))))

    def list_checkpoints(self, training_run_id: str) -> APIFuture[CheckpointsListResponse]:
        """Every checkpoint of one run, oldest first."""
        self._run_folder(training_run_id)
        return APIFuture.completed(CheckpointsListResponse(self._checkpoints(training_run_id)))

    def list_user_checkpoints(self, limit: int = 100, offset: int = 0) -> APIFuture[CheckpointsListResponse]:
        """Every run's checkpoints, newest first, one page of them."""
        every = sorted((c for r in self._runs() for c in self._checkpoints(r.name)), key=lambda c: c.time, reverse=True)
        return APIFuture.completed(CheckpointsListResponse(every[offset:offset + limit], Cursor(offset, limit, len(every))))

    def delete_checkpoint(self, training_run_id: str, checkpoint_id: str) -> APIFuture[None]:
        """Delete one checkpoint folder; `checkpoint_id` is `KIND/NAME` as `list_checkpoints` gives it."""
        kind, _, name = checkpoint_id.partition("/")
        if kind not in self._KIND_ALIASES or not name or "/" in name:
            raise ValueError(f"checkpoint_id={checkpoint_id!r}: expected training_state/NAME or sampler_weights/NAME "
                             "(a Checkpoint.checkpoint_id from list_checkpoints)")
        folder = self._run_folder(training_run_id) / self._KIND_ALIASES[kind] / name
        if not (folder / checkpoints.META_FILE).is_file():
            raise errors.NotFoundError(f"no checkpoint {checkpoint_id!r} in run {training_run_id!r} ({folder})")
        shutil.rmtree(folder)
        return APIFuture.completed(None)

    def delete_checkpoint_from_tinker_path(self, tinker_path: str) -> APIFuture[None]:
        """Delete the checkpoint behind a URI (`arl://RUN/KIND/NAME`, or its trio:// / tinker:// spelling)."""
        scheme = next((s for s in checkpoints.SCHEMES if tinker_path.startswith(s)), None)
        parts = tinker_path[len(scheme):].split("/") if scheme else []
        if len(parts) != 3:
            raise ValueError(f"tinker_path={tinker_path!r}: expected arl://RUN/KIND/NAME (a path save_state or "
                             "save_weights_for_sampler returned)")
        return self.delete_checkpoint(parts[0], f"{parts[1]}/{parts[2]}")

    async def get_training_run_async(self, *args, **kwargs) -> TrainingRun:
        return self.get_training_run(*args, **kwargs).result()

    async def list_training_runs_async(self, *args, **kwargs) -> TrainingRunsResponse:
        return self.list_training_runs(*args, **kwargs).result()

    async def list_checkpoints_async(self, training_run_id: str) -> CheckpointsListResponse:
        return self.list_checkpoints(training_run_id).result()

    async def list_user_checkpoints_async(self, *args, **kwargs) -> CheckpointsListResponse:
        return self.list_user_checkpoints(*args, **kwargs).result()

    async def delete_checkpoint_async(self, training_run_id: str, checkpoint_id: str) -> None:
        return self.delete_checkpoint(training_run_id, checkpoint_id).result()

    async def delete_checkpoint_from_tinker_path_async(self, tinker_path: str) -> None:
        return self.delete_checkpoint_from_tinker_path(tinker_path).result()
