"""Text in, documents out: a path (``-`` for stdin) or an open file, bounded in size
(``adapters.input_size``), read as UTF-8 and parsed as JSON (one value, or several as ``jq``
prints them) or YAML (``yaml_events``); a Helm template and a lone UTF-16 surrogate are named.
``items`` flattens the documents' Lists into their objects, each with a position that names it."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import IO, Any, Optional, Union

from models import InputError
from models.errors import clipped
from models.config import DEFAULT_MAX_SNAPSHOT_BYTES

from ..input_size import SizeLimit, read_bounded, snapshot_limit
from .errors import SIMPLE_KEY, describe, too_many_digits
from .kinds import kind_of, object_name
from .yaml_events import yaml_documents

Source = Union[str, Path, IO[str], IO[bytes]]

__all__ = ["HELM_HINT", "HELM_MARKER", "SURROGATE_ESCAPE", "Source", "flat_objects", "json_documents", "label_of",
           "parsed_text", "read_documents", "read_limited", "read_text", "single_mapping"]


def read_documents(source: Source, *, label: Optional[str] = None,
                   max_bytes: int = DEFAULT_MAX_SNAPSHOT_BYTES) -> list[Any]:
    """Every non-empty document of a JSON or YAML input of at most ``max_bytes``, as plain
    Python data."""
    label = label or label_of(source)
    return read_limited(source, label, snapshot_limit(max_bytes))


def read_limited(source: Source, label: str, limit: SizeLimit) -> list[Any]:
    return parsed_text(read_text(source, label, limit), label)


def parsed_text(text: str, label: str) -> list[Any]:
    try:
        return _parse_documents(text, label)
    except InputError as exc:
        if HELM_MARKER in text:
            raise InputError(label, "", f"{exc.problem} — {HELM_HINT}") from None
        raise


# A Helm chart's templates are not Kubernetes objects until rendered.
HELM_MARKER = "{{"


HELM_HINT = "this looks like a Helm template ({{ ... }}): render it first (helm template ...) and pass the output"


def _parse_documents(text: str, label: str) -> list[Any]:
    stripped = text.lstrip()
    if not stripped:
        return []
    if stripped[0] in "{[":
        try:
            documents = json_documents(stripped)
            if SURROGATE_ESCAPE.search(stripped):
                _refuse_lone_surrogates(documents, label)
            return documents
        except RecursionError:
            raise InputError(label, "", "invalid JSON: nested too deeply") from None
        except InputError:
            raise
        except json.JSONDecodeError as exc:
            # Flow-style YAML also starts with a bracket; only if it is not YAML either is the
            # JSON error the one to show.
            try:
                return yaml_documents(text, label)
            except InputError:
                offset = len(text) - len(stripped)
                line = text.count("\n", 0, offset) + exc.lineno
                raise InputError(label, "", f"invalid JSON: line {line}, column {exc.colno}: {exc.msg}") from None
        except ValueError as exc:  # json's scanner turning a number's digits into an int
            raise _unreadable_number(text, len(text) - len(stripped), label, exc) from None
    return yaml_documents(text, label)


def _unreadable_number(text: str, start: int, label: str, exc: ValueError) -> InputError:
    """The error for JSON that ``json`` gave up on with a plain ValueError: an integer of more
    digits than Python converts (``sys.get_int_max_str_digits``), named by its line and column
    and its length, not its digits. Looked for only now, so reading valid JSON costs nothing."""
    limit = sys.get_int_max_str_digits()
    found = _long_integer(text, start, limit) if limit else None
    if found is None:
        return InputError(label, "", f"invalid JSON: {clipped(str(exc))}")
    offset, digits = found
    line = text.count("\n", 0, offset) + 1
    column = offset - text.rfind("\n", 0, offset)
    return InputError(label, "", f"invalid JSON: line {line}, column {column}: {too_many_digits(digits)}")


def _long_integer(text: str, start: int, limit: int) -> Optional[tuple[int, int]]:
    """Offset and digit count of the first JSON integer from ``start`` with more than ``limit``
    digits, or None. Strings are stepped over whole, so digits inside one are not a number, and
    so are the digits of a fraction or an exponent, which json reads as a float whatever their
    length."""
    # Everything up to the first run of more than ``limit`` digits outside a string, in one
    # match (possessive: no backtracking, no match object per token; seconds for 300 MB).
    skip = re.compile(r'(?s)(?:"[^"\\]*+(?:\\.[^"\\]*+)*+"|[^"0-9]++|[0-9]{1,%d}+(?![0-9]))*+' % limit)
    pos = start
    while True:
        skipped = skip.match(text, pos)
        pos = skipped.end() if skipped else pos
        run = _DIGITS.match(text, pos)
        if run is None:
            return None  # the end, or a string left open: json would have said so
        head = pos - (pos > start and text[pos - 1] == "-")  # where the number starts, its sign included
        before = text[head - 1] if head > start else ""
        if before not in (".", "e", "E", "+") and text[run.end():run.end() + 1] not in (".", "e", "E"):
            return head, run.end() - pos
        pos = run.end()


_DIGITS = re.compile("[0-9]+")


# A JSON escape of a UTF-16 surrogate. Paired ones make one character; a lone one decodes to a
# string that is not valid Unicode, which pydantic-core and a UTF-8 stdout refuse later (YAML's
# scanner refuses such escapes itself).
SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")


def _refuse_lone_surrogates(documents: list[Any], label: str) -> None:
    """``InputError`` naming the object and field of the first string holding a lone surrogate."""
    several = len(documents) > 1
    for i, doc in enumerate(documents):
        position = f"documents[{i}]" if several else label
        items = doc.get("items") if isinstance(doc, dict) else None
        objects = [(position, doc)]
        if isinstance(items, list):
            prefix = f"{position}." if several else ""
            objects = [(f"{prefix}items[{j}]", item) for j, item in enumerate(items)]
            objects.append((position, {k: v for k, v in doc.items() if k != "items"}))
        for where, obj in objects:
            path = _surrogate_path(obj) if isinstance(obj, dict) else None  # non-objects fail later
            if path is None:
                continue
            kind = obj.get("kind") if isinstance(obj, dict) else None
            spec = kind_of(kind, obj.get("apiVersion")) if isinstance(kind, str) else None
            name = object_name(spec, obj, where) if spec is not None else where
            if _has_surrogate(name):
                name = where
            raise InputError(name, path, "not valid Unicode: a lone UTF-16 surrogate (\\ud800-\\udfff escape)")


def _surrogate_path(data: Any) -> Optional[str]:
    """JSON path of the first key or string holding a lone surrogate (iterative), or None."""
    pending: list[tuple[str, Any]] = [("", data)]
    while pending:
        path, node = pending.pop()
        if isinstance(node, str):
            if _has_surrogate(node):
                return path
        elif isinstance(node, dict):
            for key, value in reversed(list(node.items())):
                text = str(key)
                if SIMPLE_KEY.match(text):
                    step = f".{text}" if path else text
                else:  # json.dumps escapes the surrogate, so the path stays printable
                    step = f"[{json.dumps(text)}]"
                if _has_surrogate(text):
                    return path + step
                pending.append((path + step, value))
        elif isinstance(node, list):
            for i in range(len(node) - 1, -1, -1):
                pending.append((f"{path}[{i}]", node[i]))
    return None


def _has_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
        return False
    except UnicodeEncodeError:
        return True


def label_of(source: Any) -> str:
    if isinstance(source, Path):
        return str(source)
    if isinstance(source, str):
        return "<stdin>" if source == "-" else source
    return str(getattr(source, "name", "<input>"))


def read_text(source: Any, label: str, limit: SizeLimit) -> str:
    try:
        data = read_bounded(source, label, limit)
    except FileNotFoundError:
        raise InputError(label, "", "cannot read: no such file") from None
    except IsADirectoryError:
        raise InputError(label, "", "cannot read: is a directory") from None
    except OSError as exc:
        raise InputError(label, "", f"cannot read: {exc.strerror or exc}") from None
    if isinstance(data, (bytes, bytearray)):
        try:
            return data.decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InputError(label, "", f"not UTF-8 text (invalid byte at offset {exc.start})") from None
    return data.lstrip("\ufeff")


def json_documents(text: str) -> list[Any]:
    """One JSON value, or several separated by whitespace (what ``jq`` prints)."""
    decoder = json.JSONDecoder()
    documents = []
    pos, end = 0, len(text)
    while pos < end:
        value, pos = decoder.raw_decode(text, pos)
        if value is not None:
            documents.append(value)
        while pos < end and text[pos] in " \t\r\n":
            pos += 1
    return documents


def single_mapping(source: Any, *, what: str, empty: Optional[dict], limit: SizeLimit) -> dict:
    label = label_of(source)
    documents = read_limited(source, label, limit)
    if not documents:
        if empty is not None:
            return dict(empty)
        raise InputError(label, "", f"empty input: expected a {what}")
    if len(documents) > 1:
        raise InputError(label, "", f"expected one {what} document, found {len(documents)}")
    data = documents[0]
    if not isinstance(data, dict):
        raise InputError(what, "", f"expected a mapping, got {describe(data)}")
    return data


def flat_objects(documents: list[Any], label: str):
    """Yield ``(position, object, kind)`` for every object, flattening Lists.

    A position names an object that has no usable name: ``items[3]`` in a List,
    ``documents[1]`` (or ``documents[1].items[3]``) in a multi-document stream, and the input's
    own label for a single top-level object.
    """
    several = len(documents) > 1
    # (position, object, the kind its List gives it)
    pending: list[tuple[str, Any, Optional[str]]] = [
        (f"documents[{i}]" if several else label, doc, None) for i, doc in enumerate(documents)]
    pending.reverse()
    while pending:
        position, obj, inferred_kind = pending.pop()
        if not isinstance(obj, dict):
            raise InputError(position, "", f"expected a Kubernetes object (a mapping), got {describe(obj)}")
        kind = obj.get("kind", inferred_kind)
        if kind is None:
            raise InputError(position, "kind", "required field is missing")
        if not isinstance(kind, str) or not kind:
            raise InputError(position, "kind", f"{describe(kind)} is not a kind")
        if kind == "List" or (kind.endswith("List") and "items" in obj):
            items = obj.get("items", _MISSING)
            if items is _MISSING:
                raise InputError(position, "items", "required field is missing")
            if items is None:
                items = []
            if not isinstance(items, list):
                raise InputError(position, "items", f"expected a list, got {describe(items)}")
            item_kind = kind[: -len("List")] or None  # PodList items carry no kind of their own
            prefix = f"{position}." if several and position.startswith("documents[") else ""
            for i in range(len(items) - 1, -1, -1):
                pending.append((f"{prefix}items[{i}]", items[i], item_kind))
            continue
        yield position, obj, kind


_MISSING = object()
