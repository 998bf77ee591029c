"""The executor's deadline workers: attempts run on reused daemon threads, a caller whose deadline passes
gets FutureTimeout at once while its attempt finishes on its own, and errors reach the caller as raised."""

from __future__ import annotations

import threading
import time
from concurrent.futures import TimeoutError as FutureTimeout

import pytest

from graphs.executor import _DeadlineWorkers


def test_sequential_attempts_reuse_one_thread():
    workers = _DeadlineWorkers()
    names = {workers.run(lambda: threading.current_thread().ident, 5.0) for _ in range(200)}
    assert len(names) == 1


def test_a_late_attempt_is_abandoned_and_the_next_caller_is_not_held_up():
    workers = _DeadlineWorkers()
    release = threading.Event()
    t0 = time.perf_counter()
    with pytest.raises(FutureTimeout):
        workers.run(release.wait, 0.1)
    assert time.perf_counter() - t0 < 1.0
    assert workers.run(lambda: 42, 1.0) == 42  # another worker: the first one is still busy
    release.set()
    time.sleep(0.2)
    assert len(workers._idle) == 2  # the abandoned worker rejoined the idle set when its attempt ended


def test_errors_reach_the_caller_and_idle_workers_are_capped():
    workers = _DeadlineWorkers(max_idle=2)
    with pytest.raises(ZeroDivisionError):
        workers.run(lambda: 1 / 0, 1.0)
    gates = [threading.Event() for _ in range(5)]
    results = []
    callers = [threading.Thread(target=lambda g=g: results.append(workers.run(lambda: g.wait(5) and 1, 5.0)))
               for g in gates]
    for c in callers:
        c.start()
    time.sleep(0.2)
    for g in gates:
        g.set()
    for c in callers:
        c.join()
    time.sleep(0.1)
    assert results == [1] * 5 and len(workers._idle) == 2
