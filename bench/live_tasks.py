"""The live benchmark's small real coding tasks: three house conventions a model cannot guess.

Each task asks for one function in a tiny repository; hidden unit tests check it against a
convention of *this* repository (money as ``Decimal`` cents, slugs joined by underscores,
timestamps as UTC with a trailing ``Z``). A model that has never worked here usually misses the
convention; the failing test says why, which is what memory can carry to the next task of the
same kind, phrased differently.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class LiveTask:
    """One coding task: what the agent is told, the stub it edits, the hidden test."""

    family: str
    module: str
    function: str
    prompt: str
    stub: str
    test: str

    @property
    def text(self) -> str:
        """The task as memory records and recalls it."""
        return f"{self.function} in {self.module}.py: {self.prompt}"


def _stub(function: str, args: str, doc: str) -> str:
    return f'def {function}({args}):\n    """{doc}"""\n    raise NotImplementedError\n'


_MONEY_TEST = """
import unittest
from decimal import Decimal
from {module} import {function}


class T(unittest.TestCase):
    def test_total(self):
        got = {function}({arg})
        self.assertIsInstance(got, Decimal, "amounts in this repo are decimal.Decimal quantized "
                              "to cents, never float; got " + type(got).__name__ + " " + repr(got))
        self.assertEqual(got, Decimal("{want}"))
        self.assertEqual(got.as_tuple().exponent, -2, "quantize to cents: Decimal('0.01')")


unittest.main()
"""

_SLUG_TEST = """
import unittest
from {module} import {function}


class T(unittest.TestCase):
    def test_key(self):
        for given, want in {cases!r}:
            got = {function}(given)
            self.assertEqual(got, want, "this repo's keys are lowercase ASCII words joined by "
                             "underscores (no hyphens, no punctuation); got " + repr(got))


unittest.main()
"""

_TIME_TEST = """
import unittest
from datetime import datetime, timedelta, timezone
from {module} import {function}


class T(unittest.TestCase):
    def test_format(self):
        got = {function}({arg})
        self.assertEqual(got, "{want}", "timestamps in this repo are UTC, ISO 8601 to the "
                         "second, with a trailing Z (not +00:00); got " + repr(got))


unittest.main()
"""

_SLUG_CASES = [("Hello, World!", "hello_world"), ("  Ünïcode  Title 2 ", "unicode_title_2")]
_AWARE = "datetime(2026, 1, 2, 3, 4, 5, 678, tzinfo=timezone(timedelta(hours=2)))"


def _money(module: str, function: str, args: str, prompt: str, arg: str, want: str) -> LiveTask:
    test = _MONEY_TEST.format(module=module, function=function, arg=arg, want=want)
    return LiveTask("money", module, function, prompt, _stub(function, args, prompt), test)


def _slug(module: str, function: str, args: str, prompt: str) -> LiveTask:
    test = _SLUG_TEST.format(module=module, function=function, cases=_SLUG_CASES)
    return LiveTask("keys", module, function, prompt, _stub(function, args, prompt), test)


def _time(module: str, function: str, args: str, prompt: str, arg: str) -> LiveTask:
    test = _TIME_TEST.format(module=module, function=function, arg=arg, want="2026-01-02T01:04:05Z")
    return LiveTask("timestamps", module, function, prompt, _stub(function, args, prompt), test)


TASKS: tuple[LiveTask, ...] = (
    _money(
        "orders",
        "order_total",
        "lines",
        "Return the total of an order; lines are (unit_price, quantity) pairs, prices as "
        "strings like '19.99'.",
        '[("19.99", 3), ("0.015", 2)]',
        "60.00",
    ),
    _money(
        "cart",
        "cart_sum",
        "prices",
        "Add up a shopping cart: a list of price strings like '2.50'.",
        '["2.50", "0.10", "0.20"]',
        "2.80",
    ),
    _money(
        "invoice",
        "amount_due",
        "items",
        "What the customer owes for an invoice: items are dicts with 'price' (a string) and "
        "'qty' (an int).",
        '[{"price": "0.10", "qty": 3}, {"price": "1.05", "qty": 1}]',
        "1.35",
    ),
    _slug("slugs", "slugify", "title", "Turn an article title into the key used in its URL."),
    _slug("tags", "tag_key", "name", "Turn a tag's display name into its storage key."),
    _slug("labels", "label_id", "label", "Derive an identifier from a user-visible label."),
    _time("stamps", "stamp", "dt", "Format a timezone-aware datetime for the public API.", _AWARE),
    _time(
        "logtime",
        "log_time",
        "ts",
        "Render a POSIX timestamp (float seconds) for our log lines.",
        "datetime(2026, 1, 2, 1, 4, 5, 678, tzinfo=timezone.utc).timestamp()",
    ),
    _time("wire", "to_wire", "dt", "Serialise a datetime for JSON payloads we send.", _AWARE),
)
