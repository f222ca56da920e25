"""Agentic RL Lab: RL for language models and agents as runnable experiments, on a laptop CPU.

The client API has the shape of the Tinker / PyTRIO SDKs (`import arl as trio`, or `import arl as
tinker` for a Tinker 0.38 script), backed by a local PyTorch engine.
"""

from . import losses, types
from .client import RestClient, SamplingClient, ServiceClient, TrainingClient
from .types.errors import (
    APIConnectionError, APIError, APIResponseValidationError, APIStatusError, APITimeoutError,
    AuthenticationError, BadRequestError, ConflictError, InternalServerError, NotFoundError,
    PermissionDeniedError, RateLimitError, RequestFailedError, TinkerError, UnprocessableEntityError,
)
from .settings import configure
from .types import (
    AdamParams, APIFuture, Checkpoint, Datum, EncodedTextChunk, ForwardBackwardOutput, ImageAssetPointerChunk,
    ImageChunk, LossFnType, ModelInput, ModelInputChunk, OptimStepResponse, PromptProvenanceSpan,
    SampledProvenanceSpan, SampledSequence, SampleResponse, SampleSequence, SamplingParams, StopReason,
    TensorData, TrainingRun,
)

__version__ = "0.1.0"

__all__ = [
    "AdamParams", "APIFuture", "Checkpoint", "Datum", "EncodedTextChunk", "ForwardBackwardOutput",
    "ImageAssetPointerChunk", "ImageChunk", "LossFnType", "ModelInput", "ModelInputChunk", "OptimStepResponse",
    "PromptProvenanceSpan", "RestClient", "SampledProvenanceSpan", "SampledSequence", "SampleResponse",
    "SampleSequence", "SamplingClient", "SamplingParams", "ServiceClient", "StopReason", "TensorData",
    "TrainingClient", "TrainingRun", "configure", "losses", "types",
    # Tinker's exception names (arl/types/errors.py)
    "APIConnectionError", "APIError", "APIResponseValidationError", "APIStatusError", "APITimeoutError",
    "AuthenticationError", "BadRequestError", "ConflictError", "InternalServerError", "NotFoundError",
    "PermissionDeniedError", "RateLimitError", "RequestFailedError", "TinkerError", "UnprocessableEntityError",
]
