"""The routes of `arl serve`: the Tinker REST API (as `tinker` 0.38 speaks it, docs/dev/tinker-rest-protocol.md)
over arl's own clients and local engine.

Errors: an HTTP error answers `{"detail": message}` (the SDK raises `BadRequestError`, `NotFoundError`,
`AuthenticationError`... with `Error code: N - {body}`); a request that fails while it runs answers its
future with `{"error": message, "category": "user"|"server"}` (the SDK raises `RequestFailedError`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import shutil
from pathlib import Path

import pydantic
from fastapi import FastAPI, Request, Response
from fastapi.responses import JSONResponse
from google.protobuf.message import DecodeError
from tinker import types as tt
from tinker.proto import tinker_public_pb2 as pb

from .. import checkpoints, models
from ..backend.local.engine import ENGINE
from ..client import ServiceClient
from ..models.zoo import check_name
from . import openai_api, wire
from .state import RETAIN_S, ApiError, Model, Sampler, State

LONG_POLL_S = 25.0
"""How long retrieve_future holds a request before answering try_again (the SDK waits 45 s)."""
KINDS = {"weights": "training_state", "sampler_weights": "sampler_weights"}
"""Tinker's checkpoint kinds in `tinker://RUN/KIND/NAME` -> arl's checkpoint folders."""
CHECKPOINT_TYPES = {"weights": "training", "sampler_weights": "sampler"}
USER_ERRORS = (ValueError, TypeError, KeyError, FileNotFoundError, FileExistsError, FloatingPointError)
"""Failures of a request's own making (a bad datum, an unknown loss, a name in use, a step refused as
non-finite): category "user"; anything else is the server's."""
CLIENT_CONFIG = {"use_pyqwest_transport": False, "parallel_fwdbwd_chunks": False, "proto_compress_fwdbwd": False,
                 "pjwt_auth_enabled": False}
"""Plain httpx, and the chunks of a large forward_backward sent one after another (so they arrive in seq order)."""


def create_app(api_key: str | None = None, openai_models: dict[str, str] | None = None) -> FastAPI:
    """`openai_models`: extra names for the OpenAI endpoints (`arl serve --model NAME=PATH`, serve/openai_api.py)."""
    app = FastAPI(title="arl serve", docs_url=None, redoc_url=None, openapi_url=None)
    state = State()
    sampler_tasks: dict[str, asyncio.Task] = {}

    # -- errors and auth ----------------------------------------------------------------------
    @app.exception_handler(ApiError)
    async def _api_error(_, e: ApiError):
        return JSONResponse({"detail": e.message}, status_code=e.status)

    @app.exception_handler(pydantic.ValidationError)
    async def _invalid(_, e: pydantic.ValidationError):
        fields = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'body'}: {err['msg']}" for err in e.errors())
        return JSONResponse({"detail": f"invalid {e.title}: {fields}"}, status_code=400)

    @app.exception_handler(ValueError)
    async def _bad_value(_, e: ValueError):
        return JSONResponse({"detail": str(e)}, status_code=400)

    @app.exception_handler(Exception)
    async def _internal(_, e: Exception):  # uvicorn logs the traceback
        return JSONResponse({"detail": f"arl serve: internal error ({type(e).__name__}: {e}); the server log has "
                             "the traceback"}, status_code=500)

    @app.middleware("http")
    async def _auth(request: Request, call_next):
        bearer = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
        if api_key and request.url.path != "/api/v1/healthz" and api_key not in (request.headers.get("x-api-key"), bearer):
            if request.url.path.startswith("/v1/"):  # the OpenAI endpoints answer in OpenAI's error shape
                return openai_api.error_response(401, "invalid or missing API key: send the key `arl serve` was "
                                                 "started with (--api-key or ARL_SERVE_API_KEY) as a Bearer token "
                                                 "(the openai client's api_key)", code="invalid_api_key")
            return JSONResponse({"detail": "invalid or missing API key (header X-API-Key): set TINKER_API_KEY to "
                                 "the key `arl serve` was started with (--api-key or ARL_SERVE_API_KEY)"},
                                status_code=401)
        return await call_next(request)

    async def parse(request: Request, cls):
        try:
            body = await request.json()
        except json.JSONDecodeError as e:
            raise ApiError(400, f"the body is not JSON ({e}); send a JSON {cls.__name__}") from None
        return cls.model_validate(body)

    # -- client, sessions, telemetry ------------------------------------------------------------
    @app.post("/api/v1/client/config")
    async def client_config():
        return CLIENT_CONFIG

    @app.post("/api/v1/client/dynamic_config")
    async def dynamic_config():
        return {}

    @app.post("/api/v1/create_session")
    async def create_session(request: Request):
        req = await parse(request, tt.CreateSessionRequest)
        return {"session_id": state.new_session(req.model_dump()), "type": "create_session"}

    @app.post("/api/v1/session_heartbeat")
    async def heartbeat(request: Request):
        req = await parse(request, tt.SessionHeartbeatRequest)
        if req.session_id not in state.sessions:  # 410 stops the SDK's heartbeats (a session of a previous server)
            raise ApiError(410, f"unknown session_id {req.session_id!r}; sessions end when the server restarts")
        return {"type": "session_heartbeat"}

    @app.post("/api/v1/sessions/{session_id}/finish")
    async def finish_session(session_id: str):
        state.session(session_id)
        return {}

    @app.post("/api/v1/telemetry")
    async def telemetry():
        return {"status": "accepted"}

    @app.get("/api/v1/healthz")
    async def healthz():
        return {"status": "ok"}

    @app.get("/api/v1/get_server_capabilities")
    async def capabilities():
        return {"supported_models": [{"model_name": name, "trainable": True, "sampleable": True}
                                     for name in models.supported_model_names()]}

    # -- training models ----------------------------------------------------------------------
    @app.post("/api/v1/create_model")
    async def create_model(request: Request):
        req = await parse(request, tt.CreateModelRequest)
        state.session(req.session_id)
        _check_optimizer(req.optimizer_config)
        check_name(req.base_model)
        model_id = f"{req.session_id}:train:{req.model_seq_id}"
        lora = req.lora_config

        def work():
            service = ServiceClient(run_name=model_id)
            if lora is None:
                client = service.create_full_training_client(req.base_model, seed=None)
            else:
                client = service.create_lora_training_client(
                    req.base_model, rank=lora.rank, seed=lora.seed, train_mlp=lora.train_mlp,
                    train_attn=lora.train_attn, train_unembed=lora.train_unembed)
            state.models[model_id] = Model(model_id, req.session_id, client, req.base_model,
                                           None if lora is None else lora.model_dump(), req.user_metadata)
            return {"model_id": model_id, "type": "create_model"}

        return {"request_id": state.run_once(("model", req.session_id, req.model_seq_id), work), "model_id": model_id}

    @app.post("/api/v1/get_info")
    async def get_info(request: Request):
        req = await parse(request, tt.GetInfoRequest)
        m = state.model(req.model_id)
        return {"model_id": m.model_id, "type": "get_info", "is_lora": m.lora is not None,
                "lora_rank": m.lora["rank"] if m.lora else None, "model_name": m.base_model,
                # the local folder, so that the SDK's get_tokenizer() loads it without a model hub
                "model_data": {"model_name": m.base_model, "tokenizer_id": str(models.model_dir(m.base_model))},
                "optimizer_config": {"type": "adamw"}}

    def ordered(m: Model, seq_id: int | None, prepare) -> dict:
        """Submit one of a model's requests: `prepare()` checks it and returns the work to run at its turn.
        A request refused here still uses its seq_id, so the ones after it are not held up."""
        try:
            work = prepare()
        except Exception:
            state.skip(m, seq_id)
            raise
        return {"request_id": state.submit_ordered(m, seq_id, work), "model_id": m.model_id}

    @app.post("/api/v1/load_weights")
    async def load_weights(request: Request):
        req = await parse(request, tt.LoadWeightsRequest)
        if req.model_id is not None:  # the deprecated load_state into an existing client: one of its requests
            m = state.model(req.model_id)

            def prepare():
                _check_optimizer(req.optimizer_config)
                uri = local_uri("path", req.path)
                load = m.client.load_state_with_optimizer if req.optimizer else m.client.load_state

                def work():
                    load(uri).result()
                    return {"path": req.path, "model_id": m.model_id, "type": "load_weights"}
                return work
            return ordered(m, req.seq_id, prepare)
        if req.session_id is None or req.model_seq_id is None:
            raise ApiError(400, "load_weights needs model_id and seq_id, or session_id and model_seq_id")
        state.session(req.session_id)
        _check_optimizer(req.optimizer_config)
        uri = local_uri("path", req.path)
        model_id = f"{req.session_id}:train:{req.model_seq_id}"  # the SDK derives this id itself

        def work():
            _, meta = checkpoints.read_meta(uri)
            service = ServiceClient(run_name=model_id)
            create = (service.create_training_client_from_state_with_optimizer if req.optimizer
                      else service.create_training_client_from_state)
            client = create(uri)
            lora = None if meta["lora_rank"] is None else {
                "rank": meta["lora_rank"], **{k: meta[k] for k in ("seed", "train_mlp", "train_attn", "train_unembed")}}
            state.models[model_id] = Model(model_id, req.session_id, client, meta["base_model"], lora, req.user_metadata)
            return {"path": req.path, "model_id": model_id, "type": "load_weights"}

        return {"request_id": state.run_once(("model", req.session_id, req.model_seq_id), work), "model_id": model_id}

    @app.post("/api/v1/forward_backward")
    async def forward_backward(request: Request):
        msg = pb.ForwardBackwardRequest()
        try:
            msg.ParseFromString(await request.body())
        except DecodeError as e:
            raise ApiError(400, f"the body is not a protobuf ForwardBackwardRequest ({e})") from None
        m = state.model(msg.model_id)

        def prepare():
            data = [wire.datum_from_proto(i, d) for i, d in enumerate(msg.data)]
            if not data:
                raise ValueError("data is empty; send at least one Datum")
            config = wire.loss_config_from_proto(msg) or None
            run = m.client.forward if msg.forward_only else m.client.forward_backward
            return lambda: wire.forward_backward_to_proto(run(data, msg.loss_fn, config).result())
        return ordered(m, msg.seq_id, prepare)

    @app.post("/api/v1/optim_step")
    async def optim_step(request: Request):
        req = await parse(request, tt.OptimStepRequest)
        m = state.model(req.model_id)

        def prepare():
            if not isinstance(req.optim_params, tt.AdamParams):
                raise ApiError(400, "optim_step: only adam_params (AdamW) is supported by arl serve")
            adam = wire.adam_from_json(req.optim_params)
            return lambda: {"metrics": m.client.optim_step(adam).result().metrics, "type": "optim_step"}
        return ordered(m, req.seq_id, prepare)

    @app.post("/api/v1/save_weights")
    async def save_weights(request: Request):
        req = await parse(request, tt.SaveWeightsRequest)
        m = state.model(req.model_id)

        def prepare():
            path = tinker_path(m.model_id, "weights", req.path)

            def work():
                m.client.save_state(req.path, overwrite=req.overwrite).result()
                return {"path": path, "type": "save_weights"}
            return work
        return ordered(m, req.seq_id, prepare)

    @app.post("/api/v1/save_weights_for_sampler")
    async def save_weights_for_sampler(request: Request):
        req = await parse(request, tt.SaveWeightsForSamplerRequest)
        m = state.model(req.model_id)

        def prepare():
            if req.path is not None:
                path = tinker_path(m.model_id, "sampler_weights", req.path)

                def work():
                    m.client.save_weights_for_sampler(req.path).result()
                    return {"path": path, "type": "save_weights_for_sampler"}
                return work
            if req.sampling_session_seq_id is None:
                raise ApiError(400, "save_weights_for_sampler needs path (a checkpoint name) or sampling_session_seq_id")
            sampler_id = f"{m.session_id}:sample:{req.sampling_session_seq_id}"

            def snapshot():  # a sampler over the weights as they are at this point of the model's requests
                client = m.client.save_weights_and_get_sampling_client()
                state.add_snapshot(m, Sampler(sampler_id, client, m.base_model, None))
                return {"sampling_session_id": sampler_id, "type": "save_weights_for_sampler"}
            return snapshot
        return ordered(m, req.seq_id, prepare)

    # -- sampling -------------------------------------------------------------------------------
    @app.post("/api/v1/create_sampling_session")
    async def create_sampling_session(request: Request):
        req = await parse(request, tt.CreateSamplingSessionRequest)
        state.session(req.session_id)
        sampler_id = f"{req.session_id}:sample:{req.sampling_session_seq_id}"
        if sampler_id not in sampler_tasks:  # a re-sent request waits for the first one's sampler
            if req.model_path is None and req.base_model is None:
                raise ApiError(400, "create_sampling_session needs base_model or model_path")
            if req.base_model is not None and req.model_path is None:
                check_name(req.base_model)
            uri = None if req.model_path is None else local_uri("model_path", req.model_path)

            def work():
                client = ServiceClient().create_sampling_client(base_model=req.base_model, model_path=uri)
                state.samplers[sampler_id] = Sampler(sampler_id, client, client.base_model, req.model_path)

            sampler_tasks[sampler_id] = asyncio.ensure_future(asyncio.wrap_future(ENGINE.submit(work)))
        try:
            await asyncio.shield(sampler_tasks[sampler_id])
        except FileNotFoundError as e:
            sampler_tasks.pop(sampler_id, None)
            raise ApiError(404, str(e)) from None
        except ValueError:
            sampler_tasks.pop(sampler_id, None)
            raise
        return {"sampling_session_id": sampler_id, "type": "create_sampling_session"}

    @app.get("/api/v1/samplers/{sampler_id}")
    async def get_sampler(sampler_id: str):
        s = state.sampler(sampler_id)
        return {"sampler_id": s.sampler_id, "base_model": s.base_model, "model_path": s.model_path}

    @app.post("/api/v1/asample")
    async def asample(request: Request):
        req = await parse(request, tt.SampleRequest)
        if req.sampling_session_id is None:
            raise ApiError(400, "sampling_session_id is missing; create a sampling client first")
        s = state.sampler(req.sampling_session_id)
        if req.seq_id in s.seen:
            request_id, sequence_ids = s.seen[req.seq_id]
            return {"request_id": request_id, "sample_sequence_ids": sequence_ids}
        unsupported = [name for name in ("topk_sample_logprobs", "target_prompt_logprobs", "prompt_alt_tokens_k")
                       if getattr(req, name)]
        if unsupported:
            raise ApiError(400, f"{', '.join(unsupported)}: not supported by arl serve; leave unset")
        future = s.client.sample(wire.model_input_from_json("prompt", req.prompt), req.num_samples,
                                 wire.sampling_params_from_json(req.sampling_params),
                                 include_prompt_logprobs=req.prompt_logprobs or req.prompt_logprobs_last_n is not None,
                                 topk_prompt_logprobs=req.topk_prompt_logprobs)

        async def result():
            return wire.sample_to_proto(await future, req.prompt_logprobs_last_n)

        request_id = state.await_future(result())
        sequence_ids = [f"{request_id}:{i}" for i in range(req.num_samples)]
        if req.seq_id is not None:
            s.seen[req.seq_id] = (request_id, sequence_ids)
        return {"request_id": request_id, "sample_sequence_ids": sequence_ids}

    # -- futures --------------------------------------------------------------------------------
    @app.post("/api/v1/retrieve_future")
    async def retrieve_future(request: Request):
        req = await parse(request, tt.FutureRetrieveRequest)
        future = state.futures.get(req.request_id)
        if future is None:
            raise ApiError(404, f"unknown request_id {req.request_id!r} (never issued by this server, or its result "
                           f"was delivered more than {RETAIN_S:.0f} s ago)")
        try:
            value = await asyncio.wait_for(asyncio.shield(future), LONG_POLL_S)
        except TimeoutError:
            return {"type": "try_again", "request_id": req.request_id, "queue_state": "active"}
        except Exception as e:  # noqa: BLE001 - the request's failure, answered in the API's format
            return {"error": " ".join(str(e).split()) or type(e).__name__,
                    "category": "user" if isinstance(e, USER_ERRORS) else "server"}
        state.delivered(req.request_id)
        if isinstance(value, bytes):
            return Response(value, media_type="application/x-protobuf")
        return value

    # -- checkpoints ----------------------------------------------------------------------------
    @app.get("/api/v1/training_runs/{run_id}/checkpoints")
    async def run_checkpoints(run_id: str):
        if run_id not in state.models and not (checkpoints.checkpoint_root() / run_id).is_dir():
            raise ApiError(404, f"unknown training run {run_id!r}")
        return {"checkpoints": list_checkpoints(run_id)}

    @app.get("/api/v1/checkpoints")
    async def all_checkpoints(limit: int = 100, offset: int = 0):
        rows = sorted((c for run in run_ids(state) for c in list_checkpoints(run)), key=lambda c: c["time"], reverse=True)
        return {"checkpoints": rows[offset:offset + limit], "cursor": {"offset": offset, "limit": limit, "total_count": len(rows)}}

    @app.get("/api/v1/training_runs")
    async def training_runs(limit: int = 20, offset: int = 0):
        runs = [r for r in (training_run(state, run) for run in run_ids(state)) if r is not None]
        runs.sort(key=lambda r: r["last_request_time"], reverse=True)
        return {"training_runs": runs[offset:offset + limit], "cursor": {"offset": offset, "limit": limit, "total_count": len(runs)}}

    @app.get("/api/v1/training_runs/{run_id}")
    async def get_training_run(run_id: str):
        run = training_run(state, run_id)
        if run is None:
            raise ApiError(404, f"unknown training run {run_id!r}")
        return run

    @app.delete("/api/v1/training_runs/{run_id}/checkpoints/{checkpoint_id:path}")
    async def delete_checkpoint(run_id: str, checkpoint_id: str):
        folder = checkpoints.resolve(local_uri("checkpoint", f"tinker://{run_id}/{checkpoint_id}"))
        if not (folder / checkpoints.META_FILE).is_file():
            raise ApiError(404, f"no checkpoint tinker://{run_id}/{checkpoint_id}")
        shutil.rmtree(folder)
        return {}

    @app.post("/api/v1/weights_info")
    async def weights_info(request: Request):
        body = await request.json()
        uri = local_uri("tinker_path", body.get("tinker_path") if isinstance(body, dict) else None)
        try:
            _, meta = checkpoints.read_meta(uri)
        except FileNotFoundError as e:
            raise ApiError(404, str(e)) from None
        return {"base_model": meta["base_model"], "is_lora": meta["lora_rank"] is not None,
                "lora_rank": meta["lora_rank"], **{k: meta.get(k) for k in ("train_unembed", "train_mlp", "train_attn")}}

    openai_api.mount(app, openai_models)
    return app


def _check_optimizer(config) -> None:
    if config is not None and config.type != "adamw":
        raise ApiError(400, f"optimizer_config type {config.type!r} is not supported by arl serve; use adamw (the default)")


def tinker_path(model_id: str, kind: str, name: str) -> str:
    if not name or "/" in name or name in (".", ".."):
        raise ApiError(400, f"path {name!r}: a checkpoint name must be non-empty and have no '/'")
    return f"tinker://{model_id}/{kind}/{name}"


def local_uri(field: str, path: str | None) -> str:
    """arl's URI of a `tinker://RUN/weights|sampler_weights/NAME` checkpoint under this server's home."""
    parts = path[len("tinker://"):].split("/") if isinstance(path, str) and path.startswith("tinker://") else []
    if len(parts) != 3 or parts[1] not in KINDS or not parts[0] or not parts[2]:
        raise ApiError(400, f"{field} {path!r}: expected tinker://RUN/weights/NAME or tinker://RUN/sampler_weights/NAME "
                       "(a path returned by save_state or save_weights_for_sampler on this server)")
    return f"tinker://{parts[0]}/{KINDS[parts[1]]}/{parts[2]}"


def list_checkpoints(run_id: str) -> list[dict]:
    out = []
    for kind, folder_name in KINDS.items():
        for folder in sorted((checkpoints.checkpoint_root() / run_id / folder_name).glob(f"*/{checkpoints.META_FILE}")):
            folder = folder.parent
            mtime = (folder / checkpoints.META_FILE).stat().st_mtime
            out.append({"checkpoint_id": f"{kind}/{folder.name}", "checkpoint_type": CHECKPOINT_TYPES[kind],
                        "time": dt.datetime.fromtimestamp(mtime, dt.UTC).isoformat(),
                        "tinker_path": f"tinker://{run_id}/{kind}/{folder.name}",
                        "size_bytes": sum(f.stat().st_size for f in folder.iterdir() if f.is_file()), "public": False})
    return out


def run_ids(state: State) -> list[str]:
    root = checkpoints.checkpoint_root()
    on_disk = [p.name for p in root.iterdir() if p.is_dir()] if root.is_dir() else []
    return sorted(set(on_disk) | set(state.models))


def training_run(state: State, run_id: str) -> dict | None:
    """A run served now, or one whose checkpoints a previous server left in this home."""
    ckpts = list_checkpoints(run_id)
    m = state.models.get(run_id)
    if m is not None:
        base, lora_rank, when = m.base_model, m.lora["rank"] if m.lora else None, m.last_request_time
    elif ckpts:
        _, meta = checkpoints.read_meta(local_uri("checkpoint", ckpts[0]["tinker_path"]))
        base, lora_rank = meta["base_model"], meta["lora_rank"]
        when = max(Path(checkpoints.resolve(local_uri("checkpoint", c["tinker_path"]))).stat().st_mtime for c in ckpts)
    else:
        return None
    last = {t: max((c for c in ckpts if c["checkpoint_type"] == t), key=lambda c: c["time"], default=None)
            for t in ("training", "sampler")}
    return {"training_run_id": run_id, "base_model": base, "model_owner": os.environ.get("USER", "local"),
            "is_lora": lora_rank is not None, "lora_rank": lora_rank,
            "last_request_time": dt.datetime.fromtimestamp(when, dt.UTC).isoformat(),
            "last_checkpoint": last["training"], "last_sampler_checkpoint": last["sampler"],
            "user_metadata": {k: str(v) for k, v in m.user_metadata.items()} if m is not None and m.user_metadata else None}
