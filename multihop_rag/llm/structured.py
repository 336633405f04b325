"""JSON and labels (Yes/No, …) from small local models, reliably.

The ladder, for every call:
1. constrained decoding where the backend has it: Ollama's and our llama.cpp adapters'
   ``format=<JSON schema>``, with a token cap sized from what the schema allows
   (:func:`schema_token_budget`: 30 facts need far more than 512 tokens);
2. repair of what came back (code fences, trailing prose, single quotes, trailing commas) with
   ``json_repair``, then validation against a pydantic model;
3. a reply cut at the token limit is never taken as it is: it is asked again with twice the cap
   (and a request to be brief), and if it is still cut, only its complete items are kept — the
   fragment the model was writing is dropped (:func:`salvage`) — and counted as ``salvaged``; a reply
   whose JSON stops mid-way without saying so (:func:`stops_mid_way`) is asked again the same way,
   never repaired into a fragment;
4. a bounded retry that tells the model what was wrong;
5. give up: log a warning, count it, return ``None`` (or the default label) — never raise
   inside an index build.

Works with LlamaIndex ``LLM`` objects and LangChain chat models alike, synchronously or async
(the ladder is one :data:`~multihop_rag.llm.calls.Dialogue`). Counts go to :data:`STATS`
(process-wide) and to the ``stats`` object a caller passes.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, TypeVar

import json_repair
from pydantic import BaseModel, ValidationError, create_model

from multihop_rag.llm.calls import AnyLLM, Call, Dialogue, Reply, arun, run

__all__ = [
    "StructuredStats",
    "STATS",
    "parse_json",
    "parse_label",
    "salvage",
    "stops_mid_way",
    "schema_token_budget",
    "json_dialogue",
    "label_dialogue",
    "label_probability",
    "label_probability_dialogue",
    "generate_json",
    "agenerate_json",
    "generate_label",
    "agenerate_label",
]

log = logging.getLogger(__name__)
T = TypeVar("T", bound=BaseModel)

OUTCOMES = ("first_try", "repaired", "retried", "salvaged", "failed")


@dataclass
class StructuredStats:
    """Counts of structured calls, how each ended, and what the replies carried."""

    calls: int = 0
    """Structured requests made (one per generate_* call)."""
    first_try: int = 0
    """Valid straight away."""
    repaired: int = 0
    """Valid after repairing the text (fences, quotes, trailing commas …)."""
    retried: int = 0
    """Valid only after asking again."""
    salvaged: int = 0
    """Cut at the token limit on every try: the complete items were kept, the fragment dropped."""
    failed: int = 0
    """Given up on: skipped with a warning (JSON) or given the default (labels)."""
    truncated: int = 0
    """Replies that stopped at the token limit (each try counts; a larger cap was asked next)."""
    thinking: int = 0
    """Replies that carried a thinking block, removed before parsing."""
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, outcome: str) -> None:
        with self._lock:
            self.calls += 1
            setattr(self, outcome, getattr(self, outcome) + 1)

    def note(self, reply: Reply) -> None:
        """Count what one reply carried (a cut, a thinking block)."""
        with self._lock:
            self.truncated += reply.truncated
            self.thinking += reply.thinking

    def as_dict(self) -> dict[str, int]:
        return {f.name: getattr(self, f.name) for f in fields(self) if not f.name.startswith("_")}


STATS = StructuredStats()
"""Process-wide counts of every structured call."""


def _record(outcome: str, stats: StructuredStats | None) -> None:
    STATS.add(outcome)
    if stats is not None and stats is not STATS:
        stats.add(outcome)


def _note(reply: Reply, stats: StructuredStats | None) -> None:
    STATS.note(reply)
    if stats is not None and stats is not STATS:
        stats.note(reply)


_STRING_TOKENS, _NAME_TOKENS, _DEFAULT_ITEMS = 32, 8, 10


def schema_token_budget(schema: dict[str, Any], *, floor: int = 64) -> int:
    """Tokens a reply may need when it fills ``schema`` (a JSON schema) to its ``maxItems``:
    about 32 tokens per string field, 8 per string inside an array of strings (names), a few per
    key and bracket; arrays without ``maxItems`` count 10 items."""
    defs = schema.get("$defs", {})

    def size(node: dict[str, Any], in_array: bool = False) -> int:
        if "$ref" in node:
            return size(defs[node["$ref"].rsplit("/", 1)[-1]], in_array)
        for key in ("anyOf", "oneOf"):
            if key in node:
                return max(size(option, in_array) for option in node[key])
        kind = node.get("type")
        if kind == "object":
            return 2 + sum(4 + size(child) for child in node.get("properties", {}).values())
        if kind == "array":
            return 2 + int(node.get("maxItems", _DEFAULT_ITEMS)) * (2 + size(node.get("items", {}), True))
        if kind == "string":
            return _NAME_TOKENS if in_array else _STRING_TOKENS
        return 4

    return max(floor, size(schema))


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)(?:```|$)", re.DOTALL)


def _loads(text: str) -> Any:
    fenced = _FENCE.search(text)
    candidate = fenced.group(1) if fenced else text
    start = min((i for i in (candidate.find("{"), candidate.find("[")) if i >= 0), default=-1)
    if start < 0:
        raise ValueError("no JSON object or array in the answer")
    obj = json_repair.loads(candidate[start:])
    if obj in ("", None):
        raise ValueError("the answer could not be repaired into JSON")
    return obj


def parse_json(text: str, schema: type[T]) -> tuple[T, bool]:
    """Validate ``text`` against ``schema``; returns (value, repaired). Raises ValueError if hopeless."""
    try:
        return schema.model_validate_json(text.strip()), False
    except ValidationError:
        pass
    obj = _loads(text)
    try:
        return schema.model_validate(obj), True
    except ValidationError as exc:
        raise ValueError(f"JSON does not match the schema: {exc.errors()[0]['msg']}") from None


def _json_start(text: str) -> int:
    return min((i for i in (text.find("{"), text.find("[")) if i >= 0), default=-1)


def _scan(text: str, start: int) -> tuple[list[tuple[int, int, str]], bool]:
    """The ends of the items of the JSON value at ``start`` — (position after the item, depth of its list,
    closers to add) — and whether the value closes."""
    stack: list[str] = []
    ends: list[tuple[int, int, str]] = []

    def item_ends(at: int) -> None:
        if stack and stack[-1] == "[":
            ends.append((at, len(stack), "".join("]" if c == "[" else "}" for c in reversed(stack))))

    in_string = escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == '"':
                in_string = False
                item_ends(i + 1)
            continue
        if ch == '"':
            in_string = True
        elif ch == ",":  # the item before the comma is complete
            item_ends(i)
        elif ch in "[{":
            stack.append(ch)
        elif ch in "]}":
            if not stack:
                break
            stack.pop()
            item_ends(i + 1)
            if not stack:
                return ends, True
    return ends, False


def stops_mid_way(text: str) -> bool:
    """Whether a reply's JSON stops while an item is being written (a reply that ended without saying it
    was cut: repaired, its last string would be a fragment). Only closing brackets missing after a
    complete item is not that: repair adds them."""
    start = _json_start(text)
    if start < 0:
        return False
    ends, closes = _scan(text, start)
    rest = text[ends[-1][0] :] if ends else text[start:]
    return not closes and bool(rest.strip().strip(",").strip())


def salvage(text: str) -> Any | None:
    """The complete part of a JSON reply cut mid-way: its outermost list without the item that was
    being written at the cut, parsed strictly (no repair guesses at a cut escape or string).

    Returns ``None`` when that list holds no complete item, or when there is no list to cut back to
    (a cut single value is a fragment as a whole)."""
    start = _json_start(text)
    if start < 0:
        return None
    ends, _ = _scan(text, start)
    if not ends:
        return None
    outermost = min(depth for _, depth, _ in ends)
    for end, depth, closers in reversed(ends):
        if depth != outermost:
            continue
        try:
            return json.loads(text[start:end] + closers)
        except (ValueError, RecursionError):
            continue
    return None


def _retry_prompt(prompt: str, schema: dict[str, Any], error: str) -> str:
    return (
        f"{prompt}\n\nYour previous answer could not be used ({error}). "
        f"Reply with only a JSON value that matches this JSON schema:\n{json.dumps(schema)}"
    )


def _brief_prompt(prompt: str, cap: int) -> str:
    return f"{prompt}\n\nYour previous answer was cut off at {cap} tokens. Be brief: keep every item short."


def _give_up(what: str, error: str, text: str, stats: StructuredStats | None) -> None:
    _record("failed", stats)
    log.warning("structured output: gave up on %s after retries (%s); answer began %r", what, error, text[:120])


def json_dialogue(
    llm: AnyLLM,
    prompt: str,
    schema: type[T],
    *,
    retries: int = 2,
    stats: StructuredStats | None = None,
    what: str = "a JSON answer",
    max_tokens: int | None = None,
) -> Dialogue[T | None]:
    """The ladder of the module docstring as a dialogue; its result is the value or ``None``."""
    json_schema = schema.model_json_schema()
    cap = max_tokens or schema_token_budget(json_schema)
    ask, error, text = prompt, "", ""
    for attempt in range(retries + 1):
        reply = yield Call(llm, ask, max_tokens=cap, schema=json_schema)
        _note(reply, stats)
        text = reply.text
        if reply.truncated or stops_mid_way(text):
            error = "cut off at the token limit" if reply.truncated else "the JSON stops mid-way"
            if attempt < retries:
                ask, cap = (_brief_prompt(prompt, cap), cap * 2) if reply.truncated else (_retry_prompt(prompt, json_schema, error), cap)
                continue
            try:
                value = schema.model_validate(salvage(text))
            except ValidationError:
                break
            _record("salvaged", stats)
            log.warning("structured output: %s was cut off (%s) on every try; kept its complete items", what, error)
            return value
        try:
            value, repaired = parse_json(text, schema)
        except ValueError as exc:
            error = str(exc)
            ask = _retry_prompt(prompt, json_schema, error)
            continue
        _record("retried" if attempt else "repaired" if repaired else "first_try", stats)
        return value
    _give_up(what, error, text, stats)
    return None


def generate_json(
    llm: AnyLLM,
    prompt: str,
    schema: type[T],
    *,
    retries: int = 2,
    stats: StructuredStats | None = None,
    what: str = "a JSON answer",
    max_tokens: int | None = None,
) -> T | None:
    """Ask ``llm`` for JSON matching ``schema``; ``None`` (counted, logged) if it never comes."""
    return run(json_dialogue(llm, prompt, schema, retries=retries, stats=stats, what=what, max_tokens=max_tokens))


async def agenerate_json(
    llm: AnyLLM,
    prompt: str,
    schema: type[T],
    *,
    retries: int = 2,
    stats: StructuredStats | None = None,
    what: str = "a JSON answer",
    max_tokens: int | None = None,
) -> T | None:
    """Async :func:`generate_json`."""
    return await arun(json_dialogue(llm, prompt, schema, retries=retries, stats=stats, what=what, max_tokens=max_tokens))


def parse_label(text: str, labels: Sequence[str]) -> str | None:
    """The label a free-text or JSON answer starts with (or first mentions), else None.

    ``{"answer": "Yes"}``, ``Yes.``, ``**No**, because…`` and ``The answer is yes`` all parse.
    """
    by_lower = {label.lower(): label for label in labels}
    pattern = re.compile(r"\b(" + "|".join(re.escape(label.lower()) for label in labels) + r")\b")
    try:
        obj = json.loads(text)
        if isinstance(obj, dict):
            text = str(next(iter(obj.values()), ""))
    except (ValueError, TypeError, RecursionError):  # not JSON, or nested past the parser's depth ("[" * 2000)
        pass
    match = pattern.search(text.lower())
    return by_lower[match.group(1)] if match else None


def _label_schema(labels: Sequence[str]) -> dict[str, Any]:
    model = create_model("Label", answer=(Literal[tuple(labels)], ...))  # type: ignore[arg-type]
    return model.model_json_schema()


LABEL_TOKENS = 24
"""Token cap of a label reply: a few words ("Yes", '{"answer": "No"}', "No, because …")."""


def label_dialogue(
    llm: AnyLLM,
    prompt: str,
    labels: Sequence[str] = ("Yes", "No"),
    *,
    default: str | None = None,
    stats: StructuredStats | None = None,
) -> Dialogue[str]:
    """One of ``labels`` for ``prompt`` as a dialogue; ``default`` (or the last label) when none can be read.

    Constrained to ``{"answer": <label>}`` where the backend allows it; free text is parsed (a reply
    cut at the cap still starts with its label)."""
    reply = yield Call(llm, prompt, max_tokens=LABEL_TOKENS, schema=_label_schema(labels))
    _note(reply, stats)
    label = parse_label(reply.text, labels)
    if label is not None:
        _record("first_try", stats)
        return label
    fallback = default if default is not None else labels[-1]
    _record("failed", stats)
    log.warning("structured output: no label of %s in %r; using %r", list(labels), reply.text[:120], fallback)
    return fallback


LABEL_ALTERNATIVES = 10
"""First-token alternatives asked for when a label's probability is read from logprobs."""


def label_probability(alternatives: Mapping[str, float], labels: Sequence[str] = ("Yes", "No")) -> float | None:
    """P(``labels[0]``) among the labels, from a first token's alternatives (token → log probability; case and
    spaces folded); None when no label is among them."""
    mass = {label.lower(): 0.0 for label in labels}
    for token, logprob in alternatives.items():
        if (key := token.strip().lower()) in mass:
            mass[key] += math.exp(logprob)
    total = sum(mass.values())
    return mass[labels[0].lower()] / total if total > 0 else None


def label_probability_dialogue(llm: AnyLLM, prompt: str, labels: Sequence[str] = ("Yes", "No")) -> Dialogue[float | None]:
    """P(``labels[0]``) for ``prompt`` from one generated token's logprobs (llama.cpp, Ollama, OpenAI-compatible
    servers); None where the backend returns none or no label leads, so the caller can read the reply instead."""
    reply = yield Call(llm, prompt, max_tokens=1, top_logprobs=LABEL_ALTERNATIVES)
    return label_probability(reply.first_token_logprobs, labels)


def generate_label(
    llm: AnyLLM,
    prompt: str,
    labels: Sequence[str] = ("Yes", "No"),
    *,
    default: str | None = None,
    stats: StructuredStats | None = None,
) -> str:
    """See :func:`label_dialogue`."""
    return run(label_dialogue(llm, prompt, labels, default=default, stats=stats))


async def agenerate_label(
    llm: AnyLLM,
    prompt: str,
    labels: Sequence[str] = ("Yes", "No"),
    *,
    default: str | None = None,
    stats: StructuredStats | None = None,
) -> str:
    """Async :func:`generate_label`."""
    return await arun(label_dialogue(llm, prompt, labels, default=default, stats=stats))
