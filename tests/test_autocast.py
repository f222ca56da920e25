"""The `autocast` setting: bf16 autocast on a CUDA GPU only, so what a CPU computes never changes."""

import contextlib

import pytest
import torch

import arl
from arl import settings
from conftest import AUTOCAST_MODES


def test_cpu_is_never_autocast(monkeypatch):
    monkeypatch.setattr(settings.get(), "autocast", "bf16")
    assert isinstance(settings.autocast(torch.device("cpu")), contextlib.nullcontext)


def test_bad_values_name_the_choices(monkeypatch):
    with pytest.raises(ValueError, match="bf16 or off"):
        arl.configure(autocast="fp16")
    monkeypatch.setenv("ARL_AUTOCAST", "fp16")
    with pytest.raises(ValueError, match="ARL_AUTOCAST='fp16'"):
        settings._default()


@pytest.mark.parametrize("mode", AUTOCAST_MODES[1:])  # bf16: skipped without a GPU that supports it
def test_cuda_autocasts_float32_models_unless_off(monkeypatch, mode):
    cuda = torch.device("cuda")
    monkeypatch.setattr(settings.get(), "autocast", mode)
    with settings.autocast(cuda):
        assert torch.get_autocast_dtype("cuda") == torch.bfloat16 and torch.is_autocast_enabled("cuda")
    monkeypatch.setattr(settings.get(), "dtype", "float64")
    assert isinstance(settings.autocast(cuda), contextlib.nullcontext)
    monkeypatch.setattr(settings.get(), "dtype", "float32")
    monkeypatch.setattr(settings.get(), "autocast", "off")
    assert isinstance(settings.autocast(cuda), contextlib.nullcontext)
