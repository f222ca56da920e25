import os
import tempfile

import pytest

# One model cache for the whole session (tiny models are built once), unless the caller chose one.
if "ARL_HOME" not in os.environ:
    os.environ["ARL_HOME"] = tempfile.mkdtemp(prefix="arl-test-home-")
os.environ.setdefault("ARL_NUM_THREADS", "2")
# float32 on a GPU too, so the tolerances hold there; the agreement tests ask for bf16 themselves
os.environ.setdefault("ARL_AUTOCAST", "off")

TINY = "arl/tiny-qwen3-0.5m"


def _bf16_gpu() -> bool:
    import torch

    return torch.cuda.is_available() and torch.cuda.is_bf16_supported()


AUTOCAST_MODES = ["off", pytest.param("bf16", marks=pytest.mark.skipif(
    not _bf16_gpu(), reason="bf16 autocast runs only on a CUDA GPU that supports bfloat16"))]
"""The `autocast` settings a sampler/trainer agreement test runs under (arl.settings)."""
LOGPROB_ATOL = {"off": 1e-4, "bf16": 5e-2}
"""How far the sampler's logprobs may be from the trainer's: the two compute the same float32 function
in a different order; under bf16 autocast each rounds its matmuls to 8 bits of mantissa (measured with
CPU bf16 autocast on the tiny models: at most 0.008)."""


@pytest.fixture
def autocast(request, monkeypatch):
    """Runs the test under the `autocast` setting it is parametrized with (read at every forward)."""
    from arl import settings

    monkeypatch.setattr(settings.get(), "autocast", request.param)
    return request.param


@pytest.fixture(scope="session")
def service():
    import arl

    return arl.ServiceClient(run_name="pytest")


def pytest_addoption(parser):
    parser.addoption("--slow", action="store_true", help="also run the slow experiments (the mini presets in full)")


def pytest_collection_modifyitems(config, items):
    """Slow experiments (a chapter's whole `mini` preset) run only with --slow; CI runs their smoke preset."""
    if config.getoption("--slow"):
        return
    skip = pytest.mark.skip(reason="slow experiment: run with --slow (CI runs the smoke preset)")
    for item in items:
        if "slow" in item.keywords:
            item.add_marker(skip)
