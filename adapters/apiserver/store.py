"""The versioned object store behind the fake API server, and its watch fan-out.

It plays etcd plus the API server's watch cache: every write takes the next value of
one global, monotonically increasing resourceVersion; each resource keeps a bounded
history of changes so a watch can resume from a recent resourceVersion, and a watch
from one older than that history fails with 410 Expired, which is what forces a real
client to relist. Writes are serialised by one re-entrant lock, which callers also
hold to make read-check-write sequences (optimistic concurrency, binding, eviction)
atomic. Listeners (the simulated controllers) run after each write, under the lock.
"""

from __future__ import annotations

import copy
import threading
import uuid
from collections import deque
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from .errors import expired

ADDED, MODIFIED, DELETED = "ADDED", "MODIFIED", "DELETED"

# a watcher that falls this far behind is closed, as the real server drops slow watchers
WATCH_QUEUE_LIMIT = 10_000

Listener = Callable[[str, str, dict[str, Any], "dict[str, Any] | None"], None]
Predicate = Callable[[dict[str, Any]], bool]


def meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.setdefault("metadata", {})


def obj_key(obj: dict[str, Any]) -> tuple[str, str]:
    m = obj.get("metadata") or {}
    return (m.get("namespace") or "", m.get("name") or "")


def _with_rv(obj: dict[str, Any], rv: int) -> dict[str, Any]:
    out = dict(obj)
    out["metadata"] = dict(obj.get("metadata") or {})
    out["metadata"]["resourceVersion"] = str(rv)
    return out


@dataclass(frozen=True)
class Change:
    """One committed write: the object after it (for DELETED, its last state) and before it."""

    rv: int
    type: str
    obj: dict[str, Any]
    prev: dict[str, Any] | None


class Watcher:
    """One open watch: the changes it has still to send, filtered as the client asked."""

    def __init__(self, store: "Store", key: str, namespace: str | None, predicate: Predicate) -> None:
        self._store = store
        self.key = key
        self._namespace = namespace
        self._predicate = predicate
        self._events: deque[tuple[str, dict[str, Any]]] = deque()
        # why the watch ended: None while open, else "dropped", "stopped" or "overflow"
        self.closed: str | None = None

    def _visible(self, obj: dict[str, Any] | None) -> bool:
        if obj is None:
            return False
        if self._namespace is not None and obj_key(obj)[0] != self._namespace:
            return False
        return self._predicate(obj)

    def offer(self, change: Change) -> None:
        """Queue the event this watcher sees for `change` (called under the store lock).

        With a selector, an object that starts matching arrives as ADDED and one that
        stops matching as DELETED (its previous state at the new resourceVersion),
        as the real watch cache reports them.
        """
        if self.closed:
            return
        if change.type == DELETED:
            event = (DELETED, change.obj) if self._visible(change.obj) else None
        else:
            now, before = self._visible(change.obj), self._visible(change.prev)
            if now and before:
                event = (MODIFIED, change.obj)
            elif now:
                event = (ADDED, change.obj)
            elif before:
                event = (DELETED, _with_rv(change.prev or {}, change.rv))
            else:
                event = None
        if event is None:
            return
        if len(self._events) >= WATCH_QUEUE_LIMIT:
            self._events.clear()
            self.closed = "overflow"
            return
        self._events.append(event)

    def next(self, timeout: float) -> tuple[list[tuple[str, dict[str, Any]]], str | None, int]:
        """Wait up to `timeout` for events; returns them, the close reason, and a safe bookmark RV.

        The resourceVersion is read together with draining the queue, so every change
        up to it that this watcher should see has been handed out.
        """
        with self._store._changed:
            if not self._events and not self.closed and timeout > 0:
                self._store._changed.wait(timeout)
            events = list(self._events)
            self._events.clear()
            return events, self.closed, self._store._rv

    def close(self, reason: str = "stopped") -> None:
        with self._store._changed:
            if not self.closed:
                self.closed = reason
            self._store._watchers.discard(self)
            self._store._changed.notify_all()


class Store:
    """Objects by storage key and (namespace, name), versioned, with watch history."""

    def __init__(self, *, history_limit: int = 1000) -> None:
        self.lock = threading.RLock()
        self._changed = threading.Condition(self.lock)
        self._rv = 0
        self._history_limit = max(1, history_limit)
        self._objects: dict[str, dict[tuple[str, str], dict[str, Any]]] = {}
        self._history: dict[str, deque[Change]] = {}
        # per key: the oldest resourceVersion a watch may still resume from
        self._floor: dict[str, int] = {}
        self._compacted = 0  # floor for every key, raised by compact()
        self._watchers: set[Watcher] = set()
        self._listeners: list[Listener] = []

    # --- reads ------------------------------------------------------------------------------

    @property
    def resource_version(self) -> int:
        with self.lock:
            return self._rv

    def peek(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The stored object itself (callers must not mutate it); None when absent."""
        return self._objects.get(key, {}).get((namespace or "", name))

    def get(self, key: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of the stored object, or None."""
        with self.lock:
            obj = self.peek(key, namespace, name)
            return copy.deepcopy(obj) if obj is not None else None

    def items(self, key: str, namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """Stored objects (not copies) in (namespace, name) order; call under the lock."""
        objects = self._objects.get(key, {})
        for k in sorted(objects):
            if namespace is None or k[0] == namespace:
                yield objects[k]

    def list(self, key: str, namespace: str | None = None) -> list[dict[str, Any]]:
        """Copies of the stored objects, sorted by namespace and name."""
        with self.lock:
            return [copy.deepcopy(o) for o in self.items(key, namespace)]

    # --- writes -----------------------------------------------------------------------------

    def add_listener(self, listener: Listener) -> None:
        self._listeners.append(listener)

    def create(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Store a new object (uid filled in when missing); returns the stored version."""
        with self.lock:
            obj = copy.deepcopy(obj)
            m = meta(obj)
            m.setdefault("uid", str(uuid.uuid4()))
            self._rv += 1
            m["resourceVersion"] = str(self._rv)
            self._objects.setdefault(key, {})[obj_key(obj)] = obj
            self._commit(key, Change(self._rv, ADDED, obj, None))
            return obj

    def update(self, key: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Replace an existing object with a new version; returns the stored version."""
        with self.lock:
            k = obj_key(obj)
            prev = self._objects.get(key, {}).get(k)
            if prev is None:
                raise KeyError(f"{key} {k} does not exist")
            obj = copy.deepcopy(obj)
            self._rv += 1
            meta(obj)["resourceVersion"] = str(self._rv)
            self._objects[key][k] = obj
            self._commit(key, Change(self._rv, MODIFIED, obj, prev))
            return obj

    def delete(self, key: str, namespace: str, name: str) -> dict[str, Any]:
        """Remove an object; returns its last state at the deletion's resourceVersion."""
        with self.lock:
            prev = self._objects.get(key, {}).pop((namespace or "", name))
            self._rv += 1
            last = _with_rv(prev, self._rv)
            self._commit(key, Change(self._rv, DELETED, last, prev))
            return last

    def _commit(self, key: str, change: Change) -> None:
        history = self._history.setdefault(key, deque())
        if len(history) >= self._history_limit:
            self._floor[key] = history.popleft().rv
        history.append(change)
        for watcher in list(self._watchers):
            if watcher.key == key:
                watcher.offer(change)
        self._changed.notify_all()
        for listener in self._listeners:
            listener(key, change.type, change.obj, change.prev)

    # --- watch ------------------------------------------------------------------------------

    @property
    def compacted_rv(self) -> int:
        """History before this resourceVersion is gone for every resource."""
        return self._compacted

    def floor(self, key: str) -> int:
        """The oldest resourceVersion a watch of `key` can still start from."""
        return max(self._floor.get(key, 0), self._compacted)

    def watch(
        self,
        key: str,
        *,
        namespace: str | None = None,
        predicate: Predicate = lambda obj: True,
        since: int | None = None,
    ) -> Watcher:
        """Open a watch. `since=None` starts with ADDED for every current object (what
        resourceVersion "" or "0" means); otherwise the changes after `since` are replayed,
        or 410 Expired is raised when they are no longer in the history."""
        with self.lock:
            watcher = Watcher(self, key, namespace, predicate)
            if since is None:
                for obj in self.items(key, namespace):
                    if predicate(obj):
                        watcher._events.append((ADDED, obj))
            else:
                floor = self.floor(key)
                if since < floor:
                    raise expired(f"too old resource version: {since} ({floor})")
                for change in self._history.get(key, ()):
                    if change.rv > since:
                        watcher.offer(change)
            self._watchers.add(watcher)
            return watcher

    def close_watchers(self, reason: str, key: str | None = None) -> int:
        """End open watches (all, or those of one key); returns how many were open."""
        with self.lock:
            victims = [w for w in self._watchers if key is None or w.key == key]
            for watcher in victims:
                watcher.closed = reason
                self._watchers.discard(watcher)
            self._changed.notify_all()
            return len(victims)

    @property
    def open_watches(self) -> int:
        with self.lock:
            return len(self._watchers)

    def compact(self) -> int:
        """Forget all history, as etcd compaction does; returns the new floor."""
        with self.lock:
            self._history.clear()
            self._floor.clear()
            self._compacted = self._rv
            return self._rv

    def wipe(self) -> None:
        """Drop every object and all history, as a fresh etcd would; resourceVersion still grows."""
        with self.lock:
            self._objects.clear()
            self._rv += 1
            self.compact()
