"""Questions that ask which of two options comes first or later in time ("Which film came out first, X or Y?"),
decided from one year per option (ours): given both years, the 1.5B named the later film for "came out first" as
often as the earlier one. The methods find the years their own way (HiRAG in its sub-answers, ReSP in a reply
listing them); the order and the pick are here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from multihop_rag.metrics import answer_in_text, comparison_options

__all__ = ["TimeComparison", "time_comparison", "years_by_option", "years_in"]

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_EARLIER = re.compile(r"\b(?:earlier|earliest|first|older|oldest|before)\b", re.IGNORECASE)
_LATER = re.compile(r"\b(?:later|latest|last|more recent(?:ly)?|most recent(?:ly)?|younger|youngest|newer|newest)\b",
                    re.IGNORECASE)
_EVENTS = (re.compile(r"\b(?:born|birth)\b", re.IGNORECASE), re.compile(r"\b(?:die|died|death)\b", re.IGNORECASE))


def years_in(text: str) -> set[int]:
    """The years (1000–2099) a text names."""
    return {int(year) for year in _YEAR.findall(text)}


@dataclass(frozen=True)
class TimeComparison:
    """A question's two options, whether it asks for the later one, and the events (born, died) it names."""

    options: tuple[str, str]
    later: bool
    events: tuple[re.Pattern[str], ...]

    def names_its_event(self, text: str) -> bool:
        """Whether ``text`` (a sub-question) names every event the question does ("born" for "born later")."""
        return all(event.search(text) for event in self.events)

    def pick(self, years: Mapping[str, int]) -> tuple[str, str] | None:
        """The option the years pick and a line saying why; None unless both options have a year and they differ."""
        first, second = self.options
        if first not in years or second not in years or years[first] == years[second]:
            return None
        picked = (max if self.later else min)(self.options, key=years.__getitem__)
        return picked, f"By year: {first} {years[first]}, {second} {years[second]}; {'later' if self.later else 'earlier'}: {picked}."


def time_comparison(question: str) -> TimeComparison | None:
    """The comparison of a question naming two options and one direction in time before them ("first", "earlier",
    "older" / "later", "more recently", "younger"); None otherwise ("Who lived longer, X or Y?" has no direction)."""
    options = comparison_options(question)
    if options is None:
        return None
    stem = question[: question.rfind(options[0])]
    earlier, later = bool(_EARLIER.search(stem)), bool(_LATER.search(stem))
    if earlier == later:
        return None
    return TimeComparison(options, later, tuple(event for event in _EVENTS if event.search(stem)))


def years_by_option(reply: str, options: tuple[str, str]) -> dict[str, int]:
    """Each option's year from a reply listing them a line each ("X: born 4 March 1881"): the one year its line
    names besides the option's own; an option whose lines name none, or more than one, is left out."""
    found: dict[str, set[int]] = {option: set() for option in options}
    for line in reply.splitlines():
        named = [option for option in options if answer_in_text(line, option)]
        if len(named) == 1:
            found[named[0]] |= years_in(line) - years_in(named[0])
    return {option: years.pop() for option, years in found.items() if len(years) == 1}
