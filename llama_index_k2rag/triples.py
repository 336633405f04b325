"""The knowledge-graph extractor's reply read line by line as ``(subject, relation, object)`` triples.

LlamaIndex's own parser (``default_parse_triplets_fn``) drops every line that does not split into exactly three
fields at its commas, and cuts a field at its first closing parenthesis. A 1.5B model writes a fifth to a quarter
of its triple lines so — ``(Hollowick, formed in, Oshawa, Ontario)``, ``(Walken, appeared in, Annie Hall (1977))``
— and those were lost without a word (issue 41: 26 % of the lines on HotpotQA's tuning pool). Here a field may hold
commas (the object takes the rest of the line) and parentheses, and a line missing its opening parenthesis is read;
a line that is still no triple (two fields, an empty or over-long field, a reply cut mid-line) is skipped and
counted by reason, never kept as a fragment. Fields are normalised as LlamaIndex's are (quotes stripped,
capitalised), so a graph's entity names do not depend on which parser read them.
"""

from __future__ import annotations

import csv
from collections import Counter

__all__ = ["TripleParser"]

MAX_FIELD_BYTES = 128
"""LlamaIndex's limit: a longer field is a sentence, not an entity or a relation."""


class TripleParser:
    """A ``parse_fn`` for LlamaIndex's ``SimpleLLMPathExtractor`` that repairs loose triples and counts the
    lines it skips (``skipped``: reason -> lines)."""

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()

    def __call__(self, reply: str) -> list[tuple[str, str, str]]:
        triples = []
        for line in reply.split("\n"):
            triple_or_reason = _triple(" ".join(line.split()))  # a carriage return or U+2028 inside: a space
            if isinstance(triple_or_reason, tuple):
                triples.append(triple_or_reason)
            elif triple_or_reason:
                self.skipped[triple_or_reason] += 1
        return triples


def _triple(line: str) -> tuple[str, str, str] | str:
    """The line's triple, or why it is none ("" for a blank line)."""
    if not line:
        return ""
    if ")" not in line:
        return "unclosed" if "(" in line else "not a triple"
    if not line.rstrip(".,;").endswith(")"):
        return "unclosed"  # text after the last parenthesis: a reply cut inside a field that held one
    start = line.index("(") + 1 if "(" in line and line.index("(") < line.index(")") else 0
    inside = line[start : line.rindex(")")]
    fields = [field.strip().strip('"').strip() for field in next(csv.reader([inside], skipinitialspace=True))]
    if len(fields) < 3:
        return "not a triple"
    subject, relation, obj = fields[0], fields[1], ", ".join(fields[2:])
    if not (subject and relation and obj):
        return "empty field"
    if any(len(field.encode("utf-8")) > MAX_FIELD_BYTES for field in (subject, relation, obj)):
        return "field too long"
    return subject.capitalize(), relation.capitalize(), obj.capitalize()
