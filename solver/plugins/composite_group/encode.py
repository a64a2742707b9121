"""The model's part: CompositePodGroups on the window model.

* ``on[g]``: PodGroup g (under some CompositePodGroup) places window members. The gang rule
  (``gang.permit``) makes that whole; a g whose running members reach its minMember counts as
  placed anyway (``done``).
* ``on[C]``: CompositePodGroup C places something under it, the "or" of its children's.
* A ``gang`` level: Σ children counted as placed ≥ minGroupCount · on[C] (placed or none).
* A topology constraint: ``dom[C, d]``, at most one per C; every class under C puts pods only on
  the nodes of its chosen domain (none on nodes lacking the label); running members under C fix
  the domain.
Children of a tree are never merged into gang kinds (``gang.permit.kinds``): each keeps its own
classes, so its placements are its own.
"""

from __future__ import annotations

from collections import defaultdict
from typing import TYPE_CHECKING, Any

from ortools.sat.python import cp_model

from ...group_tree import COMPOSITE, GROUP, Tree

if TYPE_CHECKING:
    from ...plugin_api import EncodeModel


def encode(wm: EncodeModel) -> None:
    tree = Tree.of(wm.ctx)
    if tree is None:
        return
    classes: dict[str, list] = defaultdict(list)
    for c in wm.classes:
        if c.rep.group is not None and not isinstance(wm.placed[c.id], int) and tree.ancestors(c.rep.group):
            classes[c.rep.group].append(c)
    if not classes:
        return
    running = _running(wm)
    roots = {tree.ancestors(g)[-1] for g in classes}
    for root in sorted(roots):
        on: dict[Any, Any] = {}
        for composite in tree.bottom_up(root):
            _encode_level(wm, tree, composite, classes, running, on)
            _encode_topology(wm, tree, composite, classes)


def _running(wm: EncodeModel) -> dict[str, int]:
    out: dict[str, int] = defaultdict(int)
    for pod, _ in wm.state.pods():
        if pod.group is not None:
            out[pod.group] += 1
    return out


def _encode_level(wm: EncodeModel, tree: Tree, composite: str, classes, running, on) -> None:
    m = wm.model
    counted = []  # per child: 1 / 0 / a bool, whether it counts as placed
    present = []  # the children's on[] literals
    for child in tree.children.get(composite, []):
        kind, key = child
        if kind == GROUP:
            group = wm.ctx.pod_groups.get(key)
            done = group is not None and 0 < running[key] >= group.spec.min_member
            if key in classes:
                placed = [wm.placed[c.id] for c in classes[key]]
                lit = m.new_bool_var(f"on[{key}]")
                total = sum(c.size for c in classes[key])
                m.add(cp_model.LinearExpr.sum(placed) >= lit)
                m.add(cp_model.LinearExpr.sum(placed) <= total * lit)
                on[child] = lit
                present.append(lit)
                counted.append(1 if done else lit)
            else:
                counted.append(1 if done else 0)
        else:
            lit = on.get(child)
            if lit is not None:
                present.append(lit)
            counted.append(on.get((COMPOSITE + "-counted", key), 0))
    here = m.new_bool_var(f"on[{composite}]")
    if present:
        # on[C] is the "or" of its children's.
        for lit in present:
            m.add_implication(lit, here)
        m.add(cp_model.LinearExpr.sum(present) >= here)
    else:
        m.add(here == 0)
    on[(COMPOSITE, composite)] = here
    need = tree.composites[composite].min_group_count
    # A gang level places minGroupCount children, or nothing under it.
    if need:
        m.add(cp_model.LinearExpr.sum(counted) >= need * here)
    # What C counts as in its parent: placed now, or (without window pods) already satisfied.
    on[(COMPOSITE + "-counted", composite)] = here if present else int(
        tree.satisfied(composite, lambda g: 0 < running[g] >= _min_member(wm, g)))


def _min_member(wm: EncodeModel, group: str) -> int:
    found = wm.ctx.pod_groups.get(group)
    return found.spec.min_member if found is not None else 1


def _encode_topology(wm: EncodeModel, tree: Tree, composite: str, classes) -> None:
    key = tree.composites[composite].topology_key
    under = [c for g in tree.groups_under(composite) for c in classes.get(g, [])]
    if key is None or not under:
        return
    m, state = wm.model, wm.state
    ids = state.domains(key)[0]
    groups = set(tree.groups_under(composite))
    pinned = {int(ids[n]) for p, n in state.pods() if p.group in groups}
    domains = sorted({d for c in under for d in wm.class_vars_by_domain(c.id, key)})
    if pinned:
        domains = [d for d in domains if len(pinned) == 1 and d in pinned]
    # dom[C, d]: every pod under C lands in domain d of the key; at most one d.
    dom = {d: m.new_bool_var(f"dom[{composite},{d}]") for d in domains}
    m.add_at_most_one(list(dom.values()))
    for c in under:
        by_domain = wm.class_vars_by_domain(c.id, key)
        for d, vars_ in by_domain.items():
            m.add(cp_model.LinearExpr.sum(vars_) <= c.size * dom[d] if d in dom else cp_model.LinearExpr.sum(vars_) == 0)
        outside = [v for n, v in wm.by_class.get(c.id, []) if int(ids[n]) < 0]
        if outside:
            m.add(cp_model.LinearExpr.sum(outside) == 0)
