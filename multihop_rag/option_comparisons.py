"""A question comparing two options that their own values decide: an order in time of their own dates
(:mod:`multihop_rag.time_order`) or a direction of amount (:mod:`multihop_rag.quantity_order`). A method asks its
reading :meth:`prompt` and picks by :meth:`decide`; anything undecided goes to its reader."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from multihop_rag.quantity_order import QuantityComparison, quantity_comparison
from multihop_rag.time_order import TimeComparison, time_comparison

__all__ = ["Comparison", "ComparisonKind", "comparison_kinds", "comparison_of"]

ComparisonKind = Literal["years", "quantities"]
Comparison = TimeComparison | QuantityComparison


def comparison_of(question: str, kinds: Sequence[ComparisonKind]) -> tuple[ComparisonKind, Comparison] | None:
    """The first of ``kinds`` the question is, with its comparison; a comparison in time only of the options' own
    dates (not "Which film has the director born earlier, X or Y?", whose dates are a hop behind each option)."""
    for kind in kinds:
        if kind == "quantities":
            found: Comparison | None = quantity_comparison(question)
        else:
            in_time = time_comparison(question)
            found = None if in_time is None or in_time.of_another else in_time
        if found is not None:
            return kind, found
    return None


def comparison_kinds(*, years: bool, quantities: bool) -> list[ComparisonKind]:
    """The kinds a method's ``compare_years`` and ``compare_quantities`` settings turn on, in the order tried."""
    settings: tuple[tuple[ComparisonKind, bool], ...] = (("years", years), ("quantities", quantities))
    return [kind for kind, on in settings if on]
