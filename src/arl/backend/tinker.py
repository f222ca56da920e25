"""arl's client API over the real `tinker` SDK (`backend=tinker`): the `ServiceClient`, `TrainingClient`
and `SamplingClient` calls the recipes make, sent to any Tinker-compatible service (Tinker itself, or
`arl serve`), arl's types converted to the SDK's on the way out and back on the way in.

What differs from the local engine, and why:
- Training is LoRA only: no Tinker-compatible service has full fine-tuning (`create_full_training_client`).
- Checkpoints are `tinker://` paths that live on the service; the run folder records them (arl.rl.session).
- Tensors cross the wire as float32 (the API's `TensorData`), so a float64 run agrees with a local one to
  float32 precision, not bit for bit.
- The tokenizer of an arl model (`arl/tiny-...`, a local folder) is arl's own, loaded here; any other name
  gets the SDK's, which asks the Hugging Face hub.
- A wait gives up when the service has refused connections for `UNREACHABLE_S` (the SDK alone retries
  for minutes), with one line that names the service and what to do.

Imported only for a run on a remote backend, so arl works without the SDK installed.
"""

from __future__ import annotations

import concurrent.futures
import logging
import socket
import time
import urllib.parse
from typing import Any, Callable

import numpy as np
import tinker
from tinker import types as tt
from tinker.lib.base_url import resolve_base_url

from .. import models
from .. import types as at

UNREACHABLE_S = 10.0
"""How long the service may refuse connections before a wait stops the run."""
POLL_S = 1.0
"""How often a wait checks that the service still answers."""


class ServiceUnreachableError(RuntimeError):
    """The service stopped answering; what the run wrote so far is intact."""


class _Link:
    """The service's address, and waiting on its futures: results converted, errors made one line."""

    def __init__(self, base_url: str, resume_hint: str):
        self.base_url = base_url
        parts = urllib.parse.urlsplit(base_url)
        self._address = (parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        self._hint = resume_hint

    def answers(self) -> bool:
        try:
            socket.create_connection(self._address, timeout=POLL_S).close()
            return True
        except OSError:
            return False

    def connect(self) -> None:
        """Wait up to `UNREACHABLE_S` for the service to accept connections: the SDK's first call (its
        client configuration) would otherwise retry a refused connection for minutes, in no future
        that `wait` could watch."""
        deadline = time.monotonic() + UNREACHABLE_S
        while not self.answers():
            if time.monotonic() >= deadline:
                raise self.unreachable(f"has refused connections for {UNREACHABLE_S:.0f} s")
            time.sleep(POLL_S)

    def unreachable(self, why: str) -> ServiceUnreachableError:
        return ServiceUnreachableError(f"backend=tinker: the service at {self.base_url} {why}; what the run wrote "
                                       f"is intact: start the service again, then {self._hint}")

    def wait(self, future: concurrent.futures.Future, timeout: float | None = None):
        """`future`'s result; `ServiceUnreachableError` once the service has refused connections for
        `UNREACHABLE_S`, a one-line ValueError / RuntimeError for an error the service answered with."""
        start, down_since = time.monotonic(), None
        while True:
            try:
                return self._result(future, POLL_S)
            except concurrent.futures.TimeoutError:
                pass
            now = time.monotonic()
            if timeout is not None and now - start >= timeout:
                raise concurrent.futures.TimeoutError(f"no answer from {self.base_url} within {timeout} s")
            if self.answers():
                down_since = None
            elif down_since is None:
                down_since = now
            elif now - down_since >= UNREACHABLE_S:
                raise self.unreachable(f"has refused connections for {UNREACHABLE_S:.0f} s")

    def _result(self, future: concurrent.futures.Future, timeout: float):
        try:
            return future.result(timeout)
        except tinker.APIConnectionError:
            raise self.unreachable("does not answer") from None
        except tinker.APIStatusError as e:
            error = ValueError if 400 <= e.status_code < 500 else RuntimeError
            detail = e.body.get("detail", e.message) if isinstance(e.body, dict) else e.message
            raise error(f"backend=tinker: {self.base_url} answered {e.status_code}: {_one_line(detail)}") from e
        except tinker.TinkerError as e:
            raise RuntimeError(f"backend=tinker: a request to {self.base_url} failed: {_one_line(str(e))}") from e

    def future(self, sdk_future, convert: Callable) -> _Future:
        """arl's future of `convert(the SDK future's result)`."""
        out: concurrent.futures.Future = concurrent.futures.Future()

        def done(f: concurrent.futures.Future) -> None:
            try:
                out.set_result(convert(f.result()))
            except BaseException as e:  # noqa: BLE001 - handed to the waiter, which makes it one line
                out.set_exception(e)

        sdk_future.future().add_done_callback(done)
        return _Future(out, self)


def _one_line(text: str) -> str:
    return " ".join(str(text).split())


class _Future(at.APIFuture):
    """arl's future of a converted SDK result, waited on through the link's checks."""

    def __init__(self, future: concurrent.futures.Future, link: _Link):
        super().__init__(future)
        self._link = link

    def result(self, timeout: float | None = None):
        return self._link.wait(self._future, timeout)


# -- arl types -> the SDK's ------------------------------------------------------------------
def to_model_input(mi: at.ModelInput) -> tt.ModelInput:
    chunks = []
    for c in mi.chunks:
        if isinstance(c, at.EncodedTextChunk):
            chunks.append(tt.EncodedTextChunk(tokens=list(c.tokens)))
        elif isinstance(c, at.ImageChunk):
            chunks.append(tt.ImageChunk(data=bytes(c.data), format=c.format, expected_tokens=c.expected_tokens))
        else:
            raise ValueError(f"a {type(c).__name__} cannot be sent to a Tinker service; use EncodedTextChunk or ImageChunk")
    return tt.ModelInput(chunks=chunks)


def to_tensor(td: at.TensorData) -> tt.TensorData:
    array = td.to_numpy()
    return tt.TensorData(data=array.reshape(-1), dtype=td.dtype, shape=list(array.shape))


def _span(span):
    kind = tt.SampledProvenanceSpan if isinstance(span, at.SampledProvenanceSpan) else tt.PromptProvenanceSpan
    return kind(sequence_id=span.sequence_id, offset=span.offset, length=span.length)


def to_datum(d: at.Datum) -> tt.Datum:
    spans = {} if d.model_input_spans is None else {
        "model_input_spans": [_span(s) for s in d.model_input_spans],
        "loss_fn_input_spans": [_span(s) for s in d.loss_fn_input_spans]}
    return tt.Datum(model_input=to_model_input(d.model_input),
                    loss_fn_inputs={k: to_tensor(v) for k, v in d.loss_fn_inputs.items()}, **spans)


def to_sampling_params(p: at.SamplingParams) -> tt.SamplingParams:
    return tt.SamplingParams(max_tokens=p.max_tokens, seed=p.seed, stop=p.stop, temperature=p.temperature,
                             top_k=p.top_k, top_p=p.top_p)


def to_adam(p: at.AdamParams) -> tt.AdamParams:
    return tt.AdamParams(learning_rate=p.learning_rate, beta1=p.beta1, beta2=p.beta2, eps=p.eps,
                         weight_decay=p.weight_decay, grad_clip_norm=p.grad_clip_norm)


# -- the SDK's types -> arl's ----------------------------------------------------------------
def from_tensor(td: tt.TensorData) -> at.TensorData:
    return at.TensorData.from_numpy(np.asarray(td.to_numpy()))


def metric_name(key: str) -> str:
    """arl's name of a forward_backward metric: the wire form `name:reduction` (the API's chunk merger
    needs one) of an arl key such as `tokens/total` loses its reduction; Tinker's own keys (`loss:sum`,
    no `/`) stay as they are."""
    name, colon, _ = key.rpartition(":")
    return name if colon and "/" in name else key


def from_forward_backward(out: tt.ForwardBackwardOutput) -> at.ForwardBackwardOutput:
    return at.ForwardBackwardOutput(
        loss_fn_output_type=out.loss_fn_output_type,
        loss_fn_outputs=[{k: from_tensor(v) for k, v in o.items()} for o in out.loss_fn_outputs],
        metrics={metric_name(k): float(v) for k, v in out.metrics.items()})


def from_sample(res: tt.SampleResponse, tokenizer, return_text: bool, prompt_tokens: int) -> at.SampleResponse:
    sequences = []
    for s in res.sequences:
        tokens = list(s.tokens)
        sequences.append(at.SampledSequence(stop_reason=s.stop_reason, tokens=tokens, logprobs=list(s.logprobs or ()),
                                            text=tokenizer.decode(tokens) if return_text else None,
                                            sequence_id=s.sequence_id))
    return at.SampleResponse(sequences=sequences, prompt_logprobs=res.prompt_logprobs,
                             topk_prompt_logprobs=res.topk_prompt_logprobs,
                             input_tokens=prompt_tokens, output_tokens=sum(len(s.tokens) for s in sequences))


def tokenizer_of(base_model: str, sdk_client) -> Any:
    """arl's own tokenizer for a model arl has (the service's copy of it is the same), else the SDK's."""
    try:
        models.zoo.check_name(base_model)
    except models.ModelNotFoundError:
        return sdk_client.get_tokenizer()
    return models.load_tokenizer(base_model)


# -- the clients -----------------------------------------------------------------------------
class ServiceClient:
    """Creates training and sampling clients on a Tinker-compatible service.

    `base_url` None: `TINKER_BASE_URL`, else the SDK's default (Tinker itself); the API key comes from
    `TINKER_API_KEY` (or the SDK's other credential sources), never from arl's config. `resume_hint`
    ends the message of an unreachable service (what the user runs once it is back)."""

    def __init__(self, base_url: str | None = None, resume_hint: str = "run again", display_name: str | None = None):
        logging.getLogger("tinker").setLevel(logging.ERROR)  # the SDK's retry chatter; failures surface here
        self.base_url = resolve_base_url(base_url)
        self._sdk = tinker.ServiceClient(base_url=self.base_url, display_name=display_name)
        self._link = _Link(self.base_url, resume_hint)
        self._link.connect()

    def _training_client(self, sdk_future) -> TrainingClient:
        return TrainingClient(self._link.wait(sdk_future.future()), self._link)

    def create_lora_training_client(self, base_model: str, rank: int = 32, seed: int | None = None,
                                    train_mlp: bool = True, train_attn: bool = True, train_unembed: bool = True,
                                    **_ignored: Any) -> TrainingClient:
        return self._training_client(self._sdk.create_lora_training_client(
            base_model, rank=rank, seed=seed, train_mlp=train_mlp, train_attn=train_attn, train_unembed=train_unembed))

    def create_full_training_client(self, base_model: str, seed: int | None = None) -> TrainingClient:
        raise ValueError(f"backend=tinker: full fine-tuning of {base_model!r} exists on no Tinker-compatible "
                         "service; train LoRA (lora_rank > 0), or run with backend=local")

    def create_training_client_from_state(self, path: str) -> TrainingClient:
        """Weights of a `tinker://` checkpoint on the service, a fresh optimizer."""
        return self._training_client(self._sdk.create_training_client_from_state(path))

    def create_training_client_from_state_with_optimizer(self, path: str) -> TrainingClient:
        """A `tinker://` save_state checkpoint exactly: weights and optimizer state."""
        return self._training_client(self._sdk.create_training_client_from_state_with_optimizer(path))

    def create_sampling_client(self, base_model: str | None = None, model_path: str | None = None,
                               **_ignored: Any) -> SamplingClient:
        if model_path is None and base_model is None:
            raise ValueError("create_sampling_client needs base_model or model_path")
        sdk = self._link.wait(self._sdk.create_sampling_client(model_path=model_path, base_model=base_model).future())
        name = base_model or sdk.get_base_model()
        return SamplingClient(sdk, self._link, tokenizer_of(name, sdk), name, model_path)


class TrainingClient:
    """Trains one model on the service; operations run there in submission order."""

    def __init__(self, sdk, link: _Link):
        self._sdk, self._link = sdk, link
        info = sdk.get_info()
        self.model_id = info.model_id
        self.base_model = info.model_data.model_name
        self._tokenizer = tokenizer_of(self.base_model, sdk)

    def forward(self, data: list[at.Datum], loss_fn: str = "cross_entropy",
                loss_fn_config: dict | None = None) -> _Future:
        """Loss and per-token logprobs without gradients."""
        return self._link.future(self._sdk.forward([to_datum(d) for d in data], loss_fn, loss_fn_config),
                                 from_forward_backward)

    def forward_backward(self, data: list[at.Datum], loss_fn: str = "cross_entropy",
                         loss_fn_config: dict | None = None) -> _Future:
        """Accumulate the gradient of the summed built-in loss over `data`."""
        return self._link.future(self._sdk.forward_backward([to_datum(d) for d in data], loss_fn, loss_fn_config),
                                 from_forward_backward)

    def forward_backward_custom(self, data: list[at.Datum], loss_fn: Callable,
                                loss_fn_config: dict | None = None) -> _Future:
        """The SDK's linearisation of `loss_fn(data, logprobs_list) -> (loss, metrics)` (a forward, the loss
        differentiated here, a cross-entropy backward on the service); `loss_fn` sees arl's datums."""
        extra = () if loss_fn_config is None else (loss_fn_config,)
        return self._link.future(self._sdk.forward_backward_custom(
            [to_datum(d) for d in data], lambda _sdk_data, logprobs: loss_fn(data, logprobs, *extra)),
            from_forward_backward)

    def optim_step(self, adam_params: at.AdamParams | None = None) -> _Future:
        return self._link.future(self._sdk.optim_step(to_adam(adam_params or at.AdamParams())),
                                 lambda r: at.OptimStepResponse(metrics=dict(r.metrics or {})))

    def save_state(self, name: str, ttl_seconds: int | None = None, overwrite: bool = False) -> _Future:
        """Weights and optimizer state on the service: the result's `path` is a `tinker://` path."""
        return self._link.future(self._sdk.save_state(name, ttl_seconds=ttl_seconds, overwrite=overwrite),
                                 lambda r: at.SaveStateResponse(path=r.path))

    def save_weights_for_sampler(self, name: str, ttl_seconds: int | None = None) -> _Future:
        return self._link.future(self._sdk.save_weights_for_sampler(name, ttl_seconds=ttl_seconds),
                                 lambda r: at.SaveWeightsForSamplerResponse(path=r.path, model=self.base_model))

    def save_weights_and_get_sampling_client(self, name: str | None = None) -> SamplingClient:
        """A sampler over the weights after every operation submitted so far."""
        sdk = self._link.wait(self._sdk.save_weights_and_get_sampling_client().future())
        return SamplingClient(sdk, self._link, self._tokenizer, self.base_model, None)

    def create_sampling_client(self, model_path: str) -> SamplingClient:
        sdk = self._link.wait(self._sdk.create_sampling_client(model_path).future())
        return SamplingClient(sdk, self._link, self._tokenizer, self.base_model, model_path)

    def get_tokenizer(self):
        return self._tokenizer

    def get_info(self) -> dict:
        info = self._sdk.get_info()
        return {"model_id": info.model_id, "base_model": self.base_model, "lora_rank": info.lora_rank}


class SamplingClient:
    """Samples on the service from one frozen set of weights."""

    def __init__(self, sdk, link: _Link, tokenizer, base_model: str, model_path: str | None):
        self._sdk, self._link, self._tokenizer = sdk, link, tokenizer
        self.base_model, self.model_path = base_model, model_path

    def sample(self, prompt: at.ModelInput, num_samples: int = 1, sampling_params: at.SamplingParams | None = None,
               include_prompt_logprobs: bool = False, topk_prompt_logprobs: int = 0,
               return_text: bool = True) -> _Future:
        params = to_sampling_params(sampling_params or at.SamplingParams())
        return self._link.future(
            self._sdk.sample(to_model_input(prompt), num_samples, params, include_prompt_logprobs=include_prompt_logprobs,
                             topk_prompt_logprobs=topk_prompt_logprobs),
            lambda r: from_sample(r, self._tokenizer, return_text, prompt.length))

    def compute_logprobs(self, prompt: at.ModelInput) -> _Future:
        """logp of each token given the ones before it (None where there is none: the first)."""
        return self._link.future(self._sdk.compute_logprobs(to_model_input(prompt)), list)

    def get_tokenizer(self):
        return self._tokenizer

    def get_base_model(self) -> str:
        return self.base_model
