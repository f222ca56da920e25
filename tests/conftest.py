import os
import tempfile

import pytest

# One model cache for the whole session (tiny models are built once), unless the caller chose one.
if "ARL_HOME" not in os.environ:
    os.environ["ARL_HOME"] = tempfile.mkdtemp(prefix="arl-test-home-")
os.environ.setdefault("ARL_NUM_THREADS", "2")

TINY = "arl/tiny-qwen3-0.5m"


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
