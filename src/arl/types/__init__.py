"""Client data types, shaped like the Tinker / PyTRIO SDK so their scripts run with `import arl as trio`.

Conventions (DESIGN.md): position i of `model_input` predicts token i+1; every `loss_fn_inputs` array
has the length of `model_input`. These types validate what they can on construction, so a bad datum
fails in the caller's line, not deep inside a backward pass.

A package rather than a module so that Tinker's module paths (`tinker.types.tensor_data`) exist here
too; everything is defined in this file and importable as `arl.types.X`.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import datetime
import math
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Generic, Literal, Sequence, TypeVar

import numpy as np

T = TypeVar("T")
U = TypeVar("U")

# ---------------------------------------------------------------------------------------------
# Model inputs


@dataclass(frozen=True)
class EncodedTextChunk:
    """A run of token ids."""

    tokens: list[int]
    type: Literal["encoded_text"] = "encoded_text"

    def __post_init__(self):
        toks = list(self.tokens)
        for t in toks:
            if not isinstance(t, (int, np.integer)) or isinstance(t, bool) or t < 0:
                raise ValueError(f"EncodedTextChunk.tokens: every token must be an int >= 0, got {t!r}")
        object.__setattr__(self, "tokens", [int(t) for t in toks])

    @property
    def length(self) -> int:
        return len(self.tokens)


@dataclass(frozen=True)
class ImageChunk:
    """An encoded image that the model's vision tower turns into `expected_tokens` positions.

    The image header is checked here (PNG or JPEG magic bytes matching `format`), and the chunk counts
    `expected_tokens` towards `ModelInput.length`, so lengths and datum alignment can be checked even
    before a vision model exists.
    """

    data: bytes
    format: Literal["png", "jpeg"]
    expected_tokens: int
    type: Literal["image"] = "image"

    def __post_init__(self):
        if self.format not in ("png", "jpeg"):
            raise ValueError(f"ImageChunk.format must be 'png' or 'jpeg', got {self.format!r}")
        if not isinstance(self.data, (bytes, bytearray)) or not self.data:
            raise ValueError("ImageChunk.data must be the non-empty encoded image bytes")
        magic = {"png": b"\x89PNG\r\n\x1a\n", "jpeg": b"\xff\xd8\xff"}[self.format]
        if not bytes(self.data[: len(magic)]) == magic:
            raise ValueError(
                f"ImageChunk.data is not a {self.format} file (header {bytes(self.data[:8])!r}); "
                "pass the encoded file bytes and the matching format"
            )
        if not isinstance(self.expected_tokens, int) or self.expected_tokens <= 0:
            raise ValueError(
                f"ImageChunk.expected_tokens must be a positive int (the number of image positions the "
                f"model's processor produces), got {self.expected_tokens!r}"
            )

    @property
    def length(self) -> int:
        return self.expected_tokens


@dataclass(frozen=True)
class ImageAssetPointerChunk:
    """Tinker's image-by-reference chunk (a path or URL the service fetches). Defined so that scripts'
    type checks work; the local engine does not fetch images, so a `ModelInput` refuses it."""

    format: Literal["png", "jpeg"]
    location: str
    expected_tokens: int | None = None
    type: Literal["image_asset_pointer"] = "image_asset_pointer"

    @property
    def length(self) -> int:
        if self.expected_tokens is None:
            raise ValueError("ImageAssetPointerChunk.expected_tokens must be set to compute the length")
        return self.expected_tokens


Chunk = EncodedTextChunk | ImageChunk
ModelInputChunk = EncodedTextChunk | ImageChunk | ImageAssetPointerChunk
"""Tinker's name for the union of chunk types."""


@dataclass(frozen=True)
class ModelInput:
    """A sequence of chunks: text tokens and images."""

    chunks: list[Chunk] = field(default_factory=list)

    def __post_init__(self):
        for i, c in enumerate(self.chunks):
            if isinstance(c, ImageAssetPointerChunk):
                raise TypeError(f"ModelInput.chunks[{i}] is an ImageAssetPointerChunk, which the local engine cannot "
                                "fetch; read the file and pass ImageChunk(data=..., format=..., expected_tokens=...)")
            if not isinstance(c, (EncodedTextChunk, ImageChunk)):
                raise TypeError(
                    f"ModelInput.chunks[{i}] is a {type(c).__name__}; use EncodedTextChunk or ImageChunk"
                )
        object.__setattr__(self, "chunks", list(self.chunks))

    @classmethod
    def from_ints(cls, tokens: Sequence[int]) -> ModelInput:
        return cls(chunks=[EncodedTextChunk(tokens=list(tokens))])

    @classmethod
    def empty(cls) -> ModelInput:
        return cls(chunks=[])

    def to_ints(self) -> list[int]:
        if self.has_images:
            raise ValueError("ModelInput.to_ints(): this input holds image chunks, which are not tokens")
        return [t for c in self.chunks for t in c.tokens]

    @property
    def length(self) -> int:
        return sum(c.length for c in self.chunks)

    def __len__(self) -> int:
        return self.length

    @property
    def has_images(self) -> bool:
        return any(isinstance(c, ImageChunk) for c in self.chunks)

    def append(self, chunk: Chunk) -> ModelInput:
        return ModelInput(chunks=[*self.chunks, chunk])

    def append_int(self, token: int) -> ModelInput:
        if self.chunks and isinstance(self.chunks[-1], EncodedTextChunk):
            last = self.chunks[-1]
            return ModelInput(chunks=[*self.chunks[:-1], EncodedTextChunk(tokens=[*last.tokens, token])])
        return self.append(EncodedTextChunk(tokens=[token]))


# ---------------------------------------------------------------------------------------------
# Tensors and datums

_DTYPES = {"int64": np.int64, "float32": np.float32}


@dataclass(frozen=True)
class TensorData:
    """A flat list plus dtype and shape: the wire form of an array."""

    data: list
    dtype: Literal["int64", "float32"]
    shape: list[int] | None = None

    @classmethod
    def from_numpy(cls, array: np.ndarray) -> TensorData:
        array = np.asarray(array)
        if np.issubdtype(array.dtype, np.integer) or array.dtype == bool:
            dtype = "int64"
        elif np.issubdtype(array.dtype, np.floating):
            dtype = "float32"
        else:
            raise TypeError(f"TensorData: unsupported array dtype {array.dtype}; use integers or floats")
        return cls(data=array.astype(_DTYPES[dtype]).reshape(-1).tolist(), dtype=dtype, shape=list(array.shape))

    @classmethod
    def from_torch(cls, tensor) -> TensorData:
        return cls.from_numpy(tensor.detach().cpu().numpy())

    def to_numpy(self) -> np.ndarray:
        arr = np.asarray(self.data, dtype=_DTYPES[self.dtype])
        return arr.reshape(self.shape) if self.shape is not None else arr

    def to_torch(self):
        import torch

        return torch.from_numpy(self.to_numpy())

    def tolist(self) -> list:
        return self.to_numpy().tolist()

    def __len__(self) -> int:
        return self.shape[0] if self.shape else len(self.data)


def to_tensor_data(name: str, value: Any) -> TensorData:
    """Convert numpy arrays, torch tensors and lists to TensorData, naming the field on failure."""
    if isinstance(value, TensorData):
        return value
    if hasattr(value, "detach") and hasattr(value, "cpu"):
        return TensorData.from_torch(value)
    try:
        array = np.asarray(value)
    except Exception as e:  # ragged lists and the like
        raise ValueError(f"loss_fn_inputs[{name!r}]: cannot convert to an array ({e})") from e
    if array.dtype == object:
        raise ValueError(f"loss_fn_inputs[{name!r}]: expected a flat list of numbers, got {value!r:.80}")
    if array.size == 0 and array.dtype == np.float64 and name == "target_tokens":
        array = array.astype(np.int64)
    return TensorData.from_numpy(array)


@dataclass(frozen=True, kw_only=True)
class PromptProvenanceSpan:
    """A run of datum positions that are positions [offset, offset + length) of the prompt of the
    sampling request that produced sequence `sequence_id` (Tinker's type, same fields)."""

    sequence_id: str
    offset: int = 0
    length: int

    def __post_init__(self):
        _check_span(self)


@dataclass(frozen=True, kw_only=True)
class SampledProvenanceSpan:
    """A run of datum positions that are positions [offset, offset + length) of the sampled tokens of
    sequence `sequence_id` (`SampledSequence.sequence_id`)."""

    sequence_id: str
    offset: int = 0
    length: int

    def __post_init__(self):
        _check_span(self)


ProvenanceSpans = list[PromptProvenanceSpan | SampledProvenanceSpan]
"""Consecutive runs tiling one Datum field, in order (see `Datum.with_provenance`)."""


def _check_span(span) -> None:
    name = type(span).__name__
    if not isinstance(span.sequence_id, str) or not span.sequence_id:
        raise ValueError(f"{name}.sequence_id must be a non-empty string (a SampledSequence.sequence_id)")
    if span.offset < 0:
        raise ValueError(f"{name}.offset must be >= 0, got {span.offset}")
    if span.length < 0:
        raise ValueError(f"{name}.length must be >= 0, got {span.length}")


def _check_spans(field_name: str, spans, expected_length: int) -> None:
    for i, span in enumerate(spans):
        if not isinstance(span, (PromptProvenanceSpan, SampledProvenanceSpan)):
            raise TypeError(f"{field_name}[{i}] is a {type(span).__name__}; use PromptProvenanceSpan or "
                            "SampledProvenanceSpan")
    total = sum(span.length for span in spans)
    if total != expected_length:
        raise ValueError(f"{field_name} spans cover {total} positions but the field has {expected_length}; "
                         "the runs must tile it exactly")


@dataclass(frozen=True)
class Datum:
    """One training example: `model_input` plus per-position arrays in `loss_fn_inputs`.

    Every array must have the length of `model_input` (position i predicts token i+1). The optional
    provenance spans (Tinker 0.38, set with `with_provenance`) name the sampled sequence behind each
    position; `stable_reinforce` needs them.
    """

    model_input: ModelInput
    loss_fn_inputs: dict[str, TensorData] = field(default_factory=dict)
    model_input_spans: ProvenanceSpans | None = None
    """Runs tiling `model_input` (their lengths sum to its length)."""
    loss_fn_input_spans: ProvenanceSpans | None = None
    """Runs tiling `loss_fn_inputs['target_tokens']`."""

    def with_provenance(self, model_input: ProvenanceSpans, loss_fn_inputs: ProvenanceSpans) -> Datum:
        """A copy carrying provenance for both fields; a miscounted tiling fails here, at the call site."""
        return replace(self, model_input_spans=list(model_input), loss_fn_input_spans=list(loss_fn_inputs))

    def __post_init__(self):
        if not isinstance(self.model_input, ModelInput):
            raise TypeError(f"Datum.model_input must be a ModelInput, got {type(self.model_input).__name__}")
        n = self.model_input.length
        converted = {}
        for name, value in dict(self.loss_fn_inputs).items():
            td = to_tensor_data(name, value)
            if td.shape is not None and len(td.shape) != 1:
                raise ValueError(f"loss_fn_inputs[{name!r}]: expected a 1-D array, got shape {td.shape}")
            if len(td) != n:
                raise ValueError(
                    f"loss_fn_inputs[{name!r}] has length {len(td)} but model_input has length {n}; "
                    "every array needs one entry per model_input position (position i predicts token i+1)"
                )
            if name == "target_tokens" and td.dtype != "int64":
                arr = td.to_numpy()
                if not np.all(arr == np.round(arr)):
                    raise ValueError("loss_fn_inputs['target_tokens'] must hold integer token ids")
                td = TensorData.from_numpy(arr.astype(np.int64))
            converted[name] = td
        object.__setattr__(self, "loss_fn_inputs", converted)
        if (self.model_input_spans is None) != (self.loss_fn_input_spans is None):
            raise ValueError("Datum provenance comes as a pair: set both model_input_spans and loss_fn_input_spans "
                             "(Datum.with_provenance does) or neither")
        if self.model_input_spans is not None:
            _check_spans("with_provenance model_input", self.model_input_spans, n)
            _check_spans("with_provenance loss_fn_inputs", self.loss_fn_input_spans, n)


# ---------------------------------------------------------------------------------------------
# Parameters


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. `stop` is a string, a list of strings, or a list of token ids."""

    max_tokens: int | None = None
    seed: int | None = None
    stop: str | list[str] | list[int] | None = None
    temperature: float = 1.0
    top_k: int = -1
    top_p: float = 1.0

    def __post_init__(self):
        if self.max_tokens is not None and (not isinstance(self.max_tokens, int) or self.max_tokens <= 0):
            raise ValueError(f"SamplingParams.max_tokens must be a positive int, got {self.max_tokens!r}")
        if self.temperature < 0:
            raise ValueError(f"SamplingParams.temperature must be >= 0 (0 = greedy), got {self.temperature}")
        if not isinstance(self.top_k, int) or (self.top_k < 1 and self.top_k != -1):
            raise ValueError(f"SamplingParams.top_k must be -1 (off) or a positive int, got {self.top_k!r}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"SamplingParams.top_p must be in (0, 1], got {self.top_p}")
        if self.stop is not None and not isinstance(self.stop, str):
            stop = list(self.stop)
            if not (all(isinstance(s, str) for s in stop) or all(isinstance(s, int) for s in stop)):
                raise ValueError("SamplingParams.stop must be a string, a list of strings or a list of token ids")


@dataclass(frozen=True)
class AdamParams:
    """AdamW hyper-parameters for one `optim_step` (grad_clip_norm 0 = no clipping)."""

    learning_rate: float = 1e-4
    beta1: float = 0.9
    beta2: float = 0.95
    eps: float = 1e-12
    weight_decay: float = 0.0
    grad_clip_norm: float = 0.0

    def __post_init__(self):
        for name in ("learning_rate", "eps", "weight_decay", "grad_clip_norm"):
            if not math.isfinite(getattr(self, name)) or getattr(self, name) < 0:
                raise ValueError(f"AdamParams.{name} must be a finite number >= 0, got {getattr(self, name)}")
        for name in ("beta1", "beta2"):
            if not 0 <= getattr(self, name) < 1:
                raise ValueError(f"AdamParams.{name} must be in [0, 1), got {getattr(self, name)}")


class NonFiniteError(FloatingPointError):
    """A loss or gradient norm was NaN or infinite: the step was refused before any weight changed."""


# ---------------------------------------------------------------------------------------------
# Responses

StopReason = Literal["stop", "length"]

LossFnType = Literal["cross_entropy", "importance_sampling", "ppo", "cispo", "dro", "gspo", "stable_reinforce"]
"""The built-in losses' names (Tinker 0.38's list, less its server-side `custom`)."""


@dataclass
class SampledSequence:
    stop_reason: StopReason
    tokens: list[int]
    logprobs: list[float]
    text: str | None = None
    sequence_id: str | None = None
    """Unique per sampled sequence (the sampler always sets it): what provenance spans name."""


SampleSequence = SampledSequence


@dataclass
class SampleResponse:
    sequences: list[SampledSequence]
    prompt_logprobs: list[float | None] | None = None
    topk_prompt_logprobs: list[list[tuple[int, float]] | None] | None = None
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class ForwardBackwardOutput:
    loss_fn_output_type: str
    loss_fn_outputs: list[dict[str, TensorData]]
    metrics: dict[str, float]


@dataclass
class OptimStepResponse:
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class SaveWeightsForSamplerResponse:
    path: str
    model: str | None = None
    size: int | None = None


@dataclass
class SaveStateResponse:
    path: str


@dataclass
class LoadStateResponse:
    path: str


# ---------------------------------------------------------------------------------------------
# Futures


class APIFuture(Generic[T]):
    """The result of a submitted operation: `.result()` blocks, `await future` waits in asyncio."""

    def __init__(self, future: concurrent.futures.Future):
        self._future = future

    @classmethod
    def completed(cls, value: T) -> APIFuture[T]:
        f: concurrent.futures.Future = concurrent.futures.Future()
        f.set_result(value)
        return cls(f)

    def result(self, timeout: float | None = None) -> T:
        return self._future.result(timeout)

    def done(self) -> bool:
        return self._future.done()

    def exception(self, timeout: float | None = None):
        return self._future.exception(timeout)

    def cancel(self) -> bool:
        return self._future.cancel()

    def map(self, fn: Callable[[T], U]) -> APIFuture[U]:
        out: concurrent.futures.Future = concurrent.futures.Future()

        def _done(f):
            try:
                out.set_result(fn(f.result()))
            except BaseException as e:  # noqa: BLE001 - forwarded to the waiter
                out.set_exception(e)

        self._future.add_done_callback(_done)
        return APIFuture(out)

    def __await__(self):
        return asyncio.wrap_future(self._future).__await__()



# ---------------------------------------------------------------------------------------------
# Checkpoint metadata (`RestClient`)

CheckpointType = Literal["training", "sampler"]


@dataclass
class Checkpoint:
    """One saved checkpoint, as PyTRIO's / Tinker's RestClient describe it."""

    checkpoint_id: str
    """`<kind>/<name>`: `training_state/step-0003` or `sampler_weights/final`."""
    checkpoint_type: CheckpointType
    time: datetime.datetime
    path: str
    """The URI to load it from (`arl://RUN/KIND/NAME`)."""
    size_bytes: int | None = None
    public: bool = False
    expires_at: datetime.datetime | None = None

    @property
    def tinker_path(self) -> str:
        """Tinker's name for `path`."""
        return self.path


@dataclass
class Cursor:
    offset: int
    limit: int
    total_count: int


@dataclass
class CheckpointsListResponse:
    checkpoints: list[Checkpoint]
    cursor: Cursor | None = None


@dataclass
class TrainingRun:
    """A run folder under the checkpoint root, described by its newest checkpoint's metadata."""

    training_run_id: str
    base_model: str
    model_owner: str
    is_lora: bool
    last_request_time: datetime.datetime
    corrupted: bool = False
    lora_rank: int | None = None
    last_checkpoint: Checkpoint | None = None
    last_sampler_checkpoint: Checkpoint | None = None
    user_metadata: dict[str, str] | None = None


@dataclass
class TrainingRunsResponse:
    training_runs: list[TrainingRun]
    cursor: Cursor
