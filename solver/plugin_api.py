"""What a plugin may know of the engines that call it: the floor every plugin stands on.

kube-scheduler's plugins depend *down* on ``framework/interface.go``, never on the scheduler that
runs them; here the same holds. A plugin imports its types from this module (and the basics under
it: ``framework``, ``info``, ``state``, ``terms``, ``models``), never from greedy, CP-SAT, the
validator, the scoring engine or re-packing (an import-linter contract in pyproject.toml says so).

It holds

* ``Plugin``: the one object each plugin package exports as ``PLUGIN``, naming what it
  implements; ``plugins/registry.py`` lists those objects and the engines loop over the list;
* small value types a plugin builds or reads: ``Victim``, ``Level``;
* views (protocols) of the engines' objects a plugin is handed: the window model it encodes into
  (``EncodeModel``), the replayed plan it checks (``ReplayView``), the score context
  (``ScoreView``), the static filters and one pod's filter cycle (``StaticView``, ``CycleView``)
  and a pod class (``ClassView``). An engine's object satisfies its view by shape; nothing here
  imports an engine.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import IntEnum
import functools
from typing import TYPE_CHECKING, Any, Generic, Optional, Protocol, TypeVar, cast, runtime_checkable

import random

import numpy as np
from ortools.sat.python import cp_model

from .framework import Status
from .info import NodeInfo, PodInfo
from .state import Book, BookMaker, ClusterState, PluginState
from .terms import AffinityTerm

if TYPE_CHECKING:
    from models.config import SchedulerConfig, ScoringConfig
    from models.objects import NodeSelectorTerm, PodGroup, Toleration
    from models.objects import Node, Pod
    from models.dra import ClaimUse
    from models.plan import DeviceAllocation, Plan, VolumeBinding
    from models.snapshot import ClusterSnapshot


# --------------------------------------------------------------------------- value types


@dataclass
class Victim:
    """A running pod a plan evicts: the pod, its node's index, and the preemptor named for it."""

    pod: PodInfo
    node: int
    preemptor: str


@dataclass
class Level:
    """One lexicographic objective level: maximise Σ coeff·var. Each term carries its variable's
    bounds, so the level's range is known without reading the model back."""

    name: str
    terms: list[tuple[cp_model.IntVar, int]] = field(default_factory=list)
    constant: int = 0
    low: int = 0
    high: int = 0

    def add(self, var, coeff: int, lo: int, hi: int) -> None:
        """Add ``coeff · var`` with ``lo ≤ var ≤ hi``."""
        if coeff:
            coeff = int(coeff)
            self.terms.append((var, coeff))
            self.low += min(coeff * lo, coeff * hi)
            self.high += max(coeff * lo, coeff * hi)

    def bounds(self) -> tuple[int, int]:
        return self.low + self.constant, self.high + self.constant

    def expr(self):
        if not self.terms:
            return self.constant
        vars_, coeffs = zip(*self.terms)
        return cp_model.LinearExpr.weighted_sum(list(vars_), list(coeffs)) + self.constant


# --------------------------------------------------------------------------- books preemption asks


@runtime_checkable
class GivesBack(Protocol):
    """A rule's book (``PluginState``) whose holdings an eviction may give back, so preemption's
    dry runs cannot be read off the node's room alone (DRA's devices: a claim reserved only for
    evicted pods): preemption asks every book of the state that meets this protocol, naming none."""

    def gives_back_to(self, pod: PodInfo) -> bool:
        """Whether evicting pods may free something of this book that ``pod`` asks for."""
        ...

    def returnable(self, pod: PodInfo) -> bool:
        """Whether ``pod``, taken out and put back, can take its holdings again."""
        ...


def gives_back(state: ClusterState) -> list[GivesBack]:
    """The state's books an eviction may give something back from."""
    return [cast(GivesBack, book) for book in state.books.values() if _gives_back_type(type(book))]


@functools.lru_cache(maxsize=None)
def _gives_back_type(kind: type) -> bool:
    """Whether books of ``kind`` meet ``GivesBack`` (asked once per type: a runtime protocol
    check costs microseconds, and preemption asks it for every book of every failing pod)."""
    return all(callable(getattr(kind, name, None)) for name in ("gives_back_to", "returnable"))


@runtime_checkable
class GivesBackInModel(Protocol):
    """A rule's book whose holdings the window model's evictions may give back (DRA's devices of
    a claim reserved only for evicted pods): DefaultPreemption's reprieve encoding asks every book
    of the model's state that meets this protocol why a victim's eviction may be needed beyond
    the node's room, naming none."""

    def freed_reasons(self, wm: EncodeModel, node: int, victim: PodInfo, level: int,
                      above: list[tuple[ClassView, cp_model.IntVar]]) -> list[cp_model.IntVar]:
        """Literals, each true only when evicting ``victim`` gives back something of this book that
        a class of ``above`` (placed on ``node`` at or above ``level``: (class, x[c, node])) may
        take; [] when it gives back nothing such a class asks for."""
        ...


@runtime_checkable
class TermOwners(Protocol):
    """A rule's book counting, per node, the running pods that hold each required anti-affinity
    term (InterPodAffinity's): the packing hint keeps running pods' terms in its domains and the
    components join the classes an eviction lifts a term for, asking whichever book meets this
    protocol (``term_owners``), naming none."""

    def term_owners(self) -> Mapping[AffinityTerm, np.ndarray]:
        """Every held term and how many pods on each node hold it (read-only)."""
        ...


def term_owners(state: ClusterState) -> Mapping[AffinityTerm, np.ndarray]:
    """The required anti-affinity terms pods in ``state`` hold, with their owners per node
    (empty when no book counts them)."""
    for book in state.books.values():
        if isinstance(book, TermOwners):
            return book.term_owners()
    return {}


@runtime_checkable
class KeepsNodesApart(Protocol):
    """A rule's book whose holdings tell nodes apart that look alike otherwise (running pods'
    inter-pod terms): the node-class reduction asks every book meeting this protocol
    (``kept_apart``) before merging nodes, naming none."""

    def keeps_nodes_apart(self) -> Optional[str]:
        """Why the state's nodes cannot be merged into classes now (None: they can)."""
        ...


def kept_apart(state: ClusterState) -> Optional[str]:
    """The first reason a book of ``state`` gives for keeping its nodes apart (None: none does)."""
    for book in state.books.values():
        if isinstance(book, KeepsNodesApart):
            why = book.keeps_nodes_apart()
            if why is not None:
                return why
    return None


# --------------------------------------------------------------------------- views of the engines

T = TypeVar("T")
C = TypeVar("C")  # a pod class, as the engine holds it


class ClassView(Protocol):
    """Pending pods interchangeable for every rule (``context.PodClass``)."""

    id: int
    pods: list[PodInfo]

    @property
    def rep(self) -> PodInfo: ...

    @property
    def size(self) -> int: ...


class ContextView(Protocol):
    """One decision's context (``context.SchedulingContext``): the snapshot's nodes and state,
    the window's pods in queue order and their classes, the room nominated outside the window."""

    @property
    def config(self) -> SchedulerConfig: ...

    @property
    def state(self) -> ClusterState: ...

    @property
    def nodes(self) -> Sequence[NodeInfo]: ...

    @property
    def window(self) -> Sequence[PodInfo]: ...

    @property
    def classes(self) -> Sequence[ClassView]: ...

    @property
    def pod_groups(self) -> Mapping[str, PodGroup]: ...

    @property
    def snapshot(self) -> ClusterSnapshot: ...

    @property
    def bound(self) -> Sequence[PodInfo]:
        """The pods holding nodes, in the snapshot's order."""
        ...

    @property
    def settled(self) -> Sequence[tuple[PodInfo, int]]:
        """Pods of the decision placed outside this model (an LNS round's fixed remainder)."""
        ...

    @property
    def claims(self) -> Nominations: ...

    def pod(self, key: str) -> Optional[PodInfo]: ...

    def queue(self) -> Sequence[PodInfo]:
        """The window in kube-scheduler's queue order: ``window`` (priority, creation, name) as
        the rules' QueueSort reorders it (``Plugin.queue_sort``)."""
        ...

    def turns(self) -> Mapping[str, int]:
        """Each window pod's turn in ``queue()`` (its index)."""
        ...


class StaticView(Protocol):
    """The static filters' cached verdicts (``filtering.StaticFilters``)."""

    nodes: list[NodeInfo]

    def statuses(self, pod: PodInfo) -> list[Status]: ...

    def mask(self, pod: PodInfo) -> np.ndarray: ...

    def node_mask(self, name: str, pod: PodInfo, check: Callable[[PodInfo, NodeInfo], bool]) -> np.ndarray:
        """Nodes where a static predicate holds, cached per static key under ``name``."""
        ...

    def cycle(self, pod: PodInfo, state: ClusterState, *, version: str = ...) -> CycleView: ...


class CycleView(Protocol):
    """One pod's filter cycle against one state (``filtering.Cycle``)."""

    pod: PodInfo
    state: ClusterState
    version: str

    @property
    def static(self) -> StaticView: ...

    @property
    def node_local(self) -> bool: ...

    def status(self, node: NodeInfo) -> Status: ...

    def statuses(self) -> list[Status]: ...

    def dynamic_status(self, node: NodeInfo) -> Status: ...

    def feasible(self, candidates: Optional[np.ndarray] = None) -> np.ndarray: ...

    def on_node(self, node: int) -> Optional[NodeDryRun]:
        """Every filter's verdict on ``node`` as one dry run (None: some filter has none)."""
        ...


class NodeDryRun(Protocol):
    """One pod's filter verdict on one node, kept current as pods leave the node and come back
    without touching the state: kube-scheduler's ``PreFilterExtensions.RemovePod``/``AddPod`` on
    a copy of the cycle state, for preemption's dry run (SEMANTICS.md §6: remove every lower
    pod, then reprieve them one by one). The PreFilter ran once, on the state as it is; each
    step changes only what the node's own verdict reads of it (the node's room and ports, its
    domain's counts, the global minimum of a spread constraint)."""

    def remove_pod(self, pod: PodInfo) -> None:
        """``pod``, running on the node, is taken off it."""
        ...

    def add_pod(self, pod: PodInfo) -> None:
        """``pod``, taken off before, is put back on the node."""
        ...

    def status(self) -> Status:
        """The filter's verdict on the node now."""
        ...

    def fits(self) -> bool:
        """``status().ok``, without making a failure's reasons (a reprieve asks it per pod put back)."""
        ...

    def reads(self) -> Hashable:
        """What the verdicts read beyond the node's own pods, as it was when the dry run began
        (a spread constraint's count in the node's domain and the other domains' minimum; ()
        for a node-local filter): two dry runs on a node holding the same pods, whose ``reads``
        are equal, give the same verdicts at every step."""
        ...


class CycleFilter(Protocol):
    """One dynamic filter's PreFilter result for one pod against one state, as ``filtering.Cycle``
    runs it (a plugin's ``cycle`` hook makes it; None when the filter passes on every node).

    ``local``: it reads only the node's own state (requests, host ports), so a pod class's verdicts
    are kept on the state and refreshed only on the nodes touched since (``fits`` answers one
    node). ``failed``: a failed PreFilter, every node's status; ``error`` its message, which
    replaces the reasons' histogram in the FitError."""

    local: bool
    failed: Optional[Status]
    error: Optional[str]

    def status(self, node: NodeInfo) -> Status:
        """The filter's verdict on one node."""
        ...

    def statuses(self, nodes: np.ndarray, out: list[Status]) -> np.ndarray:
        """Verdicts on ``nodes`` (indices) at once: each failure written into ``out``; returns
        the nodes that pass, in order."""
        ...

    def feasible(self, nodes: np.ndarray) -> np.ndarray:
        """Per node of ``nodes``, whether it passes (a bool mask)."""
        ...

    def fits(self, node: int) -> bool:
        """``feasible`` for one node (only asked of a ``local`` filter)."""
        ...

    def on_node(self, node: int) -> Optional[NodeDryRun]:
        """The filter's verdict on ``node`` as a dry run (``NodeDryRun``), starting from the state
        the cycle was made on; None when the filter has none (the caller then runs a new cycle
        per step on a changed state)."""
        ...


class NodeByNode(ABC):
    """A ``CycleFilter``'s defaults: not local, no failed PreFilter, and the many-node answers
    asked node by node of ``status`` (a subclass sets ``nodes``, the state's node list, gives
    ``status``, its one-node Filter, and overrides what it can answer faster)."""

    local = False
    failed: Optional[Status] = None
    error: Optional[str] = None
    nodes: list[NodeInfo]

    @abstractmethod
    def status(self, node: NodeInfo) -> Status:
        """The filter's answer on one node."""

    def statuses(self, nodes: np.ndarray, out: list[Status]) -> np.ndarray:
        keep = []
        for n in nodes.tolist():
            status = self.status(self.nodes[n])
            if status.ok:
                keep.append(n)
            else:
                out[n] = status
        return np.array(keep, dtype=np.int64)

    def feasible(self, nodes: np.ndarray) -> np.ndarray:
        return np.fromiter((self.status(self.nodes[n]).ok for n in nodes.tolist()), dtype=bool, count=len(nodes))

    def fits(self, node: int) -> bool:
        return self.status(self.nodes[node]).ok

    def on_node(self, node: int) -> Optional[NodeDryRun]:
        return None


P = TypeVar("P")  # a PreFilter's result


class CodedCycle(NodeByNode, Generic[P]):
    """A ``CycleFilter`` on a PreFilter's result ``pre`` whose many-node check gives a code per
    node (0: fits) and whose codes index shared statuses: the shape of the filters that vectorise
    their PreFilter's counts (pod (anti-)affinity, topology spread). ``check(pod, node, pre)`` is the
    one-node Filter; ``codes(nodes, pre)`` and ``feasible(nodes, pre)`` the many-node answers;
    ``dry_run(node)``, when given, the filter's ``NodeDryRun`` on one node."""

    def __init__(self, pod: PodInfo, pre: P, nodes: list[NodeInfo], check: Callable[[PodInfo, NodeInfo, P], Status],
                 codes: Callable[[np.ndarray, P], np.ndarray], statuses: Sequence[Status],
                 feasible: Callable[[np.ndarray, P], np.ndarray],
                 dry_run: Optional[Callable[[int], NodeDryRun]] = None) -> None:
        self.pod, self.pre, self.nodes = pod, pre, nodes
        self._check, self._codes, self._statuses, self._feasible = check, codes, statuses, feasible
        self._dry_run = dry_run

    def status(self, node: NodeInfo) -> Status:
        return self._check(self.pod, node, self.pre)

    def statuses(self, nodes: np.ndarray, out: list[Status]) -> np.ndarray:
        codes = self._codes(nodes, self.pre)
        for n, code in zip(nodes.tolist(), codes.tolist()):
            if code:
                out[n] = self._statuses[code]
        return nodes[codes == 0]

    def feasible(self, nodes: np.ndarray) -> np.ndarray:
        return self._feasible(nodes, self.pre)

    def on_node(self, node: int) -> Optional[NodeDryRun]:
        return self._dry_run(node) if self._dry_run is not None else None


class EncodeModel(Protocol):
    """The CP-SAT window model an encoder adds its constraints to (``cpsat.model.WindowModel``):
    x[c, n] pods of class c on node n, evict[v], the objective levels, and the shared helpers."""

    state: ClusterState
    model: cp_model.CpModel
    allow_preemption: bool
    x: dict[tuple[int, int], cp_model.IntVar]
    cand: dict[int, np.ndarray]
    placed: dict[int, cp_model.IntVar | int]
    evict: dict[str, cp_model.IntVar]
    evict_pod: dict[str, tuple[PodInfo, int]]
    evict_level: dict[str, dict[int, cp_model.IntVar]]
    levels: list[Level]
    vec: dict[int, np.ndarray]

    @property
    def ctx(self) -> ContextView: ...

    @property
    def static(self) -> StaticView: ...

    @property
    def classes(self) -> Sequence[ClassView]:
        """The model's classes (``x[c, n]``'s ``c`` is a class's ``id``)."""
        ...

    @property
    def by_node(self) -> Mapping[int, Sequence[tuple[ClassView, cp_model.IntVar]]]:
        """Per node, its (class, x[c, n]) pairs."""
        ...

    @property
    def by_class(self) -> Mapping[int, Sequence[tuple[int, cp_model.IntVar]]]:
        """Per class id, its (node, x[c, n]) pairs."""
        ...

    @property
    def window(self) -> Mapping[str, WindowPart]:
        """The rules' views of the whole window, by plugin name (empty outside a scheduling
        window): an encoder reads its own plugin's part (the gangs it starts from)."""
        ...

    def class_of(self, pod: PodInfo) -> int: ...

    def ub_of(self, cls_id: int, node: int) -> int: ...

    def level(self, name: str) -> Level: ...

    def class_vars_by_domain(self, cls_id: int, key: str) -> dict[int, list]: ...

    def class_pairs_by_domain(self, cls_id: int, key: str) -> dict[int, list[tuple[int, cp_model.IntVar]]]: ...

    def new_presence(self, name: str, vars_: list, bound: int) -> cp_model.IntVar: ...

    def node_used(self, n: int) -> cp_model.IntVar: ...

    def evictable(self, pod: PodInfo) -> Optional[cp_model.IntVar]: ...


class ReplayView(Protocol):
    """A plan replayed on its snapshot (``validate.Replay``): the states a final check reads
    (``before`` the snapshot, ``base`` less the victims, ``final`` plus the assignments) and
    ``report`` for each violation."""

    plan: Plan
    problems: list[str]
    assigned: dict[str, int]
    victims: list[Victim]
    nodes: list[NodeInfo]
    window: dict[str, PodInfo]
    before: ClusterState
    base: ClusterState
    final: ClusterState
    placed_on: dict[int, list[PodInfo]]

    @property
    def ctx(self) -> ContextView: ...

    @property
    def static(self) -> StaticView: ...

    def report(self, line: str) -> None: ...

    def node_name(self, index: int) -> str: ...

    def placed(self) -> Iterable[tuple[PodInfo, int]]: ...


class ScoreView(Protocol):
    """What score plugins read besides the pod and the state (``scoring.ScoreContext``)."""

    scoring: ScoringConfig
    strategy: str
    kubernetes_version: str
    num_nodes: int
    image_nodes: Mapping[str, tuple[int, int]]
    memo: dict[str, Any]  # a score plugin's own values for the decision, under its NAME

    @property
    def index(self) -> NodeIndexView: ...


class NodeIndexView(Protocol):
    """What the scoring index answers of the nodes at once (``scoring.NodeIndex``)."""

    @property
    def size(self) -> int:
        """How many nodes."""
        ...

    def domain(self, key: str) -> tuple[np.ndarray, dict[str, int], list[str]]: ...

    def term_mask(self, term: NodeSelectorTerm) -> np.ndarray: ...

    def required_affinity_mask(self, pod: PodInfo) -> np.ndarray: ...

    def tolerated_mask(self, tolerations: Iterable[Toleration]) -> np.ndarray: ...

    def prefer_no_schedule_counts(self, tolerations: Iterable[Toleration]) -> np.ndarray: ...

    def image_mask(self, image: str) -> Optional[np.ndarray]: ...


class Values(Protocol):
    """A solution's values: a CP-SAT solver after its solve, or a hint read as a plan."""

    def value(self, var: cp_model.IntVar) -> int: ...


class Nominations(Protocol):
    """The room pending pods outside the window are nominated to (``SchedulingContext.claims``,
    made by a plugin's ``nominations`` hook): held on a state while a window pod is filtered, and
    kept out of the free room a quick packing fills. False when nothing is held anywhere."""

    def __bool__(self) -> bool: ...

    def hold(self, state: ClusterState, pod: PodInfo, placed: Iterable[str]) -> list[PodInfo]:
        """Add to ``state`` the room ``pod`` honours (``placed``: the window pods placed so far);
        returns what was added, for ``release``."""
        ...

    def release(self, state: ClusterState, held: list[PodInfo]) -> None:
        """Take ``hold``'s additions back out."""
        ...

    def withheld(self, free: np.ndarray) -> np.ndarray:
        """A copy of ``free`` (nodes × resources) less all the room held."""
        ...

    def first_node(self, pod: PodInfo, cycle: CycleView, allowed: Optional[np.ndarray]) -> np.ndarray:
        """The node greedy tries first for ``pod`` (its own nominated node, when it passes the
        filters and ``allowed``), as a one-node array; empty when there is none."""
        ...


class _NoNominations:
    """``Nominations`` with nothing held (a context no plugin gave nominations)."""

    def __bool__(self) -> bool:
        return False

    def hold(self, state: ClusterState, pod: PodInfo, placed: Iterable[str]) -> list[PodInfo]:
        return []

    def release(self, state: ClusterState, held: list[PodInfo]) -> None:
        return None

    def withheld(self, free: np.ndarray) -> np.ndarray:
        return free.copy()

    def first_node(self, pod: PodInfo, cycle: CycleView, allowed: Optional[np.ndarray]) -> np.ndarray:
        return np.empty(0, dtype=np.int64)


NO_NOMINATIONS: Nominations = _NoNominations()


@runtime_checkable
class PlacementDecoder(Protocol):
    """An encoding that decodes some classes' placements itself (``cpsat/decode.py`` asks every
    encoding the window model holds): the classes it decodes, and their pods' nodes from the
    model's counts (class id -> [(node, pods)])."""

    def decoded_classes(self) -> set[int]: ...

    def decode(self, wm: EncodeModel, counts: Mapping[int, list[tuple[int, int]]]) -> dict[str, int]: ...


@runtime_checkable
class UnitTrades(Protocol):
    """A ``PlacementDecoder`` whose units (a kind's interchangeable gangs) may be dealt the same
    counts otherwise: the model's counts are the same whichever unit takes which places, and
    kube-scheduler's turns may need another deal than the decoder's (``cpsat/kube_victims.hand_by_turns``
    tries a few when the replay refuses a plan). ``trades(wm, placements, key)``: the other
    deals worth a try for pod ``key``, lazily, each as (the pod whose turn decides whether it
    may help, what changes — equal for the same change asked from another pod —, a function
    that makes the whole plan); nothing when ``key`` is in no such unit."""

    def trades(self, wm: EncodeModel, placements: Mapping[str, int], key: str
               ) -> Iterator[tuple[str, Hashable, Callable[[], dict[str, int]]]]: ...


class HandOut(Protocol):
    """How a rule hands a class's places to its pods (``Plugin.hand_out``; ``cpsat/decode.py``):
    the model counts a class's pods per node, the plan names them, and kube-scheduler takes them
    in queue order, each judged on what is placed before it. ``applies(rep)``: whether the rule
    has a say for the class of ``rep``; ``order(ctx, static, pods, slots)``: the node of each of
    the first pods of ``pods`` (queue order), one per place of ``slots`` ((node, pods there), by
    node). Without one, places go node by node."""

    def applies(self, rep: PodInfo) -> bool: ...

    def order(self, ctx: ContextView, static: StaticView, pods: Sequence[PodInfo],
              slots: Sequence[tuple[int, int]]) -> list[int]: ...


@runtime_checkable
class PreemptorNamer(Protocol):
    """An encoding with a say in which placed pod a victim is evicted for: ``narrow`` keeps the
    candidates the model chose among ``preemptors`` (all of them when it chose none), and
    ``rank`` orders what is left (lowest first; ties go to the pod's key). ``named`` gives, per
    class, the model's literal "the plan names a pod of this class as ``victim``'s preemptor"
    (empty where the model names none): the replay must name a pod of the chosen class
    (``cpsat/kube_victims.py``), and a plan where it does not is cut on that literal."""

    def narrow(self, victim: PodInfo, preemptors: list[PodInfo], values: Values,
               class_of: Callable[[PodInfo], int]) -> list[PodInfo]: ...

    def rank(self, pod: PodInfo, victim: PodInfo) -> bool | int | tuple: ...

    def named(self, victim: PodInfo) -> Mapping[int, Any]: ...


@runtime_checkable
class HintsItself(Protocol):
    """An encoding that hints its own variables from a plan the engine hints (``cpsat/hint.py``):
    ``by_class`` the plan's pods per class (class id -> [(node, pods)]), ``placed`` per class in
    all, ``placements`` the plan pod by pod when it is one (greedy's), else None."""

    def hint(self, wm: EncodeModel, by_class: dict[int, list[tuple[int, int]]], placed: dict[int, int],
             placements: Optional[dict[str, int]]) -> None: ...


@runtime_checkable
class PacksWhole(Protocol):
    """An encoding whose classes the packing hint places unit by unit, all of a unit's ``need``
    pods or none (gangs): ``packing_units`` gives (need, [(class, pods per unit)], number of
    such units, where), ``where`` None (any node) or (free room) -> the node masks to try in
    turn; ``packing_leaves_out``, a class outside the units the packing leaves out."""

    def packing_units(self, wm: EncodeModel) -> list[tuple[int, list, int, Optional[Callable]]]: ...

    def packing_leaves_out(self, wm: EncodeModel, cls: ClassView) -> bool: ...


class PackingBook(Protocol):
    """A rule's state the packing hint counts exactly as it places pods (devices): per class it
    counts, per candidate node: ``cap``, the pods more the free state takes (a large number
    when the class takes nothing of it); ``take``, count them (negative: give back)."""

    def counts(self, cls_id: int) -> bool:
        """Whether the book counts the class (its pods take what it keeps)."""
        ...

    def cap(self, cls_id: int, i: int) -> int:
        """The pods more of the class its ``i``-th candidate node takes, as the book stands."""
        ...

    def take(self, cls_id: int, i: int, pods: int) -> None:
        """Count ``pods`` more of the class on its ``i``-th candidate (negative: give back)."""
        ...


@runtime_checkable
class Relaxable(Protocol):
    """An encoding that states a rule stricter than the one a plan is finally judged by: the
    model's level-by-level reprieve, where kube-scheduler's preemption takes the pods one at a
    time. ``admit`` lets one plan's own evictions through beside it (greedy's, kube-scheduler's
    order: the hint and the floor, ``cpsat/hint.py``); ``relax`` lifts it in a copy of the model,
    to check a plan repaired to the exact rule (``cpsat/kube_victims.py``)."""

    def admit(self, wm: EncodeModel, counts: Mapping[tuple[int, int], int], victims: Mapping[int, set[str]]) -> None: ...

    def relax(self, model: cp_model.CpModel) -> None: ...


@runtime_checkable
class CarriesHint(Protocol):
    """An encoding whose own variables a staged solve hints the next stage with (``hint_vars``)."""

    def hint_vars(self) -> list[cp_model.IntVar]: ...


class Capacity(Protocol):
    """A rule counting a pod's request vector against a node's room (NodeResourcesFit): the
    engines' candidate bounds, packing hints and node-class decodes ask it through
    ``registry.fits``/``registry.copies``. ``room``: one node's row, or one row per node."""

    def fits(self, vec: np.ndarray, room: np.ndarray) -> np.ndarray | bool:
        """Whether one pod of ``vec`` fits (a bool per row)."""
        ...

    def copies(self, vec: np.ndarray, room: np.ndarray) -> np.ndarray:
        """How many pods of ``vec`` fit together (per row; 0 where not even one)."""
        ...


class KindRoom(Protocol):
    """A rule's per-node room that pods take as counts of kinds, the way requests take resources
    (DRA's devices of a node's own kinds): provisioning packs each kind beside the requests, asking
    every rule with a ``kind_room`` (``registry.KIND_ROOMS``). Kinds are the rule's own keys."""

    def taken(self, state: ClusterState, pod: PodInfo, nodes: Sequence[NodeInfo]) -> Optional[list[dict[int, int]]]:
        """Per node of ``nodes``, what one pod like ``pod`` takes of each kind there (kinds it
        takes none of left out); None when the rule cannot count it exactly (the pod then takes
        nothing of it in provisioning's model, and the validator judges the placement)."""
        ...

    def free(self, state: ClusterState, node: NodeInfo) -> dict[int, int]:
        """The free room of each of ``node``'s own kinds on ``state``."""
        ...


# (pod x) -> None when the rule lets x share a node with any pod, else a predicate: may x and pod y
# never share one node, wherever the rest goes (their host ports collide)? Provisioning keeps such
# pods' classes apart (``registry.apart``); the rule's answer is symmetric.
Apart = Callable[[PodInfo], Optional[Callable[[PodInfo], bool]]]


class PassResult(Protocol):
    """Greedy's result so far in one pass over a window (``greedy.GreedyResult``)."""

    placements: dict[str, int]
    victims: list[Victim]
    nominations: dict[str, int]
    unschedulable: dict[str, str]


@dataclass(frozen=True)
class Gate:
    """A rule's word on one pod at the start of its greedy turn (``GreedyPart.gate``):
    ``blocked``, the pod is not filtered at all (the message); ``within``, the nodes it may take
    in this turn (None: all), and ``outside``, the reason counted for the nodes left out."""

    blocked: Optional[str] = None
    within: Optional[np.ndarray] = None
    outside: str = ""


OPEN = Gate()


class GreedyPart:
    """A rule's part in one greedy pass over a window, beyond its filters (coscheduling's
    PreFilter and Permit; the window guard of topology spread): a plugin's
    ``greedy`` hook makes one per pass, and greedy asks every part, in ``PLUGINS`` order. The
    defaults take no part."""

    def order(self, queue: list[PodInfo]) -> list[PodInfo]:
        """The queue the pass takes (``SchedulingContext.queue``), as this rule sees it in: the
        rule may note where its pods come (a tree's last pod); the order itself is the rules'
        ``QueueSort``, which the preemption replay follows too."""
        return queue

    def gate(self, pod: PodInfo, state: ClusterState, result: PassResult) -> Gate:
        """The pod's turn starts: blocked, or narrowed to some nodes (masks of every part are
        and-ed; the reason of the last part giving one counts the nodes left out)."""
        return OPEN

    def narrow(self, pod: PodInfo, state: ClusterState, feasible: np.ndarray) -> np.ndarray:
        """The feasible nodes the pod is scored on (a preferred topology's domains)."""
        return feasible

    def placed(self, pod: PodInfo, node: int, preempted: bool) -> None:
        """The pod was placed on ``node`` (``preempted``: by its PostFilter, with victims)."""

    def settle(self, pod: PodInfo, state: ClusterState, result: PassResult) -> list[PodInfo]:
        """After the pod's turn: the pods whose preemptions now stand (Permit at a gang's last
        member; what it rolls back it takes out of ``state`` and ``result``)."""
        return []

    def protected(self) -> frozenset[str]:
        """Running pods no later preemptor may evict (a settled gang's running members)."""
        return frozenset()


class WindowPart:
    """A rule's view of one whole window for CP-SAT (the gangs in it), made once per decision
    by a plugin's ``window`` hook; the engine asks every part, keeps them by plugin name, and
    hands that mapping to the prunes (a plugin reads its own part there). The defaults take no
    part."""

    def merge(self, classes: list[C]) -> tuple[list[C], dict[int, int]]:
        """The model's classes: interchangeable groups' classes merged (gang kinds), with the
        alias from each merged-away class id to the id it is counted in."""
        return classes, {}

    def why_blocked(self, pod: PodInfo) -> Optional[str]:
        """Why the pod gets no candidate node at all (a gang refused at the window's start), or None."""
        return None

    def left_out(self, pod: PodInfo, placements: Mapping[str, int], final: ClusterState,
                 feasible_now: bool) -> Optional[str]:
        """The message for a window pod a plan leaves out, when the rule is why (a gang whose
        minResources the plan's final state does not cover, or that fell short of minMember);
        ``feasible_now``: some node passes the filters on ``final``. None: not this rule."""
        return None

    def linked(self, classes: list[ClassView]) -> list[list[int]]:
        """Lists of class ids that must share one model component (gangs whose minResources
        admissions read one another's use of the cluster)."""
        return []

    def encoding(self) -> Optional[object]:
        """The encoding object each component's model starts with for the plugin (its encoders
        fill it in, its decode and hint read it), or None: the encoders make their own."""
        return None


# (pod, nodes) -> the node a trial placement of ``pod`` on the pass's state would take among
# ``nodes`` (greedy's filters and scores, no preemption), or None: none passes.
Trial = Callable[[PodInfo, np.ndarray], Optional[int]]
# (context, state, static filters, trial) -> the rule's part in one greedy pass.
GreedyHook = Callable[[ContextView, ClusterState, StaticView, Trial], GreedyPart]
# kube-scheduler's QueueSort, as a rule reorders the window's queue (coscheduling: a gang's
# members together): pure, so that greedy's pass and the preemption replay that judges every
# plan follow the one queue (``SchedulingContext.queue``).
QueueSort = Callable[[ContextView, list[PodInfo]], list[PodInfo]]


class PostFilterOutcome(Protocol):
    """DefaultPreemption's answer for a pod no node fits: the node and victims, or a message."""

    node: Optional[int]
    victims: list[PodInfo]
    message: Optional[str]


class PostFilter(Protocol):
    """Greedy's PostFilter (DefaultPreemption), for a pod no node fits."""

    def default_preemption(self, pod: PodInfo, cycle: CycleView, state: ClusterState, static: StaticView,
                           ctx: ContextView, *, rng: Optional[random.Random] = None,
                           allowed: Optional[np.ndarray] = None, evicted: Iterable[PodInfo] = (),
                           protected: frozenset[str] = frozenset()) -> PostFilterOutcome:
        """Victims on one node that make room for ``pod`` (or why none)."""
        ...

    REASON_TERMINATING: str  # why a pod waiting for its earlier victims does not preempt again

    def reprieve_level(self, node: int, level: int, state: ClusterState, victims: list, ctx: ContextView) -> list:
        """The victims, less those of priority ``level``'s preemptors on ``node`` that the node still
        holds once the pass is done (greedy's end-of-pass reprieve)."""
        ...

    def replay(self, ctx: ContextView, placements: Mapping[str, int], nodes: Iterable[int], static: StaticView) -> Any:
        """kube-scheduler's preemption replayed on a plan's placements in queue order, turn by turn
        on ``nodes``: who it evicts, for whom (``evicted_by``), and each pod's turn."""
        ...

    def kube_preemptors(self, ctx: ContextView, placements: Mapping[str, int], victims: list,
                        static: StaticView) -> list:
        """The victims, each named for the pod at whose turn the replay evicts it."""
        ...


# --------------------------------------------------------------------------- what a plugin reads


class Coupling(IntEnum):
    """How far a rule ties one pod's placement to other pods' — the one "coupled / not node-local"
    answer every engine asks (``registry.coupling``): the packing hint, node classes, re-packing's
    move order and the live queue's joint decisions. Larger reaches further."""

    NONE = 0  # the rule reads nothing of other pods for this pod
    NODE = 1  # only pods on the same node (host ports, a claim's volume, per-node counts)
    DOMAIN = 2  # pods in the same topology domain, counted through node labels the rule declares
    ACROSS = 3  # pods wherever they are (gangs, inter-pod affinity): no reduction keeps it


# (pod, state or None) -> how far the rule ties the pod to others; ``state`` (when given) lets a
# rule count running pods' terms on the pod (a running pod's anti-affinity that matches it).
CouplingHook = Callable[[PodInfo, Optional[ClusterState]], Coupling]


@dataclass(frozen=True)
class Reads:
    """What a rule reads, declared once (kube-scheduler's ``SignPlugin``/``EnqueueExtensions``):
    the engines derive from these, through the registry, which pods may share a class, which
    label keys matter, and which pods are coupled — never from a list of fields of their own.

    * ``signature``: what the rule reads of a pod beyond the fields every rule shares
      (``PodInfo.scheduling_signature``): pods that differ in it never share a class;
    * ``pod_label_keys``: the pod label keys the pod's own selectors read (kept in signatures);
    * ``node_label_keys``: the node label keys the rule reads for the pod (node classes keep them
      apart); None: it reads the node's name;
    * ``topology_keys``: the node label keys whose domains the rule couples pods through
      (re-packing keeps such a pod's moves together);
    * ``coupling``: how far the rule ties the pod to other pods (``Coupling``).
    """

    signature: Optional[Callable[[PodInfo], Hashable]] = None
    pod_label_keys: Optional[Callable[[PodInfo], Iterable[str]]] = None
    node_label_keys: Optional[Callable[[PodInfo], Optional[Iterable[str]]]] = None
    topology_keys: Optional[Callable[[PodInfo], Iterable[str]]] = None
    coupling: Optional[CouplingHook] = None


NOTHING_READ = Reads()


class BindWrite:
    """What a rule's PreBind writes before a pod is bound: a typed record the rule declares and the
    live scheduler writes, with one writer per kind of record (``adapters/live/prebind.py``), so
    the binder runs every rule's PreBind in ``PLUGINS`` order and names none."""

    __slots__ = ()


@dataclass(frozen=True)
class PodWrite(BindWrite):
    """Annotations and labels a rule sets on the pod itself (sent as one merge patch of the pod's
    metadata)."""

    annotations: Mapping[str, str] = field(default_factory=dict)
    labels: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ClaimVolume:
    """A first-time PersistentVolumeClaim of the pod and what it takes: the volume to reserve for
    it (its claimRef), or None to have it provisioned on the pod's node (the claim's selected
    node)."""

    claim: str  # namespace/name
    volume: Optional[str]
    uid: str  # the claim's uid as the decision saw it ("" when unknown)


@dataclass(frozen=True)
class VolumeWrites(BindWrite):
    """The volumes the pod's first-time claims take (VolumeBinding's PreBind)."""

    claims: tuple[ClaimVolume, ...]


@dataclass(frozen=True)
class ClaimWrites(BindWrite):
    """The pod's ResourceClaims, each allocated and reserved for the pod (DynamicResources'
    PreBind), in order (``models.dra.ClaimUse``)."""

    uses: tuple[ClaimUse, ...]


# (pod as the snapshot holds it, pod as read from the cluster — before any rewrite of the
# snapshot's —, the node object it goes to) -> what the rule writes before the bind, or None.
PodPreBind = Callable[["Pod", "Pod", "Node"], Optional[BindWrite]]
# (the window's plan, its snapshot) -> the rule's PreBind for the pods that plan places: made once
# per plan, so a rule reading the plan (its volumes, its allocations) indexes it once.
PreBind = Callable[["Plan", "ClusterSnapshot"], PodPreBind]


@dataclass(frozen=True)
class PlanPart:
    """What a rule adds to a plan beyond placements, victims and messages (``Plan`` fields)."""

    allocations: tuple[DeviceAllocation, ...] = ()
    volume_bindings: tuple[VolumeBinding, ...] = ()


# (context, placements, victims, the state the engine placed into or None) -> the rule's part of
# the plan (greedy's state carries what its Reserve chose; the model's plans pass None).
PlanOutput = Callable[[ContextView, Mapping[str, int], list[Victim], Optional[ClusterState]], PlanPart]


# --------------------------------------------------------------------------- the plugin object

# (EncodeModel) -> the rule's encoding object, or None: adds the rule's constraints and returns
# what it made of its own (its variables, what its hint and decode read); the engine keeps it by
# plugin name (``WindowModel.encodings``) and decode, hint and stages ask it through the
# protocols above. A plugin whose encoding spans several steps runs them in one encoder.
Encoder = Callable[[EncodeModel], Optional[object]]
# (pod, state, can_evict, window) -> mask of the nodes the pod may ever use in the window, whatever
# the window does; ``can_evict(running pod)``: whether some eviction of the window may remove it;
# ``window``: the window's parts by plugin name (``WindowPart``; empty outside a scheduling window).
Prune = Callable[[PodInfo, ClusterState, Callable[[PodInfo], bool], Mapping[str, WindowPart]], np.ndarray]
Check = Callable[[ReplayView], None]  # reports the rule's violations
# (pod) -> None, or the node names a static filter's PreFilter restricts the pod to and the status
# of every node outside them (with no name at all, the PreFilter fails: its reason is the message).
NodeNames = Callable[[PodInfo], Optional[tuple[set[str], Status]]]
# (pod x) -> None when the rule ties x's placement to no other pod's, else a predicate: does it
# tie x to pod y wherever the two land (a term of x counts y, one gang holds both)?
Couples = Callable[[PodInfo], Optional[Callable[[PodInfo], bool]]]
# (pod, state, static filters, Kubernetes version) -> the filter's PreFilter for one cycle, or None
# when it passes on every node for this pod.
CycleHook = Callable[[PodInfo, ClusterState, StaticView, str], Optional[CycleFilter]]
# (pod, node) -> the static PreFilters' and Filters' verdict (the first failure; NodeName,
# NodeAffinity, TaintToleration, NodeUnschedulable): offered to the plugins by the engine, so no
# plugin imports the static ones to ask them.
StaticVerdict = Callable[[PodInfo, NodeInfo], Status]
# (snapshot, config, window, state, static verdicts) -> None: the rule's part in building a
# context, before the window's pods are grouped into classes: what it attaches to the state for
# the snapshot (DRA's devices, the volume catalog) and the marks it sets on window pods (part of
# their signature).
Prepare = Callable[["ClusterSnapshot", "SchedulerConfig", list[PodInfo], ClusterState, StaticVerdict], None]
# (snapshot, config, window, state) -> the room pods outside the window keep (``Nominations``).
NominationsHook = Callable[["ClusterSnapshot", "SchedulerConfig", list[PodInfo], ClusterState], Nominations]


class LocalKernel(Protocol):
    """A node-local score plugin's weighted score of one pod class over any nodes, from the
    nodes' own state: the score cache keeps its values over every node per class and refreshes
    the nodes placements touch (``one`` for a few, in Python arithmetic, when ``scalar``).
    ``rows``: the nodes' requested amounts (``plugins.shared.requested.requested_rows``),
    gathered once for every kernel of the class when one of them ``reads_rows`` (None
    otherwise: a kernel that reads them gathers its own)."""

    scalar: bool
    reads_rows: bool

    def __call__(self, nodes: np.ndarray, rows: Optional[np.ndarray] = None) -> np.ndarray: ...

    def one(self, node: int) -> int: ...


class ScoreCachePart(Protocol):
    """A score plugin's part in greedy's score cache (``scoring/cache.py``), whose totals must
    equal ``score_nodes``' bit for bit: ``local`` gives a node-local kernel per pod class (None:
    not node-local, or nothing to add for the pod), else ``totals`` the weighted scores of one
    pod over ``nodes`` (None: nothing to add)."""

    def local(self, pod: PodInfo, alloc_rows: list[list[int]]) -> Optional[LocalKernel]: ...

    def totals(self, pod: PodInfo, nodes: np.ndarray) -> Optional[np.ndarray | int]: ...


class CacheTuning(Protocol):
    """The score cache's tuning a part reads (``scoring.cache.ScoreCache``)."""

    recount_after: int  # per-class tables are counted afresh after this many changes to their counter


# (state, score context, weight, the cache: its tuning) -> the plugin's part in one score cache.
ScoreCacheHook = Callable[[ClusterState, ScoreView, int, CacheTuning], ScoreCachePart]


# (pod, nodes, state, score context, class size) -> the weighted score one more pod of the class
# takes from each further one on each node (an array, or one number for every node), or None.
Crowding = Callable[[PodInfo, np.ndarray, ClusterState, ScoreView, int], Optional[np.ndarray | float]]


class FilterModule(Protocol):
    """A rule's Filter module (``<plugin>/filter.py``, or its ``rules.py``): its ``NAME``."""

    NAME: str


class StaticFilter(Protocol):
    """A static rule's Filter module: ``filter(pod, node)`` reads only the two (``Plugin.static``)."""

    NAME: str

    @property
    def filter(self) -> Callable[[PodInfo, NodeInfo], Status]: ...


class ScoreModule(Protocol):
    """A rule's Score module (``<plugin>/score.py``): its ``NAME`` keys the weight, ``score``
    gives the weighted-to-be scores of a pod over nodes (None: nothing to add)."""

    NAME: str

    @property
    def score(self) -> Callable[..., Optional[np.ndarray]]: ...


@dataclass(frozen=True)
class Plugin:
    """What one plugin package implements, named once (``<plugin>/__init__.py``: ``PLUGIN``).

    * ``filter``: the module whose ``filter`` is the rule's Filter (``static``: it reads only pod
      and node, so it prunes variables and needs no encoding);
    * ``score``: the module whose ``score`` is the rule's Score (its ``NAME`` keys the weight);
    * ``cycle``: a dynamic filter's PreFilter and Filter for greedy's cycle (``CycleHook``);
      greedy, preemption and the messages run every plugin's hook, in ``PLUGINS`` order;
    * ``node_names``: a static filter's PreFilterResult, the nodes it restricts a pod to by name
      (``NodeNames``);
    * ``prune``: nodes the rule rules out before any variable exists (``Prune``);
    * ``encode``: the rule as CP-SAT constraints on the window model, for scheduling and
      re-packing; ``window_encode``: window-wide parts only a scheduling window has;
    * ``couples``: which pods the rule ties together wherever they land (``Couples``): CP-SAT
      solves pods no rule ties (nor shared nodes, nor evictions) as separate components;
    * ``checks``: the validator's final-state checks of the rule;
    * ``prepare``: the rule's part in building a context from a snapshot (``Prepare``), run by
      ``context.build_context`` for every plugin in ``PLUGINS`` order;
    * ``nominations``: the room pods outside the window are nominated to (``NominationsHook``;
      one plugin at most gives it, DefaultPreemption);
    * ``greedy``: the rule's part in greedy's pass beyond its filter (``GreedyHook``:
      coscheduling's PreFilter and Permit, topology spread's window guard);
    * ``queue_sort``: how the rule reorders the window's queue (``QueueSort``, kube-scheduler's
      QueueSort point: coscheduling's and a CompositePodGroup's members together), applied in
      ``PLUGINS`` order over the window's priority order (``SchedulingContext.queue``);
    * ``packing``: the rule's state the packing hint counts exactly (``PackingBook``, made per
      window model): a class it counts is packed even though the rule keeps per-node state;
    * ``may_preempt``: whether a preemptor may evict a victim at all (DefaultPreemption's
      eligibility; the model's evictions and the decode of their preemptors ask every hook);
    * ``plan_rank``: the rule's levels in the comparison of two plans' values (placements,
      victims), after the evictions' (``cpsat/choose.plan_value``; larger is better): how far
      down their ``firstAvailable`` lists device claims go, preferred-topology gangs' spans;
    * ``plan_output``: what the rule adds to a plan beyond where pods go (``PlanOutput``:
      DynamicResources' claim allocations, VolumeBinding's volume bindings);
    * ``hand_out``: which pod of a class takes which of the places the model gives it
      (``HandOut``: topology spread hands them so each pod's turn keeps its skew; one plugin at
      most gives it);
    * ``score_cache``: the score's part in greedy's score cache (``ScoreCacheHook``: the same
      totals as ``score``, faster; a score plugin without it is asked for its ``score``);
    * ``crowding``: the score's drop per further pod of a class on a node, for the CP-SAT
      objective's crowding term (``Crowding``; ``scoring/crowding.py`` sums the plugins');
    * ``repack_keep``: for re-packing, given where pods are (pod key -> node), the nodes a
      moving pod may go to, or None (a gang with required topology keeps its domain);
    * ``window``: the rule's view of a whole window for CP-SAT (``WindowPart``: gang kinds);
    * ``postfilter``: greedy's PostFilter (``PostFilter``; one plugin at most, DefaultPreemption);
    * ``capacity``: the rule counts requests against a node's room (``Capacity``);
    * ``kind_room``: the rule's per-node room counted in kinds, for provisioning (``KindRoom``:
      DRA's devices);
    * ``apart``: pods the rule never lets share a node, for provisioning (``Apart``: host ports);
    * ``reads``: what the rule reads of pods and nodes and how far it couples pods (``Reads``);
    * ``prebind``: what the rule writes before the live binder binds a pod (``PreBind``, giving
      a ``BindWrite`` record: a ``PodWrite``, VolumeBinding's ``VolumeWrites``, DynamicResources'
      ``ClaimWrites``);
    * ``state``: the rule's own bookkeeping on each new state (``BookMaker`` -> ``PluginState``,
      held in ``ClusterState.books`` under the plugin's name: Reserve/Unreserve, copy, merge);
    * ``per_node_state``: the rule keeps state per node beyond requests and labels (volumes
      mounted, devices held): nodes alike in every other way are not interchangeable for it, so
      the node-class and symmetry reductions and the packing hint leave windows using it alone.
    """

    name: str
    filter: Optional[FilterModule] = None
    static: bool = False
    score: Optional[ScoreModule] = None
    cycle: Optional[CycleHook] = None
    node_names: Optional[NodeNames] = None
    prune: Optional[Prune] = None
    encode: tuple[Encoder, ...] = ()
    window_encode: tuple[Encoder, ...] = ()
    checks: tuple[Check, ...] = ()
    couples: Optional[Couples] = None
    per_node_state: Optional[Callable[[PodInfo], bool]] = None
    prepare: Optional[Prepare] = None
    capacity: Optional[Capacity] = None
    kind_room: Optional[KindRoom] = None
    apart: Optional[Apart] = None
    greedy: Optional[GreedyHook] = None
    queue_sort: Optional[QueueSort] = None
    postfilter: Optional[PostFilter] = None
    window: Optional[Callable[[ContextView], WindowPart]] = None
    packing: Optional[Callable[[EncodeModel], PackingBook]] = None
    may_preempt: Optional[Callable[[PodInfo, PodInfo], bool]] = None
    plan_rank: Optional[Callable[[ContextView, dict[str, int], list[Victim]], tuple]] = None
    plan_output: Optional[PlanOutput] = None
    crowding: Optional[Crowding] = None
    score_cache: Optional[ScoreCacheHook] = None
    repack_keep: Optional[Callable[[ContextView, Mapping[str, int]], Callable[[PodInfo], Optional[np.ndarray]]]] = None
    nominations: Optional[NominationsHook] = None
    reads: Reads = NOTHING_READ
    prebind: Optional[PreBind] = None
    state: Optional[BookMaker] = None
    hand_out: Optional[HandOut] = None
