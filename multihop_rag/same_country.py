"""Questions that ask whether two things they name share a country ("Are X and Y from the same country?", "Were X and
Y of the same nationality?"), decided from one country for each (ours): after three rounds, ReSP's generator on the
1.5B answered "No" to 6 of 2Wiki's 11 such tuning questions whose answer is "Yes". Which questions ask it, and the
reading of a reply giving each thing's country a line each, are here; a method asks its own reading for that reply
(ReSP: ``prompts.COUNTRIES``)."""

from __future__ import annotations

import re

from multihop_rag.metrics import countries_named, normalize_answer

__all__ = ["asks_same_country", "same_country"]

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
