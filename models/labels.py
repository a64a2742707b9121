"""Label selector requirements: the one matcher and the one operator/values check behind every
selector shape.

Kubernetes writes a label requirement three ways: a pod's or PDB's ``LabelSelector``
(``matchLabels`` + ``matchExpressions`` with In, NotIn, Exists, DoesNotExist), a node selector
term's ``matchExpressions`` (the same four plus Gt and Lt), and the query string of a list or
watch (``app=web,tier!=db,env in (a,b),!canary,replicas>2``). All of them come down to
requirements ``(key, operator, values)`` ANDed together; this module says what one requirement
means, so the models, the solver's frozen selectors and the test API server cannot disagree.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Optional

# (key, operator, values) — the operator as the API spells it.
Requirement = tuple[str, str, Collection[str]]


def parse_int64(text: str) -> Optional[int]:
    """``text`` as Go's ``strconv.ParseInt(text, 10, 64)`` reads it (no spaces, no underscores), or
    None: what Gt and Lt compare."""
    try:
        value = int(text, 10)
    except ValueError:
        return None
    if not text.strip() or text != text.strip() or "_" in text:
        return None
    return value if -(2**63) <= value < 2**63 else None


def requirement_matches(labels: Mapping[str, str], key: str, operator: str, values: Collection[str]) -> bool:
    """Whether ``labels`` meet one requirement. In: the key is there with one of ``values``;
    NotIn: it is missing or has none of them; Exists / DoesNotExist; Gt / Lt: the key is there and
    both it and the one value read as 64-bit integers that compare so. An operator the API does not
    know matches nothing (the models refuse one; the test API server stores what it is given)."""
    have = labels.get(key)
    if operator == "In":
        return have is not None and have in values
    if operator == "NotIn":
        return have is None or have not in values
    if operator == "Exists":
        return have is not None
    if operator == "DoesNotExist":
        return have is None
    if operator in ("Gt", "Lt") and have is not None:
        have_int, want = parse_int64(have), parse_int64(next(iter(values), ""))
        if have_int is None or want is None:
            return False
        return have_int > want if operator == "Gt" else have_int < want
    return False


def selector_matches(
    equals: Iterable[tuple[str, str]], requirements: Iterable[Requirement], labels: Mapping[str, str]
) -> bool:
    """Whether ``labels`` meet every ``key = value`` of ``equals`` (a selector's ``matchLabels``) and
    every requirement. Nothing to meet matches everything: ``{}`` selects all."""
    for key, value in equals:
        if labels.get(key) != value:
            return False
    for key, operator, values in requirements:
        if not requirement_matches(labels, key, operator, values):
            return False
    return True


def check_values_fit_operator(operator: str, values: Sequence[str]) -> None:
    """Raise ValueError unless ``values`` suit ``operator``, as the API server validates them: In and
    NotIn need at least one, Exists and DoesNotExist take none, Gt and Lt take one integer."""
    if operator in ("In", "NotIn") and not values:
        raise ValueError(f"operator {operator} needs at least one value")
    if operator in ("Exists", "DoesNotExist") and values:
        raise ValueError(f"operator {operator} takes no values")
    if operator in ("Gt", "Lt") and (len(values) != 1 or parse_int64(values[0]) is None):
        raise ValueError(f"operator {operator} needs exactly one integer value")
