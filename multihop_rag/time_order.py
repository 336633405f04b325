"""Questions that ask which of two options comes first or later in time ("Which film came out first, X or Y?") or
lived longer ("Who lived to an older age, X or Y?"), decided from one year, or one life's length, per option (ours):
given both years, the 1.5B named the later film for "came out first" as often as the earlier one. The methods find
the years their own way (HiRAG in its sub-answers, either in a reply of its reading to :meth:`TimeComparison.prompt`);
the order and the pick are here."""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from multihop_rag.metrics import answer_in_text, comparison_options

__all__ = ["YEARS", "YEARS_OF_LIFE", "TimeComparison", "lines_by_option", "time_comparison", "years_by_option"]

YEARS = (
    "The following are given reference: {reference}\n"
    "Question: {question}\n"
    "Do not answer it yet. For each of the two, find in the reference the date the question compares: the birth, "
    "death, release or founding it asks about, of the very person or work it asks about. Reply with two lines, each "
    "the name as written, a colon, whose date it is and the date (\"unknown\" if the reference does not give it):\n"
    "{first}:\n{second}:"
)
"""Asked of a method's reading (``reference``) for each option's date, read by :func:`years_by_option`."""

YEARS_OF_LIFE = (
    "The following are given reference: {reference}\n"
    "Question: {question}\n"
    "Do not answer it yet. For each of the two, find in the reference the years of birth and death of the very person "
    "it asks about. Reply with two lines, each the name as written, a colon, and the two years (\"unknown\" if the "
    "reference does not give them):\n"
    "{first}:\n{second}:"
)
""":data:`YEARS` for a question comparing how long two people lived ("Who lived longer, X or Y?")."""

_YEAR = re.compile(r"\b(?:([1-9][0-9]{0,3})\s*(?:BCE?\b|B\.C\.)|([1-9][0-9]{2}|1[0-9]{3}|20[0-9]{2})\b)")
_SPAN = re.compile(r"\b([1-9][0-9]{2,3})\s*(?:-|–|—)\s*([1-9][0-9]{2,3})\b")
_EARLIER = re.compile(r"\b(?:earlier|earliest|first|older|oldest|before)\b", re.IGNORECASE)
_LATER = re.compile(r"\b(?:later|latest|last|more recent(?:ly)?|most recent(?:ly)?|younger|youngest|newer|newest)\b",
                    re.IGNORECASE)
_BORN, _DIED = re.compile(r"\b(?:born|birth)\b", re.IGNORECASE), re.compile(r"\b(?:die|died|death)\b", re.IGNORECASE)
_AGE = re.compile(r"\b(?:older|oldest|younger|youngest)\b", re.IGNORECASE)
_OF_ANOTHER = re.compile(r"\b(?:whose|ha[sd] the)\b", re.IGNORECASE)
_LIFESPAN = re.compile(r"\blived\b.*\b(?:longer|longest|older|oldest)\b|\blonge(?:r|st) li(?:fe|ves)\b", re.IGNORECASE)


def _years(text: str) -> list[int]:
    """The years (100–2099, negative before the common era: "551 BC") a text names, in its order. A number of three
    digits is a year only in a text naming no year of four digits, or in a span of years ("950–1020"): not the volume
    and page of "429 U.S. 190 (1976)"."""
    found = list(_YEAR.finditer(text))
    in_spans = {span.start(side) for span in _SPAN.finditer(text) for side in (1, 2)}
    any_four = any(len(year.group(2) or "") == 4 for year in found)
    return [-int(year.group(1)) if year.group(1) else int(year.group(2)) for year in found
            if year.group(1) or len(year.group(2)) == 4 or not any_four or year.start(2) in in_spans]


@dataclass(frozen=True)
class TimeComparison:
    """A question's two options, whether it asks for the later (or longer) one, the events (born, died) it names, what
    of a life it compares: "born" (also for "older", "younger"), "died", "span" (its length: "lived longer"), or None
    (a film's release, a founding), and whether the dates are another's, a hop behind each option ("Which film has the
    director born earlier, X or Y?", "whose director")."""

    options: tuple[str, str]
    later: bool
    events: tuple[re.Pattern[str], ...]
    life: Literal["born", "died", "span"] | None
    of_another: bool = False

    def prompt(self, question: str, reference: str) -> str:
        """The request to a reading (``reference``) for each option's date, or years of life for a life's length."""
        template = YEARS_OF_LIFE if self.life == "span" else YEARS
        return template.format(reference=reference, question=question, first=self.options[0], second=self.options[1])

    def names_its_event(self, text: str) -> bool:
        """Whether ``text`` (a sub-question) names every event the question does ("born" for "born later")."""
        return all(event.search(text) for event in self.events)

    def year_in(self, text: str, option: str) -> int | None:
        """The year ``text`` gives ``option``, besides the years in its name: the one year it names or, for a life's
        end, the first year (born) or the last (died) of a text giving a life's span ("Odile Brask (4 March 1881 –
        1950)"); for a life's length, the years from the first to the last (70 for "1820 – 1890"). None for no year,
        several where no life's end is asked, or for a length one year or a last year before the first."""
        own = set(_years(option))
        years = [year for year in _years(text) if year not in own]
        if self.life == "span":
            return years[-1] - years[0] if len(years) > 1 and years[-1] > years[0] else None
        if len(set(years)) == 1 or (years and self.life):
            return years[-1] if self.life == "died" else years[0]
        return None

    def decide(self, reply: str) -> tuple[str, str] | None:
        """The option a reply to :meth:`prompt` picks, and why: :meth:`pick` of :func:`years_by_option`."""
        return self.pick(years_by_option(reply, self))

    def pick(self, years: Mapping[str, int]) -> tuple[str, str] | None:
        """The option the years pick and a line saying why; None unless both options have a year and they differ."""
        first, second = self.options
        if first not in years or second not in years or years[first] == years[second]:
            return None
        picked = (max if self.later else min)(self.options, key=years.__getitem__)
        if self.life == "span":
            return picked, f"By years lived: {first} {years[first]}, {second} {years[second]}; longer: {picked}."
        return picked, f"By year: {first} {years[first]}, {second} {years[second]}; {'later' if self.later else 'earlier'}: {picked}."


def time_comparison(question: str) -> TimeComparison | None:
    """The comparison of a question naming two options and, before them, a life's length ("lived longer", "lived to
    an older age", "a longer life") or one direction in time ("first", "earlier", "older" / "later", "more recently",
    "younger"); None otherwise ("Which is taller, X or Y?")."""
    options = comparison_options(question)
    if options is None:
        return None
    stem = question[: question.rfind(options[0])]
    of_another = bool(_OF_ANOTHER.search(stem))
    if _LIFESPAN.search(stem):
        return TimeComparison(options, True, (), "span", of_another)
    earlier, later = bool(_EARLIER.search(stem)), bool(_LATER.search(stem))
    if earlier == later:
        return None
    events = tuple(event for event in (_BORN, _DIED) if event.search(stem))
    life: Literal["born", "died", "span"] | None = (
        "died" if _DIED in events else "born" if _BORN in events or _AGE.search(stem) else None
    )
    return TimeComparison(options, later, events, life, of_another)


def lines_by_option(reply: str, options: tuple[str, str]) -> dict[str, str]:
    """Each option's line in a reply listing them a line each: the first line naming it and not the other option."""
    lines: dict[str, str] = {}
    for line in reply.splitlines():
        named = [option for option in options if answer_in_text(line, option)]
        if len(named) == 1:
            lines.setdefault(named[0], line)
    return lines


def years_by_option(reply: str, comparison: TimeComparison) -> dict[str, int]:
    """Each option's year from a reply listing them a line each ("X: born 4 March 1881"): :meth:`TimeComparison.year_in`
    of the first line naming it and not the other option. An option without such a line, or without a year in it,
    is left out."""
    years = {option: comparison.year_in(line, option) for option, line in lines_by_option(reply, comparison.options).items()}
    return {option: year for option, year in years.items() if year is not None}
