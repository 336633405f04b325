"""Questions that ask whether two things they name share a country ("Are X and Y from the same country?", "Were X and
Y of the same nationality?"), decided from one country for each (ours): after three rounds, ReSP's generator on the
1.5B answered "No" to 6 of 2Wiki's 11 such tuning questions whose answer is "Yes". The prompt and the reading of its
reply are here; a method asks it over its own reading."""

from __future__ import annotations

import re

from multihop_rag.metrics import countries_named, normalize_answer

__all__ = ["COUNTRIES_PROMPT", "asks_same_country", "countries_prompt", "same_country"]

_SAME_COUNTRY = re.compile(r"\bsame\s+(?:country|nationality)\b", re.IGNORECASE)
_IN_THE_UNITED_KINGDOM = {"england", "scotland", "wales", "northern ireland"}

COUNTRIES_PROMPT = (
    "The following are given reference: {reference}\n"
    "Question: {question}\n"
    "Do not answer it yet. For each of the two the question compares, find in the reference the country it asks "
    "about: the nationality of the very person, or the country of the very place or work, it asks about. Reply with "
    "two lines, each its name as written, a colon and the country (\"unknown\" if the reference does not give it)."
)
"""Ours: a method's reading (``reference``) asked for the country of each of the two, a line each, before its reader
answers; :func:`same_country` reads the reply."""


def asks_same_country(question: str) -> bool:
    """Whether a question asks if two things share a country or a nationality."""
    return bool(_SAME_COUNTRY.search(question))


def countries_prompt(question: str, reference: str) -> str:
    """:data:`COUNTRIES_PROMPT` for ``question`` over ``reference``."""
    return COUNTRIES_PROMPT.format(reference=reference, question=question)


def _country(value: str) -> str | None:
    """The one country a line's value names (England, Scotland, Wales and Northern Ireland as the United Kingdom,
    whose citizenship they share); None for none or several."""
    found = {"united kingdom" if c in _IN_THE_UNITED_KINGDOM else c for c in countries_named(value)}
    return found.pop() if len(found) == 1 else None


def same_country(reply: str) -> bool | None:
    """Whether the two things a reply to :data:`COUNTRIES_PROMPT` lists share their country: its first two lines of
    the form "name: value", with different names and one country in each value; None when they do not give that
    ("unknown", two countries in a line, one line)."""
    lines = [(name, value) for name, colon, value in (line.partition(":") for line in reply.splitlines())
             if colon and value.strip()][:2]
    if len(lines) != 2 or normalize_answer(lines[0][0]) == normalize_answer(lines[1][0]):
        return None
    first, second = (_country(value) for _, value in lines)
    return None if first is None or second is None else first == second
