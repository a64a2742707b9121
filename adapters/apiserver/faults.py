"""Fault injection for the fake API server.

The live scheduler has to survive what real control planes do to clients: failed and
conflicting writes, throttling, slow answers, watches cut mid-stream, history compacted
under a resuming watch, the API server restarting. `FaultInjector` makes each of those
happen on demand, from Python (`server.faults.fail(...)`) or, for another process,
over HTTP at `/_faults` (`{"action": "fail", ...}`), and counts what it injected so a
test can report it.

Request rules match on method, a regular expression searched in the URL path (query
string excluded) and optionally on whether the request is a watch:

- `fail`: answer the next `count` matching requests with `status` and a Status body
  (or a given `body`), optionally with a Retry-After header;
- `delay`: hold matching requests `seconds` before serving them (`count=None`: all);
- `disconnect`: close the connection without answering the next `count` requests.

Server-wide actions: `drop_watches` (cut every open watch stream now), `compact`
(forget watch history, so older resourceVersions get 410 Expired), `restart` (stop
listening and come back on the same port, keeping or wiping the store).
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable

from .errors import status_object

# the admin path; never subject to faults itself
FAULTS_PATH = "/_faults"
# an upper bound on any injected delay, so a test cannot hang a server by mistake
MAX_DELAY_SECONDS = 30.0


@dataclass
class FaultRule:
    kind: str  # "fail" | "delay" | "disconnect"
    method: str | None = None
    path: str | None = None
    watch: bool | None = None
    remaining: int | None = 1  # None: unlimited
    status: int = 500
    message: str | None = None
    reason: str | None = None
    body: dict[str, Any] | None = None
    retry_after: int | None = None
    seconds: float = 0.0
    _pattern: re.Pattern[str] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self._pattern = re.compile(self.path) if self.path else None
        if self.method:
            self.method = self.method.upper()

    def matches(self, method: str, path: str, is_watch: bool) -> bool:
        return (
            (self.remaining is None or self.remaining > 0)
            and (self.method is None or self.method == method)
            and (self._pattern is None or self._pattern.search(path) is not None)
            and (self.watch is None or self.watch == is_watch)
        )

    def describe(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if not k.startswith("_") and v is not None}
        return out


@dataclass
class FaultDecision:
    """What to do to one request: wait, then either fail, disconnect or serve it."""

    delay: float = 0.0
    status: int | None = None
    body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)
    disconnect: bool = False


class FaultInjector:
    """Rules applied to incoming requests, plus server-wide fault actions."""

    def __init__(
        self,
        *,
        drop_watches: Callable[[], int],
        compact: Callable[[], int],
        restart: Callable[..., None],
    ) -> None:
        self._lock = threading.Lock()
        self._rules: list[FaultRule] = []
        self._drop_watches = drop_watches
        self._compact = compact
        self._restart = restart
        # how many faults of each kind were injected
        self.injected: Counter[str] = Counter()

    # --- request rules ----------------------------------------------------------------------

    def _add(self, rule: FaultRule) -> FaultRule:
        with self._lock:
            self._rules.append(rule)
        return rule

    def fail(
        self,
        method: str | None = None,
        path: str | None = None,
        *,
        status: int = 500,
        count: int | None = 1,
        message: str | None = None,
        reason: str | None = None,
        body: dict[str, Any] | None = None,
        retry_after: int | None = None,
        watch: bool | None = None,
    ) -> FaultRule:
        """Answer the next `count` matching requests with `status` (a Status body unless `body`)."""
        return self._add(FaultRule("fail", method, path, watch, count, status, message, reason, body, retry_after))

    def delay(
        self,
        method: str | None = None,
        path: str | None = None,
        *,
        seconds: float,
        count: int | None = None,
        watch: bool | None = None,
    ) -> FaultRule:
        """Hold matching requests for `seconds` (at most MAX_DELAY_SECONDS) before serving them."""
        seconds = max(0.0, min(float(seconds), MAX_DELAY_SECONDS))
        return self._add(FaultRule("delay", method, path, watch, count, seconds=seconds))

    def disconnect(
        self, method: str | None = None, path: str | None = None, *, count: int | None = 1, watch: bool | None = None
    ) -> FaultRule:
        """Close the connection of the next `count` matching requests without an answer."""
        return self._add(FaultRule("disconnect", method, path, watch, count))

    def clear(self) -> None:
        """Remove every rule (counts are kept)."""
        with self._lock:
            self._rules.clear()

    @property
    def rules(self) -> list[FaultRule]:
        with self._lock:
            return [r for r in self._rules if r.remaining is None or r.remaining > 0]

    def decide(self, method: str, path: str, is_watch: bool) -> FaultDecision:
        """Consume the rules matching one request and say what to do to it."""
        decision = FaultDecision()
        with self._lock:
            for rule in self._rules:
                if not rule.matches(method, path, is_watch):
                    continue
                if rule.kind == "delay":
                    decision.delay = min(MAX_DELAY_SECONDS, decision.delay + rule.seconds)
                elif decision.status is not None or decision.disconnect:
                    continue  # one failure per request; later rules wait for later requests
                elif rule.kind == "disconnect":
                    decision.disconnect = True
                else:
                    decision.status = rule.status
                    decision.body = rule.body or status_object(
                        rule.status, rule.message or f"injected fault: {rule.status}", rule.reason
                    )
                    if rule.retry_after is not None:
                        decision.headers["Retry-After"] = str(rule.retry_after)
                if rule.remaining is not None:
                    rule.remaining -= 1
                self.injected[rule.kind] += 1
            self._rules = [r for r in self._rules if r.remaining is None or r.remaining > 0]
        return decision

    # --- server-wide actions ----------------------------------------------------------------

    def drop_watches(self) -> int:
        """Cut every open watch stream mid-response; returns how many were cut."""
        dropped = self._drop_watches()
        with self._lock:
            self.injected["drop_watches"] += dropped
        return dropped

    def compact(self) -> int:
        """Forget the watch history; returns the oldest resourceVersion still watchable."""
        floor = self._compact()
        with self._lock:
            self.injected["compact"] += 1
        return floor

    def restart(self, *, keep_store: bool = True, down_seconds: float = 0.0, wait: bool = True) -> None:
        """Stop listening, optionally wipe the store, and listen again on the same port.

        With `wait=False` the restart happens on another thread (the HTTP admin path uses
        this, since the request asking for it is served by the server being restarted).
        """
        with self._lock:
            self.injected["restart"] += 1
        self._restart(keep_store=keep_store, down_seconds=min(float(down_seconds), MAX_DELAY_SECONDS), wait=wait)

    @property
    def total(self) -> int:
        with self._lock:
            return sum(self.injected.values())

    def describe(self) -> dict[str, Any]:
        with self._lock:
            return {"rules": [r.describe() for r in self._rules], "injected": dict(self.injected)}

    # --- the HTTP admin interface -------------------------------------------------------------

    _RULE_ARGS = {
        "fail": ("method", "path", "status", "count", "message", "reason", "body", "retry_after", "watch"),
        "delay": ("method", "path", "seconds", "count", "watch"),
        "disconnect": ("method", "path", "count", "watch"),
    }

    def apply(self, spec: dict[str, Any]) -> dict[str, Any]:
        """Run one admin command, e.g. `{"action": "fail", "path": "/binding$", "status": 409}`.

        Raises ValueError for an unknown action or argument.
        """
        action = spec.get("action")
        args = {k: v for k, v in spec.items() if k != "action"}
        if action in self._RULE_ARGS:
            unknown = set(args) - set(self._RULE_ARGS[action])
            if unknown:
                raise ValueError(f"unknown arguments for {action}: {sorted(unknown)}")
            method, path = args.pop("method", None), args.pop("path", None)
            rule = getattr(self, action)(method, path, **args)
            return {"ok": True, "rule": rule.describe()}
        if action == "drop_watches":
            return {"ok": True, "dropped": self.drop_watches()}
        if action == "compact":
            return {"ok": True, "resourceVersion": str(self.compact())}
        if action == "clear":
            self.clear()
            return {"ok": True}
        if action == "restart":
            keep = bool(args.get("keep_store", True))
            down = float(args.get("down_seconds", 0.0))
            self.restart(keep_store=keep, down_seconds=down, wait=False)
            return {"ok": True}
        raise ValueError(f"unknown fault action {action!r}")
