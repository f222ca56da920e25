"""Agentic RL Lab: RL for language models and agents as runnable experiments, on a laptop CPU.

The client API has the shape of the Tinker / PyTRIO SDKs (`import arl as trio`), backed by a local
PyTorch engine.
"""

from . import losses, types
from .client import SamplingClient, ServiceClient, TrainingClient
from .settings import configure
from .types import (
    AdamParams, APIFuture, Datum, EncodedTextChunk, ForwardBackwardOutput, ImageChunk, ModelInput,
    OptimStepResponse, SampledSequence, SampleResponse, SampleSequence, SamplingParams, TensorData,
)

__version__ = "0.1.0"

__all__ = [
    "AdamParams", "APIFuture", "Datum", "EncodedTextChunk", "ForwardBackwardOutput", "ImageChunk",
    "ModelInput", "OptimStepResponse", "SampledSequence", "SampleResponse", "SampleSequence",
    "SamplingClient", "SamplingParams", "ServiceClient", "TensorData", "TrainingClient", "configure",
    "losses", "types",
]
