"""Questions that ask whether two things they name share a country ("Are X and Y from the same country?", "Were X and
Y of the same nationality?"), decided from one country for each (ours): after three rounds, ReSP's generator on the
1.5B answered "No" to 6 of 2Wiki's 11 such tuning questions whose answer is "Yes". Which questions ask it, the prompt
that asks a method's reading for each thing's country (:data:`COUNTRIES`) and the reading of its reply are here, in
the shape of :mod:`multihop_rag.time_order`'s and :mod:`multihop_rag.quantity_order`'s comparisons."""

from __future__ import annotations

import re
from dataclasses import dataclass

from multihop_rag.metrics import countries_named, normalize_answer

__all__ = ["COUNTRIES", "SameCountry", "asks_same_country", "same_country", "same_country_question"]

COUNTRIES = (
    "The following are given reference: {reference}\n"
    "Question: {question}\n"
    "Do not answer it yet. For each of the two the question compares, find in the reference the country it asks "
    "about: the nationality of the very person, or the country of the very place or work, it asks about. Reply with "
    "two lines, each its name as written, a colon and the country (\"unknown\" if the reference does not give it)."
)
"""Asked of a method's reading (``reference``) when the question asks whether two things share a country;
:func:`same_country` reads the reply."""

_SAME_COUNTRY = re.compile(r"\bsame\s+(?:country|nationality)\b", re.IGNORECASE)
_IN_THE_UNITED_KINGDOM = {"england", "scotland", "wales", "northern ireland"}


def asks_same_country(question: str) -> bool:
    """Whether a question asks if two things share a country or a nationality."""
    return bool(_SAME_COUNTRY.search(question))


def _country(value: str) -> str | None:
    """The one country a line's value names (England, Scotland, Wales and Northern Ireland as the United Kingdom,
    whose citizenship they share); None for none or several."""
    found = {"united kingdom" if c in _IN_THE_UNITED_KINGDOM else c for c in countries_named(value)}
    return found.pop() if len(found) == 1 else None


def same_country(reply: str) -> bool | None:
    """Whether the two things a reply lists, a line each, share their country: its first two lines of
    the form "name: value", with different names and one country in each value; None when they do not give that
    ("unknown", two countries in a line, one line)."""
    lines = [(name, value) for name, colon, value in (line.partition(":") for line in reply.splitlines())
             if colon and value.strip()][:2]
    if len(lines) != 2 or normalize_answer(lines[0][0]) == normalize_answer(lines[1][0]):
        return None
    first, second = (_country(value) for _, value in lines)
    return None if first is None or second is None else first == second


@dataclass(frozen=True)
class SameCountry:
    """A question asking whether two things share a country: the request to a reading and its decision."""

    def prompt(self, question: str, reference: str) -> str:
        """The request to a reading (``reference``) for each thing's country (:data:`COUNTRIES`)."""
        return COUNTRIES.format(reference=reference, question=question)

    def decide(self, reply: str) -> tuple[str, str] | None:
        """"Yes" or "No" from a reply to :meth:`prompt` (:func:`same_country`), and the reply as why; None undecided."""
        same = same_country(reply)
        return None if same is None else ("Yes" if same else "No", reply.strip())


def same_country_question(question: str) -> SameCountry | None:
    """The comparison of a question asking whether two things share a country (:func:`asks_same_country`), else None."""
    return SameCountry() if asks_same_country(question) else None
