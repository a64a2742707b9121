"""YAML read from libyaml's *event* stream (an iterative parser), not with ``yaml.load``.

The input may be hostile: the C loader recurses once per nesting level and crashes the
interpreter on deep input, and aliases can expand exponentially (billion laughs). The assembler
here has a depth limit and a budget on alias expansion; it is also about three times faster than
``CSafeLoader`` on large dumps, and can hand each element of a List's ``items`` to a sink as soon
as it is finished, so a dump is never held whole as Python objects."""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any, Optional

import yaml
from yaml import events as ev
from yaml.nodes import ScalarNode

from models import InputError
from models.errors import clipped

from ..interrupts import checkpoint
from .errors import too_many_digits

__all__ = ["CHECK_EVERY", "ItemSink", "MAX_ALIAS_EXPANSION", "MAX_DEPTH", "yaml_documents"]


# Deepest nesting accepted. Kubernetes objects stay under ~30 levels (managedFields included);
# the limit keeps every later step (pydantic, repr, json) far from Python's recursion limit.
MAX_DEPTH = 500


# Nodes that YAML aliases may add by expansion, in total. Linear in anything a person writes by
# hand, and far below what an exponential alias bomb needs.
MAX_ALIAS_EXPANSION = 1_000_000


_YAML_PARSER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


# Objects read (or YAML collections closed) between two looks at whether Ctrl-C was pressed:
# a few milliseconds of work.
CHECK_EVERY = 256


_STR_TAG = "tag:yaml.org,2002:str"


_MERGE_TAG = "tag:yaml.org,2002:merge"


_INT_TAG = "tag:yaml.org,2002:int"


_MAP_TAGS = (None, "!", "tag:yaml.org,2002:map")


_SEQ_TAGS = (None, "!", "tag:yaml.org,2002:seq")


class _Frame:
    """An open mapping or sequence while its events stream in."""

    __slots__ = ("value", "is_map", "key", "has_key", "size", "anchor", "merges")

    def __init__(self, value: Any, is_map: bool, anchor: Optional[str]) -> None:
        self.value = value
        self.is_map = is_map
        self.key: Any = None
        self.has_key = False
        self.size = 1  # nodes in this subtree, alias expansions included
        self.anchor = anchor
        self.merges: list[dict] = []


def yaml_documents(text: str, label: str, sink: Optional[ItemSink] = None) -> list[Any]:
    try:
        return _assemble(yaml.parse(text, Loader=_YAML_PARSER), label, sink)
    except yaml.YAMLError as exc:
        raise InputError(label, "", f"invalid YAML: {_yaml_problem(exc)}") from None


# Takes each finished element of a top-level mapping's ``items`` sequence: (document, index, value).
ItemSink = Callable[[int, int, Any], None]


def _yaml_problem(exc: yaml.YAMLError) -> str:
    mark = getattr(exc, "problem_mark", None) or getattr(exc, "context_mark", None)
    problem = getattr(exc, "problem", None) or getattr(exc, "context", None) or str(exc)
    if mark is not None:
        return f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    if isinstance(exc, yaml.reader.ReaderError):  # its str() spans two lines
        char = exc.character if isinstance(exc.character, int) else ord(exc.character[:1] or b"\0")
        return f"character {exc.position}: unacceptable character #x{char:04x}: {exc.reason}"
    return " ".join(str(problem).split())  # one line, whatever the library wrote


def _assemble(events: Any, label: str, sink: Optional[ItemSink] = None) -> list[Any]:
    """Build documents from YAML events without recursion, bounding depth and alias expansion.

    With a ``sink``, each element of a top-level mapping's ``items`` sequence goes to it as soon
    as it is finished, and the sequence keeps only a ``None`` in its place: a dump is then never
    held whole as Python objects."""
    resolver = yaml.resolver.Resolver()
    constructor = yaml.constructor.SafeConstructor()
    plain_cache: dict[str, Any] = {}
    anchors: dict[str, tuple[Any, int]] = {}
    expanded = closed = 0
    documents: list[Any] = []
    stack: list[_Frame] = []

    def fail(event: Any, problem: str) -> InputError:
        mark = getattr(event, "start_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        return InputError(label, "", f"invalid YAML: {where}{problem}")

    for event in events:
        cls = event.__class__
        if cls is ev.ScalarEvent:
            value = _scalar(event, resolver, constructor, plain_cache, fail)
            size = 1
            if event.anchor:
                anchors[event.anchor] = (value, 1)
        elif cls is ev.MappingStartEvent or cls is ev.SequenceStartEvent:
            is_map = cls is ev.MappingStartEvent
            if event.tag not in (_MAP_TAGS if is_map else _SEQ_TAGS):
                raise fail(event, f"unsupported tag {event.tag}")
            if len(stack) >= MAX_DEPTH:
                raise fail(event, f"nested deeper than {MAX_DEPTH} levels")
            stack.append(_Frame({} if is_map else [], is_map, event.anchor))
            continue
        elif cls is ev.MappingEndEvent or cls is ev.SequenceEndEvent:
            closed += 1
            if not closed % CHECK_EVERY:
                checkpoint()
            frame = stack.pop()
            value, size = frame.value, frame.size
            for merged in frame.merges:  # explicit keys win over merged ones
                for k, v in merged.items():
                    value.setdefault(k, v)
            if frame.anchor:
                anchors[frame.anchor] = (value, size)
        elif cls is ev.AliasEvent:
            if event.anchor not in anchors:
                # An alias to an open collection (a cycle) is unknown here too.
                raise fail(event, f"alias *{event.anchor} does not name a finished anchor")
            value, size = anchors[event.anchor]
            expanded += size
            if expanded > MAX_ALIAS_EXPANSION:
                raise fail(event, f"aliases expand to more than {MAX_ALIAS_EXPANSION} nodes")
        else:  # stream and document boundaries
            continue

        if value is _MERGE and not (stack and stack[-1].is_map and not stack[-1].has_key):
            value = "<<"  # only a mapping key merges; elsewhere it is the plain string
        if not stack:
            if value is not None:
                documents.append(value)
            continue
        parent = stack[-1]
        parent.size += size
        if not parent.is_map:
            if sink is not None and len(stack) == 2 and stack[0].is_map and stack[0].key == "items":
                sink(len(documents), len(parent.value), value)
                value = None
            parent.value.append(value)
        elif not parent.has_key:
            if isinstance(value, (dict, list)):
                raise fail(event, "a mapping key must be a scalar")
            parent.key, parent.has_key = value, True
        else:
            key = parent.key
            parent.has_key = False
            if key is _MERGE:
                merges = value if isinstance(value, list) else [value]
                if not all(isinstance(m, dict) for m in merges):
                    raise fail(event, "a merge key (<<) needs a mapping or a list of mappings")
                parent.merges.extend(merges)
            elif key in parent.value:
                # (the last one silently won: a Node's second name dropped the node and its pods)
                raise fail(event, f"the key {str(key)[:60]!r} is given twice in one mapping")
            else:
                parent.value[key] = value
    return documents


class _MergeKey:
    """The ``<<`` key of YAML's merge feature."""


_MERGE = _MergeKey()


def _scalar(event: Any, resolver: Any, constructor: Any, cache: dict[str, Any], fail: Any) -> Any:
    tag = event.tag
    raw = event.value
    # A plain scalar without a tag is typed by its text (5, true, null); a quoted one is a string.
    implicit_plain = tag in (None, "!") and event.implicit[0]
    if implicit_plain:
        hit = cache.get(raw, cache)
        if hit is not cache:
            return hit
        tag = resolver.resolve(ScalarNode, raw, (True, False))
    elif tag in (None, "!"):
        return raw
    if tag == _STR_TAG:
        value: Any = raw
    elif tag == _MERGE_TAG:
        value = _MERGE
    else:
        build = constructor.yaml_constructors.get(tag)
        if build is None or tag.endswith((":map", ":seq", ":omap", ":pairs", ":set")):
            raise fail(event, f"unsupported tag {tag}")
        try:
            value = build(constructor, ScalarNode(tag, raw, event.start_mark, event.end_mark, event.style))
        except (yaml.YAMLError, ValueError, TypeError) as exc:
            raise fail(event, _unbuilt(raw, tag, exc)) from None
    if implicit_plain and len(cache) < 100_000:
        cache[raw] = value
    return value


def _unbuilt(raw: str, tag: str, exc: Exception) -> str:
    """Why the scalar ``raw`` is not a value of ``tag``, quoting at most a few dozen characters of
    it (Python's own message repeats it whole)."""
    limit = sys.get_int_max_str_digits()
    digits = sum(ch.isdigit() for ch in raw)
    if tag == _INT_TAG and limit and digits > limit:
        return too_many_digits(digits)
    return f"{clipped(repr(raw))} is not a valid {tag.rsplit(':', 1)[-1]}: {clipped(str(exc))}"
