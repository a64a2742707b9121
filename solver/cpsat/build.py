"""Building one component's model: candidate nodes per class (``candidates``), then every rule's
encoding, evictions, the placement level and kube-scheduler's scores (``build_component``).

What every component of a window shares travels as one ``BuildInput``."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .. import interrupt
from ..context import PodClass, SchedulingContext
from ..filtering import StaticFilters
from ..plugin_api import WindowPart
from ..plugins import registry
from ..scoring import crowding, score_nodes
from . import eviction
from .model import Level, WindowModel
from .symmetry import break_symmetry


@dataclass(frozen=True)
class BuildInput:
    """What the components of one window share when their models are built.

    ``cand``/``ubs``: candidate nodes and upper bounds per class (``candidates``); ``sctx``: the
    score context; ``weights``: the placement weight per priority tier (``choose.tier_weights``);
    ``window``: the rules' views of the whole window by plugin name (``plugin_api.WindowPart``);
    ``alias``: the context classes they merged into others (gang kinds)."""

    ctx: SchedulingContext
    static: StaticFilters
    cand: Mapping[int, np.ndarray]
    ubs: Mapping[int, Any]
    sctx: Any
    weights: Mapping[int, int]
    allow_preemption: bool
    window: Mapping[str, WindowPart] = field(default_factory=dict)
    alias: Mapping[int, int] = field(default_factory=dict)


def build_component(inp: BuildInput, classes) -> WindowModel:
    """One component's model, over ``classes``."""
    ctx = inp.ctx
    wm = WindowModel(ctx, classes, inp.static, allow_preemption=inp.allow_preemption)
    wm.alias = inp.alias  # type: ignore[assignment]
    for cls in classes:
        wm.cand[cls.id], wm.ub[cls.id] = inp.cand[cls.id], inp.ubs[cls.id]
    wm.create_variables()
    eviction.create(wm)
    wm.window = inp.window
    encode_rules(wm, registry.WINDOW_ENCODINGS)
    interrupt.check()
    eviction.encode_costs(wm, ctx)
    placement = wm.level("placement")
    for cls in classes:
        if not isinstance(wm.placed[cls.id], int):
            placement.add(wm.placed[cls.id], inp.weights[cls.rep.priority], 0, cls.size)
    _encode_scores(wm, ctx, inp.sctx)
    interrupt.check()
    break_symmetry(wm, enabled=ctx.config.solver.break_symmetry)
    return wm


def encode_rules(wm: WindowModel, encoders) -> None:
    """Run the rules' encoders (``(plugin name, encoder)``, in build order) and keep the encoding
    object each returns under its plugin's name (one per plugin)."""
    for name, encode in encoders:
        interrupt.check()
        made = encode(wm)
        if made is not None:
            assert wm.encodings.get(name, made) is made, f"{name}: one encoding object per plugin"
            wm.encodings[name] = made


def _encode_scores(wm: WindowModel, ctx: SchedulingContext, sctx) -> None:
    """Soft scores: kube-scheduler's weighted plugin total for each class on each candidate node,
    computed against the state before the window (the window's own effect on scores is not
    modelled). The packing profile first minimises the nodes that become active."""
    score = wm.level("score")
    if ctx.config.profile == "packing":
        active = Level("active_nodes")
        for n, on_node in wm.by_node.items():
            if wm.state.pods_on[n]:
                continue  # already active
            on = wm.model.new_bool_var(f"active[{n}]")
            for cls, var in on_node:
                wm.model.add(var <= wm.ub_of(cls.id, n) * on)
            active.add(on, -1, 0, 1)
        wm.levels.insert(wm.levels.index(score), active)
    if not any(ctx.config.scoring.weights.values()):
        return
    spreading = ctx.config.profile != "packing"
    for cls in interrupt.checked(wm.classes, every=4):
        entries = wm.by_class.get(cls.id)
        if not entries:
            continue
        nodes = np.array([n for n, _ in entries], dtype=np.int64)
        totals = score_nodes(cls.rep, nodes, wm.state, sctx) if len(nodes) > 1 else np.zeros(1, dtype=np.int64)
        for (n, var), s in zip(entries, totals.tolist()):
            score.add(var, crowding.SCALE * int(s), 0, wm.ub_of(cls.id, n))
        if spreading and len(nodes) > 1:
            _encode_crowding(wm, cls, entries, crowding.drop_per_pod(cls.rep, nodes, wm.state, sctx, class_size=cls.size))


def _encode_crowding(wm: WindowModel, cls: PodClass, entries, drops: np.ndarray) -> None:
    """Each further pod of a class on a node scores ``drop`` less than the one before it
    (``scores.crowding``): ``crowd[c, n] ≥ drop·k(k−1)/2`` for ``k = x[c, n]``, as tangents at
    integer points, subtracted from the score level."""
    score = wm.level("score")
    for (n, var), drop in zip(entries, drops.tolist()):
        ub = wm.ub_of(cls.id, n)
        if drop <= 0 or ub < 2:
            continue
        top = drop * ub * (ub - 1) // 2
        # crowd[c, n]: the score the class's pods on node n lose to each other.
        crowd = wm.model.new_int_var(0, top, f"crowd[{cls.id},{n}]")
        for j in crowding.tangent_points(ub):
            wm.model.add(crowd >= drop * j * var - drop * j * (j + 1) // 2)
        score.add(crowd, -1, 0, top)



def candidates(ctx, classes, static, window, allow_preemption, within=None):
    """Candidate nodes and upper bounds per class (shared by every component); ``window``: the
    rules' window parts by plugin name (empty outside a scheduling window); ``within``: a node
    mask the candidates are confined to (a large-neighbourhood round's nodes)."""
    state = ctx.state
    probe = WindowModel(ctx, classes, static, allow_preemption=allow_preemption)

    def extra_prune(cls: PodClass, can_preempt: bool, others=frozenset()) -> np.ndarray:
        """``others``: running pods another class's preemption may evict (their rules may go)."""
        rep = cls.rep
        if any(part.why_blocked(rep) for part in window.values()):
            return np.zeros(len(state.nodes), dtype=bool)

        def can_evict(other) -> bool:
            return (can_preempt and eviction.can_evict(rep, other, allow_preemption)) or other.key in others

        mask = np.ones(len(state.nodes), dtype=bool)
        for prune in registry.PRUNES:
            mask &= prune(rep, state, can_evict, window)
        return mask

    probe.compute_candidates(extra_prune, within)
    return probe.cand, probe.ub

