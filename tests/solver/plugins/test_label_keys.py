"""Memos keyed by the labels their selectors read (``terms.LabelKeys``): pods that differ only
in a label no selector reads (a StatefulSet pod's own name) share what was worked out, and a
selector reading a new key starts the memo again. Checked against matching every term or guard
one by one, on pods whose labels are all different."""

from __future__ import annotations

from models.config import SchedulerConfig
from solver.context import build_context
from solver.plugins.inter_pod_affinity.book import term_book
from solver.terms import LabelKeys, Selector
from tests.builders import make_node, make_pod, make_snapshot, term


def test_pods_alike_in_the_keys_read_share_a_key_and_a_new_key_tells_them_apart() -> None:
    keys = LabelKeys()
    assert keys.add(Selector(equals=(("app", "db"),)))
    assert not keys.add(Selector(exprs=(("app", "In", frozenset({"web"})),)))
    a = {"app": "db", "statefulset.kubernetes.io/pod-name": "db-0", "tier": "1"}
    b = {"app": "db", "statefulset.kubernetes.io/pod-name": "db-1", "tier": "2"}
    assert keys.of("default", a) == keys.of("default", b) != keys.of("other", a)
    assert keys.add(Selector(exprs=(("tier", "Exists", frozenset()),)))
    assert keys.of("default", a) != keys.of("default", b)


def test_held_terms_matching_pods_of_unique_labels_are_each_pod_s_own() -> None:
    """Running pods hold anti-affinity terms over ``app`` and, later, ``tier``; every pod carries
    its own name as a label. Each answer equals matching every held term one by one, before and
    after a term over a new key comes in."""
    nodes = [make_node(f"n{i}", cpu="64", memory="64Gi") for i in range(3)]
    running = [make_pod(f"default/r-{app}", node="n0", labels={"app": app},
                        pod_anti_affinity=[term({"app": want}, "kubernetes.io/hostname")])
               for app, want in (("a", "db"), ("b", "web"), ("c", "db"))]
    ctx = build_context(make_snapshot(nodes, running), SchedulerConfig())
    book = term_book(ctx.state)
    asking = [make_pod(f"default/p-{i}", labels={"app": app, "pod-name": f"p-{i}", "tier": tier})
              for i, (app, tier) in enumerate([("db", "1"), ("db", "2"), ("web", "1"), ("x", "1")] * 2)]
    infos = build_context(make_snapshot(nodes, running + asking), SchedulerConfig(), all_pending=True).window

    def one_by_one(pod):
        return [t for t in book.owners if t.matches(pod.namespace, pod.labels, pod.ns_labels)]

    for pod in infos:
        assert book.terms_matching(pod) == one_by_one(pod), pod.key
    tiered = build_context(make_snapshot(nodes, [make_pod(
        "default/r-t", node="n1", labels={"app": "t"},
        pod_anti_affinity=[term({"tier": "1"}, "kubernetes.io/hostname")])]), SchedulerConfig()).state.pods_on[1]
    book.reserve(next(iter(tiered.values())), 1)
    for pod in infos:
        assert book.terms_matching(pod) == one_by_one(pod), pod.key
    # (a's and c's terms are one term: db; then web, then tier 1)
    assert [len(book.terms_matching(p)) for p in infos[:4]] == [2, 1, 2, 1]
