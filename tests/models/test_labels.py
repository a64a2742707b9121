"""One label-requirement matcher (models/labels.py) behind every selector shape: the models'
LabelSelector and node selector requirements, the solver's frozen Selector, and the test API
server's structured and query-string selectors give the same answer for the same requirement."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.apiserver.errors import ApiError
from adapters.apiserver.selectors import match_label_selector, parse_label_selector
from models.labels import check_values_fit_operator, requirement_matches
from models.objects import LabelSelector, NodeSelectorRequirement
from solver.terms import Selector

KEYS = ("app", "tier", "zone")
VALUES = ("a", "b", "c")

label_maps = st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES))
expressions = st.one_of(
    st.tuples(st.sampled_from(KEYS), st.sampled_from(("In", "NotIn")),
              st.lists(st.sampled_from(VALUES), min_size=1, max_size=3, unique=True)),
    st.tuples(st.sampled_from(KEYS), st.sampled_from(("Exists", "DoesNotExist")), st.just([])),
)
selectors = st.fixed_dictionaries({}, optional={
    "matchLabels": st.dictionaries(st.sampled_from(KEYS), st.sampled_from(VALUES), max_size=2),
    "matchExpressions": st.lists(expressions, max_size=3).map(
        lambda exprs: [{"key": k, "operator": op, **({"values": v} if v else {})} for k, op, v in exprs]),
})


def _query(selector: dict) -> str:
    """The same selector in the query-string grammar of a list request."""
    parts = [f"{k}={v}" for k, v in (selector.get("matchLabels") or {}).items()]
    for e in selector.get("matchExpressions") or []:
        key, op, values = e["key"], e["operator"], e.get("values") or []
        parts.append({"In": f"{key} in ({','.join(values)})", "NotIn": f"{key} notin ({','.join(values)})",
                      "Exists": key, "DoesNotExist": f"!{key}"}[op])
    return ",".join(parts)


@settings(max_examples=300, deadline=None)
@given(selector=selectors, labels=label_maps)
def test_every_selector_shape_gives_the_same_answer(selector: dict, labels: dict[str, str]) -> None:
    model = LabelSelector.model_validate(selector)
    expected = model.matches(labels)
    assert Selector.of(model).matches(labels) is expected
    assert match_label_selector(selector, labels) is expected
    assert parse_label_selector(_query(selector))({"metadata": {"labels": labels}}) is expected


@pytest.mark.parametrize(("operator", "value", "label", "matches"), [
    pytest.param("Gt", "4", "5", True, id="gt"),
    pytest.param("Gt", "5", "5", False, id="gt-equal"),
    pytest.param("Lt", "5", "-3", True, id="lt-negative"),
    pytest.param("Gt", "4", "5x", False, id="label-not-an-integer"),
    pytest.param("Gt", "4", " 5", False, id="spaces-are-not-an-integer"),
    pytest.param("Lt", "5", None, False, id="missing-label"),
])
def test_gt_and_lt_agree_for_nodes_and_list_requests(operator: str, value: str, label: str | None,
                                                     matches: bool) -> None:
    labels = {} if label is None else {"cores": label}
    requirement = NodeSelectorRequirement(key="cores", operator=operator, values=[value])
    assert requirement.matches(labels) is matches
    query = f"cores{'>' if operator == 'Gt' else '<'}{value}"
    assert parse_label_selector(query)({"metadata": {"labels": labels}}) is matches


def test_a_list_request_with_gt_on_a_non_integer_is_a_bad_request() -> None:
    with pytest.raises(ApiError) as err:
        parse_label_selector("cores>many")
    assert err.value.code == 400 and "must be an integer" in str(err.value)


def test_an_operator_the_api_does_not_know_matches_nothing() -> None:
    """What the test API server stores unvalidated (a PDB's selector) cannot select every pod."""
    assert requirement_matches({"app": "a"}, "app", "Matches", ["a"]) is False
    assert match_label_selector({"matchExpressions": [{"key": "app", "operator": "Matches"}]}, {"app": "a"}) is False


@pytest.mark.parametrize(("operator", "values", "message"), [
    ("In", [], "operator In needs at least one value"),
    ("Exists", ["x"], "operator Exists takes no values"),
    ("Lt", ["1", "2"], "operator Lt needs exactly one integer value"),
    ("Gt", ["1.5"], "operator Gt needs exactly one integer value"),
])
def test_values_that_do_not_fit_the_operator_are_refused_with_its_name(operator: str, values: list[str],
                                                                      message: str) -> None:
    with pytest.raises(ValueError, match=message):
        check_values_fit_operator(operator, values)
    if operator in ("In", "Exists"):
        with pytest.raises(ValueError, match=message):
            LabelSelector.model_validate({"matchExpressions": [{"key": "k", "operator": operator, "values": values}]})
    with pytest.raises(ValueError, match=message):
        NodeSelectorRequirement(key="k", operator=operator, values=values)
