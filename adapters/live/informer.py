"""List, then watch, one resource forever, keeping the cache current (a Reflector).

The protocol is the API server's: list to get the current objects and a resourceVersion,
then watch from that version; every event carries the version to resume from, and bookmarks
move it on while nothing changes. When a watch ends (the server's timeout, a dropped
connection, a restart) it is resumed from the last version seen, so no event is lost. When
the server has forgotten that version (`410 Gone`, after compaction or a restart that lost
its history), resuming is impossible: the informer lists again and the cache diffs the new
list against what it held, so deletions missed meanwhile are seen too.

Failures back off along a bounded sequence (the delay never exceeds its last value) and the
informer never gives up: a scheduler without a current view must keep trying, and it says
so in its logs and metrics. An optional resource that is not served (a gang CRD not installed,
an alpha gang API not enabled), or not granted to the scheduler (403: a ClusterRole older than
the scheduler's reading of that API), counts as present and empty, and is looked for again now
and then.

`relist()` asks for a fresh list out of turn: a scheduler that has just become the leader
cannot tell how far its watch lags behind the writes of the leader before it, and a list is
read from the server as it is now. `listed_since()` says when such a list has been applied.
"""

from __future__ import annotations

import logging
import threading
from typing import Any, Optional, Sequence

from .cache import ClusterCache
from .clock import Clock
from .errors import Gone, KubeError, NotFound
from .api_client import KubeApi, Resource, WatchStream

log = logging.getLogger(__name__)

# Server-side length of one watch (seconds). The API server caps it anyway; ending watches
# now and then spreads reconnects out, as client-go's informers do with 5-10 minutes.
WATCH_TIMEOUT_SECONDS = 300
# Delays before reconnecting after consecutive failures (seconds), the last one repeated.
RECONNECT_BACKOFFS: tuple[float, ...] = (0.2, 0.5, 1.0, 2.0, 5.0, 10.0)
# How often an absent optional resource (a gang API) is looked for again (seconds).
ABSENT_RECHECK_SECONDS = 60.0


class Informer:
    """One resource's list+watch loop on its own thread, feeding `cache`."""

    def __init__(self, api: KubeApi, cache: ClusterCache, resource: Resource, *, clock: Clock,
                 backoffs: Sequence[float] = RECONNECT_BACKOFFS, watch_timeout: int = WATCH_TIMEOUT_SECONDS,
                 absent_recheck: float = ABSENT_RECHECK_SECONDS, metrics: Any = None) -> None:
        self.api = api
        self.cache = cache
        self.resource = resource
        self.clock = clock
        self.backoffs = tuple(backoffs) or (1.0,)
        self.watch_timeout = watch_timeout
        self.absent_recheck = absent_recheck
        self.metrics = metrics
        self.resource_version: Optional[str] = None
        self.absent = False
        self.list_only = False  # listed, its watch refused (403): listed again every recheck
        self._stop = threading.Event()
        self._stream: Optional[WatchStream] = None
        self._lock = threading.Lock()
        self._thread: Optional[threading.Thread] = None
        self._relists_asked = 0  # relist() calls so far
        self._relists_done = 0  # of those, how many a list begun after them has answered
        self._cut = False  # the current watch was cut on purpose, for a relist

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name=f"cpsat-live-watch-{self.resource.name}", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        with self._lock:
            stream = self._stream
        if stream is not None:
            stream.close()

    def relist(self) -> int:
        """Ask for a fresh list now (the watch is cut and resumed from it); returns the ticket
        that `listed_since` takes."""
        with self._lock:
            self._relists_asked += 1
            ticket = self._relists_asked
            stream = self._stream
            self._cut = stream is not None
        if stream is not None:
            stream.close()
        return ticket

    def listed_since(self, ticket: int) -> bool:
        """A list begun after `relist()` returned `ticket` is in the cache."""
        with self._lock:
            return self._relists_done >= ticket

    def _take_cut(self) -> bool:
        with self._lock:
            cut, self._cut = self._cut, False
            return cut

    def _relist_wanted(self) -> bool:
        with self._lock:
            return self._relists_done < self._relists_asked

    def join(self, timeout: float) -> None:
        if self._thread is not None:
            self._thread.join(timeout)

    @property
    def died(self) -> bool:
        """Started, not told to stop, and yet its thread is gone: the cache no longer follows."""
        return self._thread is not None and not self._thread.is_alive() and not self._stop.is_set()

    def _restart(self, reason: str) -> None:
        if self.metrics is not None:
            self.metrics.watch_restarts.labels(resource=self.resource.name, reason=reason).inc()

    def _run(self) -> None:
        failures = 0
        name = self.resource.name
        while not self._stop.is_set():
            try:
                if self.resource_version is None or self._relist_wanted():
                    self._list()
                self._watch()
                failures = 0
            except Gone as exc:
                # Resuming is impossible: list again at once (a second 410 in a row backs off).
                log.info("watch of %s expired (%s); listing again", name, exc.message)
                self._restart("expired")
                if self.resource_version is None:
                    failures += 1
                    self._pause(failures)
                self.resource_version = None
            except NotFound as exc:
                if not self.resource.optional:
                    failures += 1
                    self._fail(exc, failures)
                    continue
                if not self.absent:
                    log.info("%s are not served by this API server (a CRD not installed, an API not enabled); "
                             "scheduling without them, looking again every %.0fs", name, self.absent_recheck)
                self.absent = True
                self.resource_version = None
                self.cache.replace(self.resource, [])
                self.clock.wait(self._stop, self.absent_recheck)
            except KubeError as exc:
                if exc.status == 403 and self.resource.optional and self.resource_version is not None:
                    # listed, but the watch is not granted (a role with `list` alone): keep what
                    # the list gave and list again every recheck. Emptied, namespaces' labels (and
                    # every choice reading them) would flip at each recheck.
                    if not self.list_only:
                        log.warning("%s may be listed but not watched by this scheduler (%s); listing them "
                                    "again every %.0fs", name, exc.message, self.absent_recheck)
                    self.list_only = True
                    self.resource_version = None
                    self.clock.wait(self._stop, self.absent_recheck)
                    continue
                if exc.status == 403 and self.resource.optional:
                    # not granted (a ClusterRole from before the scheduler read this API, e.g.
                    # resource.k8s.io): scheduled without it, as if not served, rather than never synced
                    if not self.absent:
                        log.warning("%s may not be listed by this scheduler (%s); scheduling without them, "
                                    "looking again every %.0fs", name, exc.message, self.absent_recheck)
                    self.absent = True
                    self.resource_version = None
                    self.cache.replace(self.resource, [])
                    self.clock.wait(self._stop, self.absent_recheck)
                    continue
                if self._take_cut():
                    continue  # the watch was cut by relist(): list now, no failure
                failures += 1
                self._fail(exc, failures)
            except Exception as exc:  # noqa: BLE001 - an informer must outlive any bug in an event
                failures += 1
                log.exception("watch of %s: unexpected error", name)
                self._fail(KubeError(f"{type(exc).__name__}: {exc}"), failures)

    def _list(self) -> None:
        with self._lock:
            asked = self._relists_asked  # what this list answers: it starts after these were asked
            self._cut = False
        items, version = self.api.list(self.resource)
        self.cache.replace(self.resource, items)
        with self._lock:
            self._relists_done = max(self._relists_done, asked)
        if self.absent:
            log.info("%s are served now", self.resource.name)
            self.absent = False
        self.resource_version = version
        log.debug("listed %d %s at resourceVersion %s", len(items), self.resource.name, version)

    def _watch(self) -> None:
        stream = self.api.watch(self.resource, self.resource_version or "", self.watch_timeout)
        with self._lock:
            self._stream = stream
            wanted = self._relists_done < self._relists_asked  # asked before the stream was here to cut
        try:
            if self._stop.is_set() or wanted:
                stream.close()
                return
            for event_type, obj in stream:
                version = (obj.get("metadata") or {}).get("resourceVersion")
                if event_type != "BOOKMARK":
                    self.cache.apply(self.resource, event_type, obj)
                if version:
                    self.resource_version = str(version)
        finally:
            with self._lock:
                self._stream = None

    def _fail(self, exc: KubeError, failures: int) -> None:
        if self._stop.is_set():
            return
        delay = self._delay(failures)
        log.warning("watch of %s failed: %s; reconnecting in %.3gs", self.resource.name, exc.message, delay)
        self._restart("error")
        self.clock.wait(self._stop, delay)

    def _pause(self, failures: int) -> None:
        self.clock.wait(self._stop, self._delay(failures))

    def _delay(self, failures: int) -> float:
        return self.backoffs[min(failures, len(self.backoffs)) - 1]
