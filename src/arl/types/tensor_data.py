"""Tinker's module path for `TensorData` (`from tinker.types.tensor_data import TensorData`)."""

from . import TensorData

__all__ = ["TensorData"]
