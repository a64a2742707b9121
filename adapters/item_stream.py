"""The items of a large JSON ``List``, one at a time, so a dump is never held as one object tree.

``json.loads`` on a kubectl dump builds every item as Python dicts and lists at once, about ten
times the size of compact JSON text, before the first object is read into a model. Here the top
level of a single JSON object is walked by hand and each element of its ``items`` array is
decoded on its own: the caller turns it into a model and lets the dicts go, so what is alive at
any moment is the text, the models made so far and one item.

Only the shape a dump has (one object, its ``items`` an array) is walked this way; anything else
raises ``NotAList`` and the caller reads the input whole, as before.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

_WHITESPACE = " \t\r\n"


class NotAList(Exception):
    """The text is not one JSON object with an ``items`` array; read it whole instead."""


def json_list(text: str, each_item: Callable[[int, Any], None]) -> dict[str, Any]:
    """Call ``each_item(index, value)`` for every element of the ``items`` array of the one JSON
    object ``text`` holds, in order, and return the object's other keys.

    Raises ``NotAList`` for any other shape, ``json.JSONDecodeError`` for invalid JSON."""
    decoder = json.JSONDecoder()
    end = len(text)
    pos = _skip(text, 0)
    if pos >= end or text[pos] != "{":
        raise NotAList("not a JSON object")
    rest: dict[str, Any] = {}
    seen_items = False
    pos = _skip(text, pos + 1)
    if pos < end and text[pos] == "}":
        raise NotAList("an empty object")
    while True:
        if pos >= end or text[pos] != '"':
            raise NotAList("a key is not a string")
        key, pos = decoder.raw_decode(text, pos)
        pos = _skip(text, pos)
        if pos >= end or text[pos] != ":":
            raise NotAList("no colon after a key")
        pos = _skip(text, pos + 1)
        if key == "items" and pos < end and text[pos] == "[" and not seen_items:
            seen_items = True
            pos = _walk_items(decoder, text, pos, each_item)
        else:
            if key == "items" or key in rest:
                raise NotAList(f"key {key!r} twice")  # json.loads keeps the last: read it whole
            rest[key], pos = decoder.raw_decode(text, pos)
        pos = _skip(text, pos)
        if pos < end and text[pos] == ",":
            pos = _skip(text, pos + 1)
            continue
        if pos < end and text[pos] == "}":
            break
        raise NotAList("no comma or closing brace")
    if _skip(text, pos + 1) < end:  # pos is at the closing brace
        raise NotAList("more than one JSON value")
    if not seen_items:
        raise NotAList("no items array")
    return rest


def _walk_items(decoder: json.JSONDecoder, text: str, pos: int, each_item: Callable[[int, Any], None]) -> int:
    """Hand each value of the array opening at ``text[pos]`` to ``each_item``; the position
    after the closing bracket."""
    end = len(text)
    pos = _skip(text, pos + 1)
    if pos < end and text[pos] == "]":
        return pos + 1
    index = 0
    while True:
        value, pos = decoder.raw_decode(text, pos)
        each_item(index, value)
        del value  # the caller keeps what it needs; the dicts go now
        index += 1
        pos = _skip(text, pos)
        if pos < end and text[pos] == ",":
            pos = _skip(text, pos + 1)
            continue
        if pos < end and text[pos] == "]":
            return pos + 1
        raise NotAList("no comma or closing bracket in items")


def _skip(text: str, pos: int) -> int:
    end = len(text)
    while pos < end and text[pos] in _WHITESPACE:
        pos += 1
    return pos
