"""One watchdog thread for the deadlines of every in-flight query.

The executor runs each attempt on the caller's own thread (handing it to a worker thread cost about a
third of a one-hop query) and registers it here: ``watch = WATCHDOG.watch(stop, seconds)``. Past the
deadline the watchdog marks the watch expired and calls ``stop()``, which must wake the caller (the
executor kills the attempt's connection, so the read it is blocked in returns) and return whether it
stopped anything; it is called again every ``RETRY_S`` until the caller finishes (there may have been
no connection at that moment, or the caller may have taken a new one). The caller calls
``watch.finish()`` when the attempt ends, whatever the outcome, and reads ``watch.expired`` to tell its
own deadline from other failures.

``stop()`` runs on the watchdog's thread under its lock, so it must be quick and must not block.
"""

from __future__ import annotations

import heapq
import itertools
import threading
import time
from typing import Callable

RETRY_S = 0.05  # how often stop() is called again on an expired watch that is not finished


class Watch:
    """One attempt under a deadline (see the module docstring)."""

    __slots__ = ("deadline", "stop", "active", "expired", "stopped", "_owner")

    def __init__(self, deadline: float, stop: Callable[[], bool], owner: Watchdog):
        self._owner = owner
        self.deadline = deadline
        self.stop = stop
        self.active = True    # until finish()
        self.expired = False  # the deadline passed before finish()
        self.stopped = False  # stop() reported that it stopped something

    def finish(self) -> bool:
        """End the watch (the watchdog never calls ``stop()`` after this returns); whether it expired."""
        with self._owner.lock:
            if self.active:
                self.active = False
                self.stop = None  # the attempt's session must not outlive it here
                self._owner.active -= 1
        return self.expired


class Watchdog:
    """A heap of deadlines served by one daemon thread, started on first use."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._wake = threading.Condition(self.lock)
        self._heap: list[tuple[float, int, Watch]] = []
        self._seq = itertools.count()
        self._sleeping_until = float("inf")  # the deadline the thread waits for (inf: none)
        self._thread: threading.Thread | None = None
        self.active = 0              # watches not finished
        self.stops = 0               # stop() calls that stopped something, ever
        self.last_stop = -1e18       # time.monotonic() of the latest one

    def watch(self, stop: Callable[[], bool], seconds: float) -> Watch:
        w = Watch(time.monotonic() + seconds, stop, self)
        with self.lock:
            heapq.heappush(self._heap, (w.deadline, next(self._seq), w))
            self.active += 1
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, daemon=True, name="cypher-deadlines")
                self._thread.start()
            elif w.deadline < self._sleeping_until:  # only an earlier deadline needs the thread awake
                self._wake.notify()
            if len(self._heap) > 4096 and len(self._heap) > 4 * self.active:
                self._heap = [e for e in self._heap if e[2].active]  # finished watches are dropped lazily
                heapq.heapify(self._heap)
        return w

    def stopped_since(self, t: float) -> bool:
        """Whether the watchdog stopped some attempt's connection at or after ``time.monotonic()`` ``t``:
        a connection error near then may be a connection that another attempt had just handed back."""
        return self.last_stop >= t

    def _serve(self) -> None:
        with self.lock:
            while True:
                while self._heap and not self._heap[0][2].active:
                    heapq.heappop(self._heap)
                now = time.monotonic()
                if not self._heap or self._heap[0][0] > now:
                    self._sleeping_until = self._heap[0][0] if self._heap else float("inf")
                    self._wake.wait(None if not self._heap else self._sleeping_until - now)
                    self._sleeping_until = float("inf")
                    continue
                _, _, w = heapq.heappop(self._heap)
                w.expired = True
                try:
                    done = bool(w.stop())
                except Exception:  # noqa: BLE001 - a failed stop is tried again like an empty one
                    done = False
                if done:
                    w.stopped = True
                    self.stops += 1
                    self.last_stop = time.monotonic()
                w.deadline = now + RETRY_S
                heapq.heappush(self._heap, (w.deadline, next(self._seq), w))


WATCHDOG = Watchdog()
