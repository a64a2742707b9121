"""Quantity grammar (SEMANTICS.md §1.1): exact parsing, and kube-scheduler's integer units."""

from __future__ import annotations

from fractions import Fraction

import pytest

from models.quantity import QuantityError, format_quantity, parse_quantity, to_units

# (text, exact value, cpu millicores, plain units) — units round up, as MilliValue/Value do.
VALID = [
    ("100m", Fraction(1, 10), 100, 1),
    ("1", Fraction(1), 1000, 1),
    ("1.5", Fraction(3, 2), 1500, 2),
    ("5.", Fraction(5), 5000, 5),
    (".5", Fraction(1, 2), 500, 1),
    ("250m", Fraction(1, 4), 250, 1),
    ("0.0001", Fraction(1, 10_000), 1, 1),
    ("128974848", Fraction(128974848), 128974848000, 128974848),
    ("129e6", Fraction(129_000_000), 129_000_000_000, 129_000_000),
    ("129M", Fraction(129_000_000), 129_000_000_000, 129_000_000),
    ("123Mi", Fraction(123 * 2**20), 123 * 2**20 * 1000, 128974848),
    ("1Gi", Fraction(2**30), 2**30 * 1000, 1073741824),
    ("0.5Gi", Fraction(2**29), 2**29 * 1000, 536870912),
    ("1G", Fraction(10**9), 10**12, 1_000_000_000),
    ("7901264Ki", Fraction(7901264 * 1024), 7901264 * 1024 * 1000, 8090894336),
    ("1k", Fraction(1000), 1_000_000, 1000),
    ("5E-3", Fraction(5, 1000), 5, 1),
    ("1e3", Fraction(1000), 1_000_000, 1000),
    ("2", Fraction(2), 2000, 2),
    ("+3", Fraction(3), 3000, 3),
    ("1n", Fraction(1, 10**9), 1, 1),
    ("1u", Fraction(1, 10**6), 1, 1),
    ("0", Fraction(0), 0, 0),
    ("-1", Fraction(-1), -1000, -1),
    ("-100m", Fraction(-1, 10), -100, 0),
]


@pytest.mark.parametrize(
    ("text", "value", "millicpu", "units"), VALID, ids=[case[0] for case in VALID]
)
def test_valid_quantities(text: str, value: Fraction, millicpu: int, units: int) -> None:
    parsed = parse_quantity(text)
    assert parsed == value
    assert to_units("cpu", parsed) == millicpu
    assert to_units("memory", parsed) == units


@pytest.mark.parametrize(
    ("raw", "value"),
    [
        pytest.param(2, Fraction(2), id="json-int"),
        pytest.param(0.5, Fraction(1, 2), id="json-float"),
        pytest.param(1e-10, Fraction(1, 10**9), id="finer-than-nano-rounds-up"),
    ],
)
def test_numbers_from_json_and_yaml(raw: object, value: Fraction) -> None:
    assert parse_quantity(raw) == value


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        pytest.param("1e", '"1e" is not a quantity', id="bare-e-is-invalid"),
        pytest.param("1K", '"1K" is not a quantity', id="upper-K-is-invalid"),
        # Python's \d takes other scripts' digits: cpu "٣" was read as 3 (the API server refuses it)
        pytest.param("\u0663", '"\u0663" is not a quantity', id="arabic-indic-digit-is-invalid"),
        pytest.param("1e\u0663", '"1e\u0663" is not a quantity', id="arabic-indic-exponent-is-invalid"),
        pytest.param("1ki", '"1ki" is not a quantity', id="lower-ki-is-invalid"),
        pytest.param("12x", '"12x" is not a quantity', id="unknown-suffix"),
        pytest.param("Mi", '"Mi" is not a quantity', id="suffix-without-number"),
        pytest.param("", '"" is not a quantity', id="empty"),
        pytest.param(".", '"." is not a quantity', id="lone-dot"),
        pytest.param("1.2.3", '"1.2.3" is not a quantity', id="two-dots"),
        pytest.param("1e31", '"1e31" is out of range', id="exponent-too-large"),
        pytest.param("1e999999999", '"1e999999999" is out of range', id="hostile-exponent"),
        pytest.param("9Ei", '"9Ei" is out of range', id="huge-binary"),
        pytest.param("99999999999999999999", '"99999999999999999999" is out of range', id="huge-digits"),
        pytest.param(True, "True is not a quantity", id="boolean"),
        pytest.param(None, "None is not a quantity", id="null"),
        pytest.param(float("nan"), "nan is not a quantity", id="nan"),
        # A long value is quoted only as far as says which it is, and digits past what Python
        # converts (4,300) are refused here rather than by int() with its own ValueError.
        pytest.param("x" * 5000, '"' + "x" * 77 + '..." is not a quantity', id="long-text-quoted-short"),
        pytest.param("9" * 5000, '"' + "9" * 77 + '..." has too many digits', id="digits-past-int-conversion"),
    ],
)
def test_invalid_quantities(raw: object, message: str) -> None:
    with pytest.raises(QuantityError) as info:
        parse_quantity(raw)
    assert str(info.value) == message


def test_largest_accepted_quantity() -> None:
    assert to_units("memory", parse_quantity("4Ei")) == 2**62


@pytest.mark.parametrize(
    ("resource", "units", "text"),
    [
        pytest.param("cpu", 2000, "2", id="whole-cores"),
        pytest.param("cpu", 1500, "1500m", id="millicores"),
        pytest.param("memory", 2**31, "2Gi", id="gibibytes"),
        pytest.param("memory", 3 * 2**20, "3Mi", id="mebibytes"),
        pytest.param("memory", 1000, "1000", id="odd-bytes"),
        pytest.param("pods", 110, "110", id="count"),
    ],
)
def test_format_quantity(resource: str, units: int, text: str) -> None:
    assert format_quantity(resource, units) == text


def test_units_beyond_int64_are_refused_after_conversion():
    # 2E is a valid quantity (2·10^18 bytes fit), but as cpu it is 2·10^21 millicores.
    from models.quantity import QuantityError, parse_quantity, to_units

    assert to_units("memory", parse_quantity("2E")) == 2 * 10**18
    with pytest.raises(QuantityError, match="out of range"):
        to_units("cpu", parse_quantity("2E"))
