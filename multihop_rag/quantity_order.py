"""Questions that ask which of two options has more or less of something ("Which mountain is taller, X or Y?", "Which
genus has more species, X or Y?"), decided from one number per option (ours), as :mod:`multihop_rag.time_order`
decides an order in time. Which questions ask it, the prompt asking a method's reading for each option's number, and
the reading of the reply are here; each method asks its own reading."""

from __future__ import annotations

import re
from dataclasses import dataclass

from multihop_rag.metrics import comparison_options
from multihop_rag.time_order import lines_by_option, time_comparison

__all__ = ["QUANTITIES", "QuantityComparison", "quantity_comparison"]

QUANTITIES = (
    "The following are given reference: {reference}\n"
    "Question: {question}\n"
    "Do not answer it yet. For each of the two, find in the reference the number the question compares (a height, "
    "a length, a count of members, albums, awards or species) of the very thing it asks about. Reply with two lines, "
    "each the name as written, a colon, the number and its unit (\"unknown\" if the reference does not give it):\n"
    "{first}:\n{second}:"
)
"""Asked of a method's reading (``reference``) when :func:`quantity_comparison` finds a question comparing amounts."""

_MORE = re.compile(
    r"\b(?:more|most|greater|greatest|larger|largest|bigger|biggest|higher|highest|taller|tallest|longer|longest|"
    r"heavier|heaviest|deeper|deepest|wider|widest|numerous)\b", re.IGNORECASE)
_LESS = re.compile(
    r"\b(?:fewer|fewest|less|least|smaller|smallest|lower|lowest|shorter|shortest|lighter|lightest|shallower|"
    r"narrower)\b", re.IGNORECASE)
_NUMBER = re.compile(
    r"(?<![\w.])(\d{1,3}(?:,\d{3})+|\d+(?:\.\d+)?)(?:\s*(million|billion|thousand))?|"
    r"\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|sixteen|"
    r"seventeen|eighteen|nineteen|twenty)\b", re.IGNORECASE)
_WORDS = ("one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen sixteen seventeen "
          "eighteen nineteen twenty").split()
_SCALE = {"thousand": 1e3, "million": 1e6, "billion": 1e9}
_RANGE = re.compile(r"^\s*(?:-|–|—|to|until|and)\s*\d", re.IGNORECASE)
_UNIT = re.compile(r"^\s*([a-z]+)", re.IGNORECASE)
_UNITS = {
    "m": "m", "metre": "m", "metres": "m", "meter": "m", "meters": "m",
    "km": "km", "kilometre": "km", "kilometres": "km", "kilometer": "km", "kilometers": "km",
    "ft": "ft", "foot": "ft", "feet": "ft", "mi": "mi", "mile": "mi", "miles": "mi",
    "kg": "kg", "kilogram": "kg", "kilograms": "kg", "lb": "lb", "lbs": "lb", "pound": "lb", "pounds": "lb",
}
"""Other names of units of length and weight ("metres" is "m")."""


def _amount(value: str) -> tuple[float, str] | None:
    """The first number of a line's value ("8,035 m (26,362 ft)" -> 8035, "m"; "25 million records" -> 25e6,
    "record"; "seven") and its unit, the word after it in the singular ("" for none); None for no number or a range
    ("1978 to 1996")."""
    match = _NUMBER.search(value)
    if match is None or _RANGE.match(value[match.end():]):
        return None
    digits, scale, spelled = match.groups()
    if spelled:
        number = float(_WORDS.index(spelled.lower()) + 1)
    else:
        number = float(digits.replace(",", "")) * _SCALE.get((scale or "").lower(), 1)
    after = _UNIT.match(value[match.end():])
    unit = after.group(1).lower() if after else ""
    return number, _UNITS.get(unit, unit.removesuffix("s"))


@dataclass(frozen=True)
class QuantityComparison:
    """A question's two options and whether it asks for the one with more (taller, higher, most) or less."""

    options: tuple[str, str]
    more: bool

    def prompt(self, question: str, reference: str) -> str:
        """The request to a reading (``reference``) for each option's number (:data:`QUANTITIES`)."""
        return QUANTITIES.format(reference=reference, question=question, first=self.options[0], second=self.options[1])

    def amounts(self, reply: str) -> dict[str, float]:
        """Each option's number from a reply listing them a line each ("Gasherbrum II: 8,035 m"): the first number of
        its line (:func:`~multihop_rag.time_order.lines_by_option`). Left out: an option without such a line or number, and
        both options when their units differ (metres against feet, "18 years" against "1780")."""
        found: dict[str, tuple[float, str]] = {}
        for option, line in lines_by_option(reply, self.options).items():
            own = {number for number, _ in filter(None, map(_amount, option.split()))}
            amount = _amount(line.partition(":")[2] if ":" in line else line)
            if amount is not None and amount[0] not in own:
                found[option] = amount
        units = {unit for _, unit in found.values()}
        return {} if len(units) > 1 else {option: number for option, (number, _) in found.items()}

    def decide(self, reply: str) -> tuple[str, str] | None:
        """The option a reply to :meth:`prompt` picks, and why: :meth:`pick` of :meth:`amounts`."""
        return self.pick(self.amounts(reply))

    def pick(self, amounts: dict[str, float]) -> tuple[str, str] | None:
        """The option the numbers pick and a line saying why; None unless both options have one and they differ."""
        first, second = self.options
        if first not in amounts or second not in amounts or amounts[first] == amounts[second]:
            return None
        picked = (max if self.more else min)(self.options, key=amounts.__getitem__)
        return picked, f"By number: {first} {amounts[first]:g}, {second} {amounts[second]:g}; {'more' if self.more else 'less'}: {picked}."


def quantity_comparison(question: str) -> QuantityComparison | None:
    """The comparison of a question naming two options and, before them, one direction of amount ("more", "taller",
    "most" / "fewer", "smaller"); None otherwise, and for a comparison in time (:func:`time_comparison`: "lived
    longer", "older")."""
    options = comparison_options(question)
    if options is None or time_comparison(question) is not None:
        return None
    stem = question[: question.rfind(options[0])]
    more, less = bool(_MORE.search(stem)), bool(_LESS.search(stem))
    return QuantityComparison(options, more) if more != less else None
