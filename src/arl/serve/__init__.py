"""`arl serve`: the Tinker REST API over the local engine, so that the unmodified `tinker` SDK (and the
tinker-cookbook's loops) run against this machine with only `TINKER_BASE_URL` and a placeholder
`TINKER_API_KEY` changed; and OpenAI-compatible `/v1` endpoints (openai_api.py) over the same engine, for
any OpenAI client. docs/serve.md says how to use it and what it covers.

Needs the `serve` extra (fastapi, uvicorn, tinker for its protobuf messages); nothing else in arl imports
this package.
"""

from __future__ import annotations

import logging


def run(host: str = "127.0.0.1", port: int = 8000, api_key: str | None = None, access_log: bool = True,
        openai_models: dict[str, str] | None = None) -> None:
    """Serve until interrupted. Checkpoints go under the arl home (`ARL_HOME`, `arl.configure(home=...)`);
    `openai_models`: extra model names of the OpenAI endpoints (NAME -> PATH, `arl serve --model`)."""
    import uvicorn

    from .app import create_app

    logging.basicConfig(level=logging.INFO, format="arl serve: %(message)s")
    uvicorn.run(create_app(api_key, openai_models), host=host, port=port, access_log=access_log, log_level="info",
                timeout_keep_alive=75)
