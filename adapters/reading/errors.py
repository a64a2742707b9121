"""A pydantic ValidationError as one ``InputError`` that names the object and the field
(``pods/default/web-1: spec.containers[0].resources.requests.cpu: "12x" is not a quantity``)."""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from typing import Any, Union

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from models import InputError
from models.errors import clipped

__all__ = ["SIMPLE_KEY", "describe", "too_many_digits", "validate_model"]


def validate_model(model: type[BaseModel], data: Any, obj: Union[str, Callable[[], str]]) -> Any:
    """``model`` read from ``data``, or an InputError naming ``obj`` (or what ``obj()`` gives:
    the name is worked out only when there is a problem to name)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _input_error(exc, data, _name(obj)) from None
    except RecursionError:
        raise InputError(_name(obj), "", "nested too deeply") from None
    except InputError:
        raise
    except Exception as exc:  # a validator tripped over a value of an unexpected type
        raise InputError(_name(obj), "", f"cannot be read ({type(exc).__name__}: {exc})") from None


def _name(obj: Union[str, Callable[[], str]]) -> str:
    return obj if isinstance(obj, str) else obj()


SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")


def _input_error(exc: ValidationError, data: Any, obj: str) -> InputError:
    """The first problem of a ValidationError, as ``InputError(obj, json.path, problem)``."""
    error = exc.errors(include_url=False)[0]
    path = _json_path(error["loc"], data, error["type"])
    return InputError(obj, path, _problem(error))


def _json_path(loc: tuple, data: Any, error_type: str) -> str:
    """``('spec', 'containers', 0, 'name')`` → ``spec.containers[0].name``.

    Steps pydantic adds that are not in the input (union member names such as ``int``,
    validator tags) are dropped by walking the input alongside the location.
    """
    out = ""
    node = data
    last = len(loc) - 1
    for i, step in enumerate(loc):
        if isinstance(node, dict) and step in node:
            node = node[step]
        elif isinstance(node, list) and isinstance(step, int) and 0 <= step < len(node):
            node = node[step]
        elif step == "[key]":
            continue  # the error is about the key itself, which the path already ends in
        elif not (i == last and error_type == "missing"):
            continue
        if isinstance(step, int):
            out += f"[{step}]"
        elif SIMPLE_KEY.match(str(step)):
            out += f".{step}" if out else str(step)
        else:
            out += f"[{json.dumps(str(step))}]"
    return out


_PREFIXES = ("Value error, ", "Assertion failed, ")


def _problem(error: ErrorDetails) -> str:
    kind = error["type"]
    value = error.get("input")
    ctx = error.get("ctx") or {}
    shown = describe(value)
    if kind == "missing":
        return "required field is missing"
    if kind in ("value_error", "assertion_error"):
        msg = error["msg"]
        for prefix in _PREFIXES:
            if msg.startswith(prefix):
                return msg[len(prefix):]
        return msg
    if kind == "literal_error":
        expected = ctx.get("expected", "")
        if isinstance(value, (int, float)) and not isinstance(value, bool) and f"'{value}'" in expected:
            # YAML read `1.34` as a number; the allowed value is the string.
            return f"{value} was read as a number; quote it (\"{value}\"): expected {expected}"
        return f"unknown value {shown}, expected {expected}".rstrip(", ")
    if kind.startswith("int_"):
        return f"{shown} is not an integer"
    if kind.startswith("bool_"):
        return f"{shown} is not a boolean"
    if kind.startswith("float_"):
        return f"{shown} is not a number"
    if kind.startswith("string_type"):
        return f"{shown} is not a string"
    if kind.startswith(("datetime_", "date_")):
        return f"{shown} is not a timestamp"
    if kind in ("dict_type", "model_type", "model_attributes_type"):
        return f"expected a mapping, got {shown}"
    if kind in ("list_type", "tuple_type"):
        return f"expected a list, got {shown}"
    if kind in ("too_short", "string_too_short"):
        minimum = ctx.get("min_length")
        return "must not be empty" if minimum == 1 else f"needs at least {minimum} items"
    if kind == "too_long":
        return f"takes at most {ctx.get('max_length')} items"
    if kind == "greater_than_equal":
        return f"{shown} is below the minimum {_number(ctx.get('ge'))}"
    if kind == "greater_than":
        return f"{shown} must be greater than {_number(ctx.get('gt'))}"
    if kind == "less_than_equal":
        return f"{shown} is above the maximum {_number(ctx.get('le'))}"
    if kind == "less_than":
        return f"{shown} must be less than {_number(ctx.get('lt'))}"
    if kind == "extra_forbidden":
        return "unknown key"
    return f"{error['msg']} (got {shown})"


def _number(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def describe(value: Any) -> str:
    """A short rendering of an input value, never recursing into containers."""
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    if value is None or isinstance(value, (bool, int, float, str)):
        try:
            return clipped(json.dumps(value, ensure_ascii=False))
        except ValueError:  # an integer longer than Python writes out (sys.get_int_max_str_digits)
            return "a number too long to show"
    return type(value).__name__


def too_many_digits(digits: int) -> str:
    """What is wrong with an integer longer than Python reads (``sys.get_int_max_str_digits``),
    said without the digits: a JSON or YAML reader refuses one before any model sees it."""
    return f"an integer of {digits} digits is too long (at most {sys.get_int_max_str_digits()} are read)"
