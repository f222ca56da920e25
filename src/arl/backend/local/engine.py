"""The one thread that runs all of the local backend's torch work: model loading, training steps and
sampling batches, in submission order.

Why one thread: torch's OpenMP runtime gives every thread that runs parallel kernels a team of its
own. With two such threads on 2 cores, libgomp sees more threads than cores and stops spin-waiting
between kernels, and every small kernel pays a wake-up: the same sampling batch took 0.43 s from a
second thread against 0.25 s when one thread did all the work (measured here on the 0.5M model).
A single engine thread also gives the ordering guarantee for free: operations run in the order they
were submitted, across all clients.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import queue
import threading
from typing import Callable

from ... import settings


class Engine:
    def __init__(self):
        self._tasks: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._start_lock = threading.Lock()

    def submit(self, fn: Callable, *args, **kwargs) -> concurrent.futures.Future:
        """Run `fn(*args, **kwargs)` on the engine thread after everything submitted before it."""
        future: concurrent.futures.Future = concurrent.futures.Future()
        if self.on_engine_thread():  # re-entrant use (a custom loss that samples): run in place
            _run_into(future, fn, args, kwargs)
            return future
        self._ensure_started()
        self._tasks.put((future, fn, args, kwargs))
        return future

    def call(self, fn: Callable, *args, **kwargs):
        """Run on the engine thread and wait for the result."""
        return self.submit(fn, *args, **kwargs).result()

    def on_engine_thread(self) -> bool:
        return threading.current_thread() is self._thread

    def _ensure_started(self) -> None:
        with self._start_lock:
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._loop, daemon=True, name="arl-engine")
                self._thread.start()

    def _loop(self) -> None:
        settings.init_worker_thread()
        while True:
            item = self._tasks.get()
            if item is None:
                return
            future, fn, args, kwargs = item
            if future.set_running_or_notify_cancel():
                _run_into(future, fn, args, kwargs)

    def shutdown(self) -> None:
        """Finish queued work and stop the thread (at interpreter exit, so that no torch kernel is
        running while the runtime is torn down)."""
        if self._thread is not None and self._thread.is_alive():
            self._tasks.put(None)
            self._thread.join()


def _run_into(future: concurrent.futures.Future, fn, args, kwargs) -> None:
    try:
        future.set_result(fn(*args, **kwargs))
    except BaseException as e:  # noqa: BLE001 - delivered to whoever waits on the future
        future.set_exception(e)


ENGINE = Engine()
atexit.register(ENGINE.shutdown)
