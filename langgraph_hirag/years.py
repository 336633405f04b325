"""A question naming two options and an order in time ("Which film came out first, X or Y?") answered from the
years its sub-answers give (``compare_years``, ours): with both years in hand, the 1.5B named the later film for
"came out first" as often as the earlier one."""

from __future__ import annotations

import re
from collections.abc import Sequence

from multihop_rag.metrics import answer_in_text
from multihop_rag.time_order import time_comparison

__all__ = ["option_by_year"]

_ASKS_WHEN = re.compile(r"^\s*(?:when\b|(?:in )?(?:what|which) year\b)", re.IGNORECASE)


def option_by_year(question: str, sub_questions: Sequence[str], sub_answers: Sequence[str]) -> tuple[str, str] | None:
    """The option the question's order picks (the earlier year for "first", "older", "earlier"; the later for "later",
    "younger", "more recently") and a line saying why, or None unless every condition holds: the question names two
    options and one direction; for each option exactly one year (:meth:`~multihop_rag.time_order.TimeComparison.year_in`),
    from the answers to sub-questions that ask when (or in what year) about that option alone and, where the question
    says born or died, about that event; two different years."""
    comparison = time_comparison(question)
    if comparison is None:
        return None
    years: dict[str, int] = {}
    for option, other in (comparison.options, comparison.options[::-1]):
        read = [
            comparison.year_in(answer, option)
            for asked, answer in zip(sub_questions, sub_answers, strict=False)
            if answer and _ASKS_WHEN.match(asked) and answer_in_text(asked, option) and not answer_in_text(asked, other)
            and comparison.names_its_event(asked)
        ]
        found = {year for year in read if year is not None}
        if len(found) != 1:
            return None
        years[option] = found.pop()
    return comparison.pick(years)
