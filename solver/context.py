"""From a ``ClusterSnapshot`` to what every engine works on: node and pod infos, the cluster
state with bound pods assumed, the window of pending pods in queue order, and its equivalence
classes.
"""

from __future__ import annotations

import operator
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Optional


from models.config import SchedulerConfig, version_at_least
from models.objects import Pod, PodGroup
from models.resources import is_tracked_resource
from models.snapshot import POD_GROUP_LABEL, ClusterSnapshot, holds_node

from . import interrupt
from .info import NodeInfo, NodeList, PodInfo, SpecMemo, node_derived, queue_order_key
from .memory import SolverMemory
from .plugin_api import NO_NOMINATIONS, Nominations
from .plugins import registry
from .state import ClusterState


@dataclass(eq=False)
class PodClass:
    """Pending pods that are interchangeable for every rule: one set of solver variables."""

    id: int
    pods: list[PodInfo]

    @property
    def rep(self) -> PodInfo:
        return self.pods[0]

    @property
    def size(self) -> int:
        return len(self.pods)


@dataclass(eq=False)
class SchedulingContext:
    snapshot: ClusterSnapshot
    config: SchedulerConfig
    nodes: list[NodeInfo]
    state: ClusterState
    window: list[PodInfo]  # pending pods in queue order
    classes: list[PodClass]
    bound: list[PodInfo]  # pods holding nodes, in the snapshot's order
    relevant_labels: frozenset[str]
    pod_groups: dict[str, PodGroup]
    image_nodes: dict[str, tuple[int, int]] = field(default_factory=dict)  # image -> (size, numNodes)
    notes: list[str] = field(default_factory=list)
    # The pods the decision was restricted to (``build_context``'s ``window_keys``), None: all.
    window_keys: Optional[frozenset[str]] = None
    # Whether the window takes every pending pod whatever its schedulerName (``build_context``).
    all_pending: bool = False
    # ``bound`` by key (built from it when not given).
    bound_by_key: dict[str, PodInfo] = field(default_factory=dict)
    # The room pending pods outside the window are nominated to (the ``nominations`` hook's).
    claims: Nominations = NO_NOMINATIONS
    # Pods of the same decision placed outside this model (a large-neighbourhood round's fixed
    # remainder, ``cpsat/lns``), with their nodes: in the state as running pods, yet still the
    # plan's placements, which the rules that judge a plan's pods as a group must count as such.
    settled: tuple[tuple[PodInfo, int], ...] = ()
    # ``queue()``'s answer, with the window it was worked out for (never copied by ``replace``).
    _queue: Optional[tuple[list[PodInfo], list[PodInfo]]] = field(default=None, init=False, repr=False)
    # ``turns()``'s answer, with the queue it was read from.
    _turns: Optional[tuple[list[PodInfo], dict[str, int]]] = field(default=None, init=False, repr=False)

    @property
    def num_nodes(self) -> int:
        return len(self.nodes)

    def pod(self, key: str) -> Optional[PodInfo]:
        hit = self._window_by_key.get(key)
        return hit if hit is not None else self.bound_by_key.get(key)

    def window_pod(self, key: str) -> PodInfo:
        """The window pod ``key`` (a KeyError when it is not one)."""
        return self._window_by_key[key]

    def queue(self) -> list[PodInfo]:
        """The window in kube-scheduler's queue order: ``window`` (PrioritySort) as each rule's
        QueueSort reorders it, in ``PLUGINS`` order (a gang's members together). Greedy's pass and
        the preemption replay that judges every plan both follow it. Worked out once per window."""
        hit = self._queue
        if hit is None or hit[0] is not self.window:
            queue = list(self.window)
            for sort in registry.QUEUE_SORTS:
                queue = sort(self, queue)
            hit = (self.window, queue)
            self._queue = hit
        return hit[1]

    def turns(self) -> dict[str, int]:
        """Each window pod's turn in ``queue()`` (its index), worked out once per queue."""
        queue = self.queue()
        hit = self._turns
        if hit is None or hit[0] is not queue:
            hit = (queue, {p.key: i for i, p in enumerate(queue)})
            self._turns = hit
        return hit[1]

    def __post_init__(self) -> None:
        self._window_by_key = {p.key: p for p in self.window}
        if len(self.bound_by_key) != len(self.bound):
            self.bound_by_key = {p.key: p for p in self.bound}


def selector_keys(info: PodInfo) -> set[str]:
    """The pod label keys the pod's own selectors look at, as the rules declare them
    (``Reads.pod_label_keys``: pod (anti-)affinity, spread)."""
    return registry.pod_label_keys(info)


def _terms_of(info: PodInfo) -> tuple[int, ...]:
    """The identity of the terms ``selector_keys`` reads: pods of one shape share them (a key
    is valid while the terms it names are alive)."""
    return (id(info.affinity), id(info.anti_affinity), id(info.preferred_affinity),
            id(info.preferred_anti_affinity), id(info.spread))


def relevant_label_keys(snapshot: ClusterSnapshot, infos: Iterable[PodInfo], counted: Iterable[str] = ()) -> frozenset[str]:
    """Every pod label key some selector in the snapshot can look at: those of ``infos``, of
    the PodDisruptionBudgets, and ``counted`` (keys already gathered from other pods)."""
    keys: set[str] = {POD_GROUP_LABEL, *counted}
    # The terms asked already (a window's replicas share theirs), each with a pod holding them:
    # held, the ids in the keys stay theirs even when ``infos`` makes its items on the fly.
    seen: dict[tuple[int, ...], PodInfo] = {}
    for info in infos:
        terms = _terms_of(info)
        if terms not in seen:
            seen[terms] = info
            keys |= selector_keys(info)
    for pdb in snapshot.pdbs:
        sel = pdb.spec.selector
        if sel is not None:
            keys |= set(sel.match_labels) | {r.key for r in sel.match_expressions}
    return frozenset(keys)


def window_pods(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    all_pending: bool = False,
    window_keys: Optional[list[str]] = None,
) -> list[Pod]:
    """The pending pods one decision places: ours (or all with ``all_pending``), and only
    those named in ``window_keys`` when it is given."""
    if window_keys is None:
        return snapshot.pending_pods(config.scheduler_name, all_pending=all_pending)
    return snapshot.pending_among(window_keys, config.scheduler_name, all_pending=all_pending)


@dataclass(eq=False)
class _Assumed:
    """The bound pods of one snapshot assumed on its nodes: the costly part of a context (every
    bound pod added to a fresh state), kept for the next context."""

    snapshot: ClusterSnapshot  # held, so its id() is not reused while this lives
    sidecar_ports: bool
    ns_labels: dict[str, dict[str, str]]
    resources: frozenset[str]  # the state's columns: ``node_resources`` and every request's
    node_resources: frozenset[str]
    nodes: NodeList
    state: ClusterState  # never handed out: each context gets a copy
    placed: dict[str, PodInfo]  # every pod in ``state``, by key, in the snapshot's order
    unknown: dict[str, str]  # bound pods on nodes the snapshot does not have: key -> node name
    label_keys: Counter[str]  # selector keys of the pods in ``placed``, a count per pod
    requested: Counter[str]  # resource names the pods in ``placed`` request, a count per pod
    # ``placed``'s values, made for the first context that asks. Contexts hold ``placed`` and
    # this list themselves, not copies: neither changes once a context has it (an update
    # starts from a copy of ``placed``, ``_bring_up_to_date``).
    bound: Optional[list[PodInfo]] = None

    def bound_list(self) -> list[PodInfo]:
        if self.bound is None:
            self.bound = list(self.placed.values())
        return self.bound

    def place(self, info: PodInfo) -> None:
        self.placed[info.key] = info
        self.label_keys.update(selector_keys(info))
        self.requested.update(info.requests.keys())  # a name once per pod (a mapping would add the amounts)

    def place_many(self, infos: list[PodInfo]) -> None:
        """``place`` for each, counting keys and names once per shared requests and terms."""
        requests: dict[int, list] = {}
        terms: dict[tuple[int, ...], list] = {}
        for info in infos:
            self.placed[info.key] = info
            entry = requests.get(id(info.requests))
            if entry is None:
                requests[id(info.requests)] = [info, 1]
            else:
                entry[1] += 1
            entry = terms.get(key := _terms_of(info))
            if entry is None:
                terms[key] = [info, 1]
            else:
                entry[1] += 1
        for info, count in terms.values():
            for name in selector_keys(info):
                self.label_keys[name] += count
        for info, count in requests.values():
            for name in info.requests:
                self.requested[name] += count

    def unplace(self, info: PodInfo) -> None:
        del self.placed[info.key]
        for counter, names in ((self.label_keys, selector_keys(info)), (self.requested, info.requests)):
            for name in names:
                counter[name] -= 1
                if not counter[name]:
                    del counter[name]


# The last snapshot's assumed bound pods are kept in the caller's ``SolverMemory``. The live
# scheduler builds a context for each window's snapshot, and a second for the validator's replay
# of the plan. The second takes a copy of the first's state instead of adding every bound pod
# again; the next window's snapshot is brought up to date from the last: when it says which pods
# changed (``ClusterSnapshot.delta``, as the live cache does) by those alone, else by comparing
# every bound pod's object with the last one's (``_update``). Anything else changed (a node,
# namespace labels, a resource name, much of the cluster) builds afresh.
# tests/solver/test_context_memo.py holds all three to reading the same.
# Above this share of the bound pods changed, a fresh build is as cheap as an update.
REBUILD_SHARE = 4


def _assume_bound(snapshot: ClusterSnapshot, sidecar_ports: bool, window: list[PodInfo], last: Optional[_Assumed],
                  specs: SpecMemo) -> _Assumed:
    """A state with every bound pod of ``snapshot`` on its node, over the resources of the nodes,
    the bound pods and the ``window``: ``last`` brought up to date where it can be."""
    ns_labels = snapshot.namespace_labels
    if last is None or last.sidecar_ports != sidecar_ports or last.ns_labels != ns_labels:
        return _fresh(snapshot, sidecar_ports, window, {}, specs)
    if len(last.nodes) == len(snapshot.nodes) and (last.snapshot.nodes is snapshot.nodes or all(map(operator.is_, last.snapshot.nodes, snapshot.nodes))):
        delta = snapshot.delta
        if delta is not None and delta.base() is last.snapshot:
            updated = _apply_delta(last, snapshot, delta.pods, specs)
        else:
            updated = _update(last, snapshot, specs)
        if updated is not None and updated.resources == _resources_of(updated, window):
            return updated
    # An update given up may have changed ``last.placed``: what it holds is still an info per key
    # (made from the pod object it names), for a fresh build to take where that object is current.
    return _fresh(snapshot, sidecar_ports, window, last.placed, specs)


def _resources_of(assumed: _Assumed, window: list[PodInfo]) -> frozenset[str]:
    """The columns a fresh state would have for these bound pods and ``window``."""
    names = set(assumed.node_resources) | assumed.requested.keys()
    for info in window:
        names.update(info.requests)
    return frozenset(names)


def _fresh(snapshot: ClusterSnapshot, sidecar_ports: bool, window: list[PodInfo], reuse: dict[str, PodInfo],
           specs: SpecMemo) -> _Assumed:
    """Every bound pod added to a new state. ``reuse``: infos made before (same namespace labels
    and version), by pod key: one made from the very same pod object is taken as it is."""
    ns_labels = snapshot.namespace_labels
    infos = [
        info if (info := reuse.get(p.key)) is not None and info.pod is p
        else PodInfo.of(p, ns_labels.get(p.metadata.namespace, {}), sidecar_ports=sidecar_ports, specs=specs)
        for p in interrupt.checked(snapshot.bound_pods())
    ]
    nodes = NodeList(NodeInfo.of(i, n) for i, n in enumerate(interrupt.checked(snapshot.nodes)))
    node_resources = frozenset(r for node in nodes for r in node.allocatable if is_tracked_resource(r))
    resources = set(node_resources)
    for requests in {id(info.requests): info.requests for info in (*infos, *window)}.values():
        resources.update(requests)
    state = ClusterState(nodes, resources)
    assumed = _Assumed(snapshot, sidecar_ports, ns_labels, frozenset(resources), node_resources, nodes, state,
                       placed={}, unknown={}, label_keys=Counter(), requested=Counter())
    # The running pods enter the state as per-node aggregates (``ClusterState.add_many``), and
    # the counts of their selector keys and resource names per shared terms and requests.
    on_nodes: list[tuple[PodInfo, int]] = []
    for info in interrupt.checked(infos):
        index = state.node_index.get(info.node_name)
        if index is None:
            assumed.unknown[info.key] = info.node_name
            continue
        on_nodes.append((info, index))
    # Each a pass over every bound pod without a look for Ctrl-C inside (half a second at 5,000
    # nodes): looked for between them.
    interrupt.check()
    state.add_many(on_nodes)
    interrupt.check()
    assumed.place_many([info for info, _ in on_nodes])
    interrupt.check()
    return assumed


def _update(last: _Assumed, snapshot: ClusterSnapshot, specs: SpecMemo) -> Optional[_Assumed]:
    """``last`` brought up to ``snapshot`` by comparing every bound pod with the one it had."""
    ns_labels = snapshot.namespace_labels
    current = {p.key: p for p in snapshot.bound_pods()}
    changed = [key for key, p in current.items() if (info := last.placed.get(key)) is None or info.pod is not p]
    changed += [key for key in (*last.placed, *last.unknown) if key not in current]
    updated = _bring_up_to_date(last, snapshot, changed, lambda key: current.get(key), ns_labels, specs)
    if updated is None:
        return None
    updated.state.keep_vectors_of(updated.placed)  # window pods of earlier contexts are not known here
    position = snapshot.pod_position
    keys = list(updated.placed)
    if any(position[a] > position[b] for a, b in zip(keys, keys[1:])):
        updated.placed = {key: updated.placed[key] for key in sorted(keys, key=position.__getitem__)}
    _order_pods_on(updated.state, range(len(updated.nodes)), position)
    return updated


def _apply_delta(last: _Assumed, snapshot: ClusterSnapshot, keys: frozenset[str], specs: SpecMemo) -> Optional[_Assumed]:
    """``last`` brought up to ``snapshot`` from the keys of the pods that changed since alone."""
    position, pods = snapshot.positions, snapshot.pods

    def bound(key: str) -> Optional[Pod]:
        index = position.get(key)
        return pods[index] if index is not None and holds_node(pods[index]) else None

    updated = _bring_up_to_date(last, snapshot, sorted(keys, key=lambda k: position.get(k, -1)), bound,
                                snapshot.namespace_labels, specs)
    if updated is not None:
        # Earlier contexts cached their window pods' vectors in the state's dict (shared with
        # their copies): each such pod is among these keys, so this leaves no pod gone since.
        updated.state.forget_vectors(key for key in keys if key not in updated.placed)
    return updated


def _bring_up_to_date(last: _Assumed, snapshot: ClusterSnapshot, changed: list[str],
                      current: Callable[[str], Optional[Pod]], ns_labels: dict[str, dict[str, str]],
                      specs: SpecMemo) -> Optional[_Assumed]:
    """``last`` with the pods named in ``changed`` (in the snapshot's order) taken out and put
    back as ``current`` has them now (None: not bound), or None when so much changed that a
    fresh build costs no more. ``last`` is given up either way."""
    if len(changed) * REBUILD_SHARE > max(len(last.placed), 1) and len(changed) > 64:
        return None
    last.placed = last.placed.copy()  # the old one stays as the contexts built from it have it
    state, node_index, sidecar_ports = last.state, last.state.node_index, last.sidecar_ports
    gone: list[PodInfo] = []
    new: list[PodInfo] = []
    for key in changed:
        pod = current(key)
        old = last.placed.get(key)
        last.unknown.pop(key, None)
        if old is not None and old.pod is pod:
            continue
        if old is not None:
            gone.append(old)
        if pod is None:
            continue
        if pod.spec.node_name not in node_index:
            last.unknown[key] = pod.spec.node_name
            continue
        info = PodInfo.of(pod, ns_labels.get(pod.metadata.namespace, {}), sidecar_ports=sidecar_ports, specs=specs)
        if not last.resources.issuperset(info.requests):
            return None  # a resource the state has no column for
        new.append(info)
    for info in gone:
        state.remove(info)  # with the vector of its own requests (``ClusterState.vector``)
        last.unplace(info)
    tail = next(reversed(last.placed), None)  # the last pod kept: every new one comes after it
    position = snapshot.positions
    touched = set()
    for info in new:
        index = node_index[info.node_name]
        state.add(info, index)
        last.place(info)
        touched.add(index)
    if new and tail is not None and position[tail] > position[new[0].key]:
        last.placed = {key: last.placed[key] for key in sorted(last.placed, key=position.__getitem__)}
    _order_pods_on(state, touched, position)
    return _Assumed(snapshot, sidecar_ports, last.ns_labels, last.resources, last.node_resources, last.nodes, state,
                    last.placed, last.unknown, last.label_keys, last.requested)


def _image_nodes(nodes: list[NodeInfo]) -> dict[str, tuple[int, int]]:
    """Each image's size (as the first node reporting it gives it) and how many nodes have it."""
    entries: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for node in nodes:
        for name, size in node.images.items():
            entry = entries[name]
            if entry[1] == 0:
                entry[0] = size
            entry[1] += 1
    return {k: (v[0], v[1]) for k, v in entries.items()}


def _order_pods_on(state: ClusterState, nodes: Iterable[int], position: Mapping[str, int]) -> None:
    """Each of these nodes' pods in the snapshot's order, as a fresh build adds them
    (preemption breaks ties between equally important victims by it)."""
    for n in nodes:
        keys = list(state.pods_on[n])
        if any(position[a] > position[b] for a, b in zip(keys, keys[1:])):
            on = state.pods_on[n]
            state.pods_on[n] = {k: on[k] for k in sorted(keys, key=position.__getitem__)}


def build_context(
    snapshot: ClusterSnapshot,
    config: SchedulerConfig,
    *,
    all_pending: bool = False,
    window_keys: Optional[list[str]] = None,
    memory: Optional[SolverMemory] = None,
) -> SchedulingContext:
    """Parse once into infos; assume bound pods; order and group the pending window.

    ``window_keys`` restricts the window to those pending pods (the live scheduler's queue).
    ``memory``: what the caller keeps between decisions, brought up to date here (None: this
    context alone, nothing kept). The configured limits are the callers' to check first
    (``solver/limits.py``).
    """
    memory = memory if memory is not None else SolverMemory()
    sidecar_ports = version_at_least(config.kubernetes_version, "1.34")
    ns_labels = snapshot.namespace_labels
    pending_pods = window_pods(snapshot, config, all_pending=all_pending, window_keys=window_keys)
    window = memory.specs.infos(interrupt.checked(pending_pods), ns_labels, sidecar_ports)
    window.sort(key=queue_order_key)

    with memory.lock:
        assumed = memory.assumed
        same = assumed is not None and assumed.snapshot is snapshot and assumed.sidecar_ports == sidecar_ports
        if assumed is None or not same or not all(r in assumed.resources for info in window for r in info.requests):
            memory.assumed = None  # given up before it is changed: a failure below leaves no half-updated state
            assumed = _assume_bound(snapshot, sidecar_ports, window, assumed, memory.specs)
            memory.assumed = assumed
        memory.contexts_built += 1
        nodes, bound_by_key, unknown_nodes = assumed.nodes, assumed.placed, set(assumed.unknown.values())
        bound = assumed.bound_list()
        label_keys = list(assumed.label_keys)
        # Nothing reads the kept state's records of changed nodes and counter changes (a copy
        # starts its own, and the caches that read them live on copies); kept, they would grow by
        # a node or two per window for as long as a live scheduler runs.
        assumed.state.forget_touched()
        assumed.state.forget_changes()
        state = assumed.state.copy()
    interrupt.check()
    # Each rule's part: DRA's devices and the volume catalog on the state, the marks on window
    # pods that are part of their signature (a pod waiting for its victims may not preempt).
    for prepare in registry.PREPARES:
        prepare(snapshot, config, window, state, registry.static_verdict)

    notes: list[str] = []
    if unknown_nodes:
        notes.append(
            f"{len(unknown_nodes)} node(s) named by bound pods are not in the snapshot; their pods are ignored: "
            + ", ".join(sorted(unknown_nodes)[:5])
        )

    nominations = registry.NOMINATIONS
    claims = nominations(snapshot, config, window, state) if nominations is not None else NO_NOMINATIONS
    interrupt.check()

    relevant = relevant_label_keys(snapshot, window, label_keys)
    by_signature: dict[tuple, PodClass] = {}
    classes: list[PodClass] = []
    for info in interrupt.checked(window):
        info.declared = registry.signature(info)
        sig = info.scheduling_signature(relevant)
        cls = by_signature.get(sig)
        if cls is None:
            cls = by_signature[sig] = PodClass(len(classes), [])
            classes.append(cls)
        info.class_id = cls.id
        cls.pods.append(info)

    return SchedulingContext(
        snapshot=snapshot,
        config=config,
        nodes=nodes,
        state=state,
        window=window,
        classes=classes,
        bound=bound,
        bound_by_key=bound_by_key,
        relevant_labels=relevant,
        pod_groups=dict(snapshot.pod_group_by_key),
        image_nodes=node_derived(nodes, "image summary", lambda: _image_nodes(nodes)),
        notes=notes,
        window_keys=frozenset(window_keys) if window_keys is not None else None,
        all_pending=all_pending,
        claims=claims,
    )
