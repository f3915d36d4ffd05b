"""The one in-process cache of the web side: a few computed values per process, each computed once at a time.

Django's cache framework pickles every value it stores and returns a copy; the values kept here are large object
graphs (a big session's timeline data, about 2 MB as JSON) that requests only read, so a copy per request would
cost what the cache saves. What this keeps instead:

- a bound: at most ``max_entries`` values, and at most ``max_weight`` of them by ``weigh`` (bytes, say: a big session's
  answers are 10 MB each, bench/memory_bench.py), the least recently used dropped first (the newest is always kept),
  and an optional age limit;
- one computation per key at a time: requests arriving while the first computes wait for its value instead of all
  computing it (at start-up, 50 clients asking for one diagnosis made 4 threads compute it);
- nothing left behind: the per-key lock of a computation is dropped by the last request that waited on it, whether
  the value was kept, refused (``keep``), or the computation raised.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field


@dataclass
class _Flight:
    """A computation of one key: its lock, and how many requests hold or wait for it."""

    lock: threading.Lock = field(default_factory=threading.Lock)
    users: int = 0


def _always(value: object) -> bool:
    return True


class ProcessCache[K: Hashable, V]:
    """Values by key, shared by the request threads of one process. Callers must not mutate what they get."""

    def __init__(
        self, *, max_entries: int, max_weight: int | None = None, weigh: Callable[[V], int] | None = None
    ) -> None:
        if max_entries < 1:
            raise ValueError("a cache keeps at least one entry")
        if (max_weight is None) != (weigh is None):
            raise ValueError("max_weight and weigh go together")
        self.max_entries = max_entries
        self.max_weight = max_weight
        self._weigh = weigh
        self._weight = 0  # of the entries kept
        self._entries: OrderedDict[K, tuple[V, float, int]] = OrderedDict()  # value, when it expires, its weight
        self._flights: dict[K, _Flight] = {}
        self._guard = threading.Lock()

    def get_or_compute(
        self, key: K, compute: Callable[[], V], *, keep: Callable[[V], bool] = _always, max_age_s: float | None = None
    ) -> V:
        """The value kept for ``key``, else ``compute()``'s, kept if ``keep`` says so (for ``max_age_s`` at most)."""
        with self._guard:
            found = self._fresh(key)
            if found is not None:
                return found[0]
            flight = self._flights.setdefault(key, _Flight())
            flight.users += 1
        try:
            with flight.lock:
                with self._guard:
                    found = self._fresh(key)  # computed by the request this one waited for
                if found is not None:
                    return found[0]
                value = compute()
                if keep(value):
                    expires = time.monotonic() + max_age_s if max_age_s is not None else float("inf")
                    weight = self._weigh(value) if self._weigh is not None else 0
                    with self._guard:
                        self._drop(key)
                        self._entries[key] = (value, expires, weight)
                        self._weight += weight
                        while len(self._entries) > self.max_entries or (
                            self.max_weight is not None and self._weight > self.max_weight and len(self._entries) > 1
                        ):
                            self._drop(next(iter(self._entries)))
                return value
        finally:
            with self._guard:
                flight.users -= 1
                if flight.users == 0:
                    del self._flights[key]

    def _fresh(self, key: K) -> tuple[V] | None:
        """The kept value of ``key`` (as a 1-tuple, since None is a value), or None; the guard is held."""
        entry = self._entries.get(key)
        if entry is None:
            return None
        value, expires, _ = entry
        if time.monotonic() >= expires:
            self._drop(key)
            return None
        self._entries.move_to_end(key)
        return (value,)

    def make_room(self, weight: int) -> None:
        """Drop the least recently used values until one of ``weight`` fits beside the rest under ``max_weight``:
        called before computing a heavy value, so it is never computed while as heavy a one is kept."""
        if self.max_weight is None:
            return
        with self._guard:
            while self._entries and self._weight + weight > self.max_weight:
                self._drop(next(iter(self._entries)))

    def _drop(self, key: K) -> None:
        """Forget ``key``'s value, if kept; the guard is held."""
        entry = self._entries.pop(key, None)
        if entry is not None:
            self._weight -= entry[2]

    @property
    def weight(self) -> int:
        with self._guard:
            return self._weight

    def __len__(self) -> int:
        with self._guard:
            return len(self._entries)

    def computing(self) -> int:
        """How many keys are being computed now (0 once every request has its answer)."""
        with self._guard:
            return len(self._flights)

    def clear(self) -> None:
        with self._guard:
            self._entries.clear()
            self._weight = 0
