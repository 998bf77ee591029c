"""The deadline watchdog: one thread serves every in-flight attempt. A watch finished in time is never
stopped; past its deadline ``stop()`` is called (again while the attempt has not finished, never after);
a short deadline registered after a long one is served on time."""

from __future__ import annotations

import threading
import time

from graphs.deadlines import RETRY_S, Watchdog


def test_a_watch_finished_in_time_is_never_stopped():
    dog = Watchdog()
    calls = []
    watches = [dog.watch(lambda: calls.append(1) or True, 0.2) for _ in range(100)]
    assert not any(w.finish() for w in watches)
    time.sleep(0.4)
    assert calls == [] and dog.active == 0 and dog.stops == 0


def test_past_its_deadline_stop_is_called_until_the_attempt_finishes():
    dog = Watchdog()
    calls: list[float] = []
    t0 = time.monotonic()
    w = dog.watch(lambda: calls.append(time.monotonic() - t0) or len(calls) > 1, 0.2)  # nothing to stop at first
    time.sleep(0.2 + 6 * RETRY_S)
    assert w.finish() and w.expired and w.stopped
    n = len(calls)
    assert n >= 3 and calls[0] >= 0.2 and dog.stops == n - 1
    time.sleep(4 * RETRY_S)
    assert len(calls) == n  # never after finish()


def test_an_earlier_deadline_registered_later_is_served_on_time():
    dog = Watchdog()
    fired = threading.Event()
    slow = dog.watch(lambda: True, 60.0)
    t0 = time.monotonic()
    fast = dog.watch(lambda: fired.set() or True, 0.1)
    assert fired.wait(5.0) and time.monotonic() - t0 < 2.0
    assert fast.finish() and not slow.finish()


def test_finished_watches_do_not_pile_up():
    dog = Watchdog()
    for _ in range(20_000):
        dog.watch(lambda: True, 3600.0).finish()
    assert dog.active == 0 and len(dog._heap) <= 4 * 4096
