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
