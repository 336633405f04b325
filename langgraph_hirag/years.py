"""A question naming two options and an order in time ("Which film came out first, X or Y?") answered from the
years its sub-answers give (``compare_years``, ours): with both years in hand, the 1.5B named the later film for
"came out first" as often as the earlier one."""

from __future__ import annotations

import re
from collections.abc import Sequence

from multihop_rag.metrics import answer_in_text, comparison_options

__all__ = ["option_by_year"]

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})\b")
_EARLIER = re.compile(r"\b(?:earlier|earliest|first|older|oldest|before)\b", re.IGNORECASE)
_LATER = re.compile(r"\b(?:later|latest|last|more recent(?:ly)?|most recent(?:ly)?|younger|youngest|newer|newest)\b",
                    re.IGNORECASE)
_ASKS_WHEN = re.compile(r"^\s*(?:when\b|(?:in )?(?:what|which) year\b)", re.IGNORECASE)
_EVENTS = {"born": re.compile(r"\b(?:born|birth)\b", re.IGNORECASE),
           "died": re.compile(r"\b(?:die|died|death)\b", re.IGNORECASE)}


def option_by_year(question: str, sub_questions: Sequence[str], sub_answers: Sequence[str]) -> tuple[str, str] | None:
    """The option the question's order picks (the earlier year for "first", "older", "earlier"; the later for "later",
    "younger", "more recently") and a line saying why, or None unless every condition holds: the question names two
    options and one direction; for each option exactly one year, from the answers to sub-questions that ask when
    (or in what year) about that option alone and, where the question says born or died, about that event; two
    different years."""
    options = comparison_options(question)
    if options is None:
        return None
    stem = question[: question.rfind(options[0])]
    earlier, later = bool(_EARLIER.search(stem)), bool(_LATER.search(stem))
    if earlier == later:
        return None
    events = [pattern for pattern in _EVENTS.values() if pattern.search(stem)]
    years: dict[str, int] = {}
    for option, other in (options, options[::-1]):
        found = {
            int(year)
            for asked, answer in zip(sub_questions, sub_answers, strict=False)
            if answer and _ASKS_WHEN.match(asked) and answer_in_text(asked, option) and not answer_in_text(asked, other)
            and all(event.search(asked) for event in events)
            for year in _YEAR.findall(answer)
        }
        if len(found) != 1:
            return None
        years[option] = found.pop()
    first, second = options
    if years[first] == years[second]:
        return None
    picked = min(options, key=years.__getitem__) if earlier else max(options, key=years.__getitem__)
    return picked, f"By year: {first} {years[first]}, {second} {years[second]}; {'earlier' if earlier else 'later'}: {picked}."
