"""What the server remembers: sessions, training models, sampling sessions and the futures of submitted
requests, with the SDK's idempotency and ordering rules (docs/dev/tinker-rest-protocol.md §4, §7).

- A re-sent submit (the SDK retries on a timeout or a 5xx with the same seq_id) is answered with the
  original request id: dedupe on (model_id, seq_id) and (sampling_session_id, seq_id).
- A model's requests run strictly in seq_id order: an early arrival waits for the ones before it. If a
  gap is never filled (a submit the client gave up on), the model moves on after GAP_TIMEOUT_S.
- Work runs on arl's one engine thread (`ENGINE.submit`, FIFO): a request is handed to it at its turn,
  so the engine's order is the seq order; the HTTP handlers only await futures.
- A failed request fails its own future only; later ones run as usual.

Everything here is touched from the event loop only, except `models` and `samplers`, which the engine
thread fills when a creation finishes (before its future resolves, so a client never sees the id first).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import itertools
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from ..backend.local.engine import ENGINE

GAP_TIMEOUT_S = 10.0
RETAIN_S = 300.0
"""How long a future's result stays after it was delivered (the SDK asks again only when an answer was lost)."""
MAX_SNAPSHOTS = 8
"""Snapshot samplers kept per model (rl loops make one per step, each a copy of the weights); older ones go."""
log = logging.getLogger("arl.serve")


class ApiError(Exception):
    """An HTTP error answered as `{"detail": message}` (the SDK shows `Error code: N - {body}`)."""

    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass
class Model:
    model_id: str
    session_id: str
    client: object
    """arl's TrainingClient."""
    base_model: str
    lora: dict | None
    """The LoRA settings (rank, train_* flags), None for full fine-tuning."""
    user_metadata: dict | None = None
    next_seq: int = 1
    """seq_id of the next request to run (request ids 0, 1, ... are sent as seq_id 1, 2, ...)."""
    waiting: dict[int, Callable[[], None]] = field(default_factory=dict)
    seen: dict[int, str] = field(default_factory=dict)
    last_request_time: float = field(default_factory=time.time)
    snapshots: list[str] = field(default_factory=list)
    """Ids of the samplers over snapshots of this model's weights, oldest first."""


@dataclass
class Sampler:
    sampler_id: str
    client: object
    """arl's SamplingClient."""
    base_model: str
    model_path: str | None
    seen: dict[int, tuple[str, list[str]]] = field(default_factory=dict)
    """seq_id -> (request id, sequence ids)."""


class State:
    def __init__(self):
        self.sessions: dict[str, dict] = {}
        self.models: dict[str, Model] = {}
        self.samplers: dict[str, Sampler] = {}
        self.futures: dict[str, asyncio.Future] = {}
        self.creations: dict[tuple, str] = {}
        """(kind, session_id, seq) -> request id of a create_model / create-via-load / sampling session."""
        self._ids = itertools.count()

    # -- ids ----------------------------------------------------------------------------------
    def new_session(self, info: dict) -> str:
        session_id = f"sess-{uuid.uuid4().hex[:12]}"
        self.sessions[session_id] = info
        return session_id

    def session(self, session_id: str) -> dict:
        if session_id not in self.sessions:
            raise ApiError(404, f"unknown session_id {session_id!r}; create a session first (ServiceClient does)")
        return self.sessions[session_id]

    def model(self, model_id: str) -> Model:
        if model_id not in self.models:
            raise ApiError(404, f"unknown model_id {model_id!r}; create it with create_lora_training_client "
                           "(or load a checkpoint into a new training client) on this server")
        return self.models[model_id]

    def sampler(self, sampler_id: str) -> Sampler:
        sampler = self.samplers.get(sampler_id)
        if sampler is None:
            raise ApiError(404, f"unknown sampling_session_id {sampler_id!r}; create a sampling client on this "
                           f"server first (of a model's save_weights_and_get_sampling_client samplers, the "
                           f"{MAX_SNAPSHOTS} newest are kept)")
        return sampler

    def add_snapshot(self, model: Model, sampler: Sampler) -> None:
        """Register a snapshot sampler (on the engine thread), dropping the model's oldest beyond MAX_SNAPSHOTS."""
        self.samplers[sampler.sampler_id] = sampler
        model.snapshots.append(sampler.sampler_id)
        while len(model.snapshots) > MAX_SNAPSHOTS:
            self.samplers.pop(model.snapshots.pop(0), None)

    def delivered(self, request_id: str) -> None:
        """A future's result went out: forget it after RETAIN_S, so a long run does not pile them up."""
        asyncio.get_running_loop().call_later(RETAIN_S, self.futures.pop, request_id, None)

    # -- futures ------------------------------------------------------------------------------
    def _new_future(self) -> tuple[str, asyncio.Future]:
        request_id = f"req-{next(self._ids)}"
        future = asyncio.get_running_loop().create_future()
        self.futures[request_id] = future
        return request_id, future

    def run(self, work: Callable[[], object]) -> str:
        """Run `work` on the engine thread now (after what it already holds); its result is the future's."""
        request_id, future = self._new_future()
        _chain(ENGINE.submit(work), future)
        return request_id

    def run_once(self, key: tuple, work: Callable[[], object]) -> str:
        """`run`, once per key: a re-sent creation gets the first one's request id."""
        if key not in self.creations:
            self.creations[key] = self.run(work)
        return self.creations[key]

    def await_future(self, value) -> str:
        """A future resolved by an awaitable (sampling, which batches off the engine queue)."""
        request_id, future = self._new_future()

        async def finish():
            try:
                future.set_result(await value)
            except Exception as e:  # noqa: BLE001 - delivered through retrieve_future
                future.set_exception(e)

        asyncio.ensure_future(finish())
        return request_id

    # -- ordered model requests ---------------------------------------------------------------
    def submit_ordered(self, model: Model, seq_id: int | None, work: Callable[[], object]) -> str:
        """Run `work` on the engine at `seq_id`'s turn; a seq_id seen before returns its request id."""
        model.last_request_time = time.time()
        if seq_id is None:
            raise ApiError(400, "seq_id is missing; the SDK sends one with every training request")
        if seq_id in model.seen:
            return model.seen[seq_id]
        request_id, future = self._new_future()
        model.seen[seq_id] = request_id
        if seq_id < model.next_seq:  # later than its turn (after a gap timeout): run it now
            _chain(ENGINE.submit(work), future)
            return request_id
        model.waiting[seq_id] = lambda: _chain(ENGINE.submit(work), future)
        self._advance(model)
        return request_id

    def skip(self, model: Model, seq_id: int | None) -> None:
        """A request refused at submit still uses its seq_id, so the ones after it are not held up."""
        if seq_id is not None and seq_id >= model.next_seq and seq_id not in model.waiting:
            model.waiting[seq_id] = lambda: None
            self._advance(model)

    def _advance(self, model: Model) -> None:
        while model.next_seq in model.waiting:
            model.waiting.pop(model.next_seq)()
            model.next_seq += 1
        if model.waiting:
            asyncio.get_running_loop().call_later(GAP_TIMEOUT_S, self._skip_gap, model, model.next_seq)

    def _skip_gap(self, model: Model, stuck_at: int) -> None:
        if model.next_seq == stuck_at and model.waiting:
            log.warning("model %s: seq_id %d never came within %.0f s; going on with seq_id %d",
                        model.model_id, stuck_at, GAP_TIMEOUT_S, min(model.waiting))
            model.next_seq = min(model.waiting)
            self._advance(model)


def _chain(source: concurrent.futures.Future, target: asyncio.Future) -> None:
    """Copy the engine's result into the event loop's future, from whichever thread finishes it."""
    loop = target.get_loop()

    def copy(f: concurrent.futures.Future) -> None:
        if target.done():
            return
        if f.exception() is not None:
            target.set_exception(f.exception())
        else:
            target.set_result(f.result())

    source.add_done_callback(lambda f: loop.call_soon_threadsafe(copy, f))
