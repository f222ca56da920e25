"""`arl serve` in a subprocess, for tests that drive it with the real `tinker` SDK.

    from serve_util import serving
    import smoke

    with serving(tmp_path, env=smoke.env()) as url:
        client = tinker.ServiceClient(base_url=url, api_key="tml-local")
        ...

`serving(home, env=None, *, cwd=None, api_key=None, args=())` starts `python -m arl.cli serve` on a free loopback
port with `home` as its arl home (the served checkpoints go to `home/checkpoints`; the models come from
`env`'s ARL_HOME when home has none), waits until `/api/v1/healthz` answers, yields the base URL
(`http://127.0.0.1:PORT`, what `TINKER_BASE_URL` takes) and kills the server at the end. `env` is the
server's whole environment (default: this process's); `cwd` its working folder, against which a relative
base_model path resolves (default `home`); `api_key` makes the server demand that key; `args` are more options
of `arl serve` (e.g. `("--model", "NAME=PATH")`). The server's output
goes to `home/serve.log`, whose tail is shown when it fails to start.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
START_TIMEOUT_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def serving(home: str | os.PathLike, env: dict[str, str] | None = None, *, cwd: str | os.PathLike | None = None,
            api_key: str | None = None, args: tuple[str, ...] = ()) -> Iterator[str]:
    home = Path(home)
    home.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ if env is None else env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "src"), env.get("PYTHONPATH")]))
    models = Path(env.get("ARL_HOME", home)) / "models"
    if models.is_dir() and not (home / "models").exists():  # share the built models, keep the checkpoints apart
        (home / "models").symlink_to(models.resolve())
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    cmd = [sys.executable, "-m", "arl.cli", "serve", "--port", str(port), "--home", str(home)]
    if api_key:
        cmd += ["--api-key", api_key]
    cmd += list(args)
    log_path = home / "serve.log"
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(cmd, cwd=cwd or home, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + START_TIMEOUT_S
        while True:
            if proc.poll() is not None:
                raise RuntimeError(f"arl serve exited with {proc.returncode}:\n{log_path.read_text()[-3000:]}")
            try:
                with urllib.request.urlopen(f"{url}/api/v1/healthz", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"arl serve did not answer within {START_TIMEOUT_S:.0f} s:\n"
                                   f"{log_path.read_text()[-3000:]}")
            time.sleep(0.1)
        yield url
    finally:
        proc.kill()
        proc.wait()
