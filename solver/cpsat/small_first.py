"""A second start for the neighbourhood search: greedy's pass with the smaller pods first within
each priority, made sound by a pass in kube-scheduler's order that follows it.

kube-scheduler takes the pods of one priority in the order they were created. On a contended
cluster the large pods that come early take room many small ones could share, and the search's
rounds, a few dozen nodes each, cannot undo that across a cluster: on the contended 1,000-node
windows (seeds 0-3) the rounds placed +61 to +140 pods of tier 100 in 6 s beyond greedy's plan,
where the same pass with each priority's pods taken smallest first (their cpu and memory as shares
of the cluster's, summed), then followed as below, placed +340 to +625, and as many or more of
tier 1000 (+1 to +12). Reordering only the lowest tier gained a third of that: the room the
higher tiers' small-first order leaves is where most of the lower pods go.

That pass is not kube-scheduler's order, so its victims are not the ones kube-scheduler's
preemption, replayed in queue order, would pick (the validator's replay). A second pass in
kube-scheduler's order follows it (``greedy.Guide``, pods it left out staying pending): each pod
goes to the node the first pass gave it, fitting there as it is or with the victims kube's
preemption picks on that node at its turn. In the measured windows it kept every placement of
the first pass; its victims are the replay's, each named for its preemptor.

Both passes together cost about what greedy's own pass does, so they run on the second core in a
forked child while greedy's pass runs in this process (``SmallFirstRun``). The child then
searches from its plan (``lns.improve``, half the cores' CP-SAT workers), sending each new incumbent,
while this process searches from greedy's plan; the decision keeps the better of the two
(``degraded._two_searches``). The two starts lead to different plans: on the contended
1,000-node seeds 1 and 7 the rounds from greedy's plan placed more of the highest tier with pods
left out (+41 of tier 1000, +39 of tier 10000, against +33 and +23 from the small-first plan, in
5 s each on the same plans), elsewhere the small-first plan's rounds did. With
``solver.secondSearch`` off the child gives only its plan, and the one search starts from whichever
plan ``choose`` prefers (``better_start``). Where ``os.fork`` is missing, or the machine has one
core, the start is greedy's plan as before.
"""

from __future__ import annotations

import logging
import os
import pickle
import signal
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from .. import interrupt, progress
from ..context import SchedulingContext
from ..greedy import GreedyResult, Guide, schedule_greedy
from ..info import PodInfo
from ..plugin_api import Victim
from ..plugins import registry
from .choose import not_worse

# The start is looked for when greedy's estimated pass (``greedy_run.estimated_greedy_seconds``,
# an overestimate: 8.4 s for the 1,000-node window's 2.7 s) is at most this many time limits: past
# it (5,000 nodes: 30 s for 10) greedy's own plan comes after the limit and no search runs, so the
# child would only hold memory.
MAX_ESTIMATE_LIMITS = 2.0
# Once greedy's plan is in, the child is waited for at most this share of the time left. Its plan
# is worth more than the rounds that time would run: on the 1,000-node seed 5 (greedy 4.6 s, the
# child past 5.2 s) a wait of 30% gave up on it, and the search from greedy's plan placed +17 of
# tier 100, where the run before, the child in time, placed +711.
WAIT_SHARE = 0.5
# A child that searches ends its search this long before the decision's deadline, so that its
# last round's plan is in when the decision's own search ends. It sends each new incumbent as it
# goes: the decision takes the last one in, waiting for none.
CHILD_EARLY = 0.3
# Once the child is stopped, what it wrote before is read for at most this long.
DRAIN_SECONDS = 0.5


def size_of(ctx: SchedulingContext) -> Callable[[PodInfo], float]:
    """A pod's size: its requests of cpu and memory as shares of the cluster's allocatable cpu and
    memory, summed. (The largest share of any resource, the ``pods`` count included, was tried
    first: on the contended 1,000-node windows seeds 0-2 the followed pass placed +310, +588 and
    +566 of tier 100 against +340, +592 and +625 with the sum, and evicted more.)"""
    total = ctx.state.alloc[:, :2].sum(axis=0).astype(np.float64)  # cpu, memory (``BASE_RESOURCES``)
    total[total <= 0] = 1.0
    vector = ctx.state.vector

    def size(pod: PodInfo) -> float:
        return float((vector(pod)[:2] / total).sum())

    return size


def order(ctx: SchedulingContext) -> list[PodInfo]:
    """The window with each priority's pods smallest first (ties in kube-scheduler's order), then
    the rules' QueueSort (a gang's members together at its first member's place)."""
    size = size_of(ctx)
    queue = sorted(ctx.window, key=lambda p: (-p.priority, size(p)))  # stable: PrioritySort's order among equals
    for sort in registry.QUEUE_SORTS:
        queue = sort(ctx, queue)
    return queue


def plan(ctx: SchedulingContext, static, cancel: Optional[threading.Event] = None) -> Optional[GreedyResult]:
    """The small-first pass followed in kube-scheduler's order (None when cancelled)."""
    first = schedule_greedy(ctx, static=static, queue=order(ctx), cancel=cancel)
    if first.cancelled:
        return None
    sound = schedule_greedy(ctx, static=static, guide=Guide(dict(first.placements), others=False), cancel=cancel)
    return None if sound.cancelled else sound


def better_start(ctx, greedy: GreedyResult, other: Optional[GreedyResult], weights: dict[int, int]) -> bool:
    """Whether ``other`` is strictly better than greedy's plan in the model's order."""
    if other is None:
        return False
    return not not_worse(ctx, (greedy.placements, greedy.victims), (other.placements, other.victims), weights)


def available() -> bool:
    """Whether a child can run beside greedy's pass: ``os.fork`` and a second core."""
    return hasattr(os, "fork") and (os.cpu_count() or 1) >= 2


def workers_each() -> int:
    """CP-SAT workers a round of each of the two searches takes: half the cores (one on 2 cores)."""
    return max(1, (os.cpu_count() or 2) // 2)


def wanted(ctx: SchedulingContext, limit: float) -> bool:
    """Whether the decision looks for the second start (the config's switch, a machine that can
    run it beside greedy, a window whose search gets some time)."""
    from .greedy_run import estimated_greedy_seconds

    return (ctx.config.solver.small_first_start and available()
            and estimated_greedy_seconds(ctx) <= MAX_ESTIMATE_LIMITS * limit)


class _ParentGone(threading.Event):
    """The child's cancel: set once the process that forked it is gone (asked every 256 pods)."""

    def __init__(self, parent: int) -> None:
        super().__init__()
        self.parent = parent
        self.asked = 0

    def is_set(self) -> bool:
        self.asked += 1
        return not self.asked & 255 and os.getppid() != self.parent


def _own_private_mib() -> Optional[float]:
    """This process's private resident memory in MiB (what a forked child adds to its parent's:
    the pages it copied on write or allocated), None where Linux's ``smaps_rollup`` is missing."""
    try:
        with open("/proc/self/smaps_rollup") as f:
            kib = sum(int(line.split()[1]) for line in f if line.startswith(("Private_Clean:", "Private_Dirty:")))
        return kib / 1024
    except (OSError, ValueError, IndexError):
        return None


class SmallFirstRun:
    """``plan`` in a forked child, on the second core while greedy's pass runs in this process;
    given ``search_until``, the child then searches from its plan until then (``lns.improve``, one
    CP-SAT worker a round on 2 cores, ``workers_each``) while this process searches from greedy's.

    The child shares the decision's context as the fork left it (copy on write), ignores Ctrl-C
    (this process stops it: ``stop``), stops by itself when this process is gone (its pass; its
    search ends at ``search_until``), and sends back plans as keys and node indices, one message
    each (its start, then each new incumbent of its search and the plan it ended with);
    ``result`` and ``searched`` rebuild them here."""

    def __init__(self, ctx: SchedulingContext, static, search_until: Optional[float] = None, seed: int = 0) -> None:
        self.ctx = ctx
        self.started = time.monotonic()
        self.finished: Optional[float] = None  # when the child's pipe closed (it ended)
        self.start_seconds: Optional[float] = None  # what its pass took, once its start came
        self.private_mib: Optional[float] = None  # the child's private memory at its end
        self.error: Optional[str] = None
        self.searches = search_until is not None  # whether the child searches after its pass
        self._data = bytearray()
        self._lock = threading.Lock()
        self._messages: list[Any] = []
        self.pid: Optional[int] = None
        try:
            read, write = os.pipe()
        except OSError as exc:  # out of file descriptors: no second start, greedy's plan starts
            self.error, self.finished, self.searches = f"no pipe to a child: {exc}", time.monotonic(), False
            return
        parent = os.getpid()
        try:
            with warnings.catch_warnings():
                # Python 3.12 warns of a fork in a process with threads (a lock another thread held
                # is held forever in the child). The child runs greedy's passes and the search on
                # the decision's own objects, which do no I/O but its pipe (its logging is switched
                # off); CPython re-creates its own locks (the GIL, imports, logging) in a child.
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
        except OSError as exc:  # no memory or process slot for a child: greedy's plan starts
            os.close(read)
            os.close(write)
            self.error, self.finished, self.searches = f"could not fork: {exc}", time.monotonic(), False
            return
        if pid == 0:  # the child: compute, send, leave without running this process's exit code
            code = 1
            try:
                os.close(read)
                signal.signal(signal.SIGINT, signal.SIG_IGN)
                logging.disable(logging.CRITICAL)  # its lines would interleave with this process's
                with progress.listening(None):  # type: ignore[arg-type]  # no stage lines from here
                    _child(ctx, static, write, parent, search_until, seed)
                code = 0
            except BaseException as exc:  # noqa: BLE001 - told to the parent, never raised there
                try:
                    _send(write, ("error", repr(exc)))
                except BaseException:  # noqa: BLE001
                    pass
            finally:
                os._exit(code)
        os.close(write)
        self.pid = pid
        self._read = read
        self._reader = threading.Thread(target=self._drain, name="small-first-reader", daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        try:
            while chunk := os.read(self._read, 1 << 20):
                with self._lock:
                    self._data += chunk
                    while len(self._data) >= 8:
                        size = int.from_bytes(self._data[:8], "little")
                        if len(self._data) < 8 + size:
                            break
                        self._messages.append(pickle.loads(bytes(self._data[8:8 + size])))
                        del self._data[:8 + size]
        except (OSError, pickle.UnpicklingError, EOFError, ValueError):
            pass
        finally:
            os.close(self._read)
            self.finished = time.monotonic()

    @property
    def done(self) -> bool:
        return self.finished is not None

    def _wait(self, count: int, timeout: float) -> Any:
        """The child's ``count``-th message, waited for at most ``timeout`` seconds (None: not in
        time, the child ended without it, or it said it failed: ``error``)."""
        until = time.monotonic() + max(0.0, timeout)
        interrupt.check()
        while True:
            ended = self.done  # (read first: the reader has parsed every message once it is done)
            with self._lock:
                messages = list(self._messages)
            if len(messages) >= count and not _failed(messages[count - 1]):
                return messages[count - 1]
            failed = next((m for m in messages if _failed(m)), None)
            if failed is not None:
                self.error = failed[1]
                return None
            if ended or time.monotonic() >= until:
                return None
            self._reader.join(min(0.05, max(0.0, until - time.monotonic())))
            interrupt.check()

    def result(self, timeout: float) -> Optional[GreedyResult]:
        """The child's plan, waited for at most ``timeout`` seconds (None: not in time, or it
        failed). A child that does not go on to search is stopped either way; one that does is
        stopped only when it failed."""
        payload = self._wait(1, timeout)
        with self._lock:
            ended = bool(self._messages) or self.done  # (a child whose start is still to come searches on)
        if not self.searches or (payload is None and ended):
            self.stop()
        if payload is None:
            return None
        placements, victims, nominations, self.start_seconds, mib = payload
        if self.private_mib is None:
            self.private_mib = mib
        return self._rebuilt(placements, victims, nominations)

    def searched(self, timeout: float) -> Optional[tuple[GreedyResult, Any]]:
        """The last plan the child's search sent (it sends each new incumbent, then the plan it
        ended with) and its ``LnsStats`` then, the child's end waited for at most ``timeout``
        seconds (None: no search, nothing sent, or it failed first); the child is stopped."""
        if not self.searches:
            self.stop()
            return None
        until = time.monotonic() + max(0.0, timeout)
        interrupt.check()
        while not self.done and time.monotonic() < until:
            self._reader.join(min(0.05, max(0.0, until - time.monotonic())))
            interrupt.check()
        self.stop()
        self._reader.join(DRAIN_SECONDS)  # what it wrote before it was stopped
        with self._lock:
            messages = list(self._messages)
        failed = next((m for m in messages if _failed(m)), None)
        if failed is not None:
            self.error = failed[1]
        sent = [m for m in messages[1:] if not _failed(m)]
        if not sent:
            return None
        placements, victims, nominations, stats, self.private_mib = sent[-1]
        plan = self._rebuilt(placements, victims, nominations)
        return None if plan is None else (plan, stats)

    def settled(self) -> Optional[str]:
        """Why the child's search stopped before its deadline, once its last message says so:
        its plan is one no round can improve (``lns.settled``), so this process's search, whose
        plan cannot be better, may stop too. None until then."""
        with self._lock:
            last = self._messages[-1] if len(self._messages) > 1 else None
        why = getattr(last[3], "settled", None) if isinstance(last, tuple) and len(last) == 5 else None
        return None if why is None else f"the second process's plan is one no round can improve ({why})"

    def _rebuilt(self, placements: dict[str, int], victims: list[tuple[str, int, Optional[str]]],
                 nominations: dict[str, int]) -> Optional[GreedyResult]:
        """A plan the child sent, as this process's objects (None, with ``error``: one this
        decision's cluster cannot hold)."""
        ctx = self.ctx
        on = ctx.state.pods_on
        try:
            # (a victim no replay has named yet comes with an empty name: ``name_by_replay`` names it)
            out = [Victim(on[node][key], node, preemptor or "") for key, node, preemptor in victims]
            for key, node in placements.items():
                ctx.window_pod(key)
                if not 0 <= node < len(ctx.nodes):
                    raise IndexError(f"node {node} of {key}")
        except (KeyError, IndexError) as exc:  # a plan this decision's cluster cannot hold
            self.error = f"its plan does not fit the decision's cluster: {exc!r}"
            return None
        # No state: the search applies the plan to the cluster at its first round (``lns._applied``).
        return GreedyResult(placements=placements, victims=out, nominations=nominations)

    def stop(self) -> None:
        """Stop the child (if still running) and reap it."""
        pid, self.pid = self.pid, None
        if pid is None:
            return
        if not self.done:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:
            pass

    @property
    def seconds(self) -> float:
        """What the child's pass took (or has taken so far)."""
        if self.start_seconds is not None:
            return self.start_seconds
        return (self.finished or time.monotonic()) - self.started


def _failed(message: object) -> bool:
    return isinstance(message, tuple) and len(message) == 2 and message[0] == "error"


def _send(write: int, payload: object) -> None:
    data = pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)
    view = memoryview(len(data).to_bytes(8, "little") + data)
    while view:
        view = view[os.write(write, view):]


def _child(ctx: SchedulingContext, static, write: int, parent: int, search_until: Optional[float], seed: int) -> None:
    """The child's work: the pass, its plan sent; then, given ``search_until``, the search from it
    and the plan it ends with sent (the search's own ``LnsStats`` beside it)."""
    from . import lns  # (lns does not import this module; the child alone needs it)

    began = time.monotonic()
    result = plan(ctx, static, cancel=_ParentGone(parent))
    if result is None:
        _send(write, None)
        return
    took = time.monotonic() - began
    _send(write, (result.placements, _named(result.victims), result.nominations, took, _own_private_mib()))
    if search_until is None or os.getppid() != parent:
        return

    def better(placements: dict[str, int], victims: list[Victim], names: dict[str, str], stats: Any) -> None:
        # (a victim a replay has not named goes with None: the decision names it by a replay)
        _send(write, (placements, [(v.pod.key, v.node, names.get(v.pod.key)) for v in victims], {}, stats,
                      _own_private_mib()))

    sol, stats = lns.improve(ctx, static, result, search_until, seed=seed + 1, greedy_seconds=took / 2,
                             workers=workers_each(), on_better=better)
    _send(write, (sol.placements, _named(sol.victims), sol.nominations, stats, _own_private_mib()))


def _named(victims: list[Victim]) -> list[tuple[str, int, str]]:
    return [(v.pod.key, v.node, v.preemptor) for v in victims]


def start_note(run: Optional[SmallFirstRun], other: Optional[GreedyResult], used: bool) -> Optional[str]:
    """What the second start came to, for the stats (None: it was not looked for)."""
    if run is None:
        return None
    took = f"{run.seconds:.1f}s beside greedy's pass"
    if other is None:
        if run.error is not None:
            return f"the small-first pass failed ({run.error}); the search started from greedy's plan"
        return f"the small-first pass was not done in time ({took}); the search started from greedy's plan"
    if used:
        return f"the search started from the small-first pass's plan ({took}), better than greedy's"
    return f"the small-first pass's plan ({took}) was not better than greedy's; the search started from greedy's"


def search_note(run: SmallFirstRun, start: Optional[GreedyResult], theirs: Optional[tuple[GreedyResult, Any]],
                mine: Any, used: bool) -> str:
    """What the two searches came to, for the stats: the child's from the small-first pass's plan
    (``start``; ``theirs``: its plan and ``LnsStats``, None when nothing came), this process's
    from greedy's (``mine``), and whether the child's plan was kept (``used``)."""
    if start is None:
        why = f"failed ({run.error})" if run.error is not None else f"was not done in time ({run.seconds:.1f}s)"
        return f"the small-first pass {why}; the plan is this process's search from greedy's plan"
    took = f"{run.seconds:.1f}s beside greedy's pass"
    if theirs is None:
        child = (f"its search failed ({run.error})" if run.error is not None else "its search sent nothing in time")
    else:
        child = f"its search ran {theirs[1].rounds} round(s), {theirs[1].improved} improving"
    ours = f"this process's search from greedy's plan ran {mine.rounds} round(s), {mine.improved} improving"
    if used:
        return f"two searches: the plan is the second process's, from the small-first pass's plan ({took}; {child}); {ours}"
    return f"two searches: the plan is this process's; the second process's, from the small-first pass's plan ({took}; {child}), gave less; {ours}"
