"""The methods installed: every entry point of the group ``multihop_rag.methods``.

The application layer (command line, evaluation, demo) finds methods here at run time and never
imports a method package by name, so a user's own method — a package whose ``pyproject.toml``
declares ``[project.entry-points."multihop_rag.methods"] mine = "my_package:METHOD"`` — joins
``multihop-rag index|ask|eval`` like the bundled ones.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from importlib.metadata import entry_points
from typing import Any

from pydantic import BaseModel, ValidationError

from multihop_rag.errors import MethodError
from multihop_rag.method import Method

__all__ = ["GROUP", "ORDER", "available", "get", "settings_for", "check_settings"]

GROUP = "multihop_rag.methods"
ORDER = ("naive", "resp", "hirag", "raptor", "sirerag", "garlic", "k2rag")
"""The bundled methods in report order (others follow by name)."""



@cache
def available() -> dict[str, Method]:
    """Every registered method by name, bundled ones first in :data:`ORDER`."""
    found: dict[str, Method] = {}
    for point in entry_points(group=GROUP):
        method = point.load()
        if not isinstance(method, Method):
            raise MethodError(f"entry point {point.name} = {point.value} is not a multihop_rag Method")
        found[point.name] = method
    rank = {name: i for i, name in enumerate(ORDER)}
    return dict(sorted(found.items(), key=lambda kv: (rank.get(kv[0], len(ORDER)), kv[0])))


def get(name: str) -> Method:
    """The method ``name``; an unknown one raises :class:`MethodError` naming the available ones."""
    methods = available()
    if name not in methods:
        raise MethodError(f"unknown method {name!r}; available: {', '.join(methods)}")
    return methods[name]


def check_settings(assignments: Sequence[str]) -> None:
    """Validate every ``method.field=value`` item against its method's config (name, field, type, range) before
    anything is written; an item without a method is checked when the method is known."""
    for item in assignments:
        owner, dot, _ = item.partition("=")[0].rpartition(".")
        if dot:
            settings_for(get(owner) if owner in available() else _unknown(item, owner), [item])


def _unknown(item: str, owner: str) -> Method:
    raise MethodError(f"--set {item!r}: there is no method {owner!r}; available: {', '.join(available())}")


def settings_for(method: Method, assignments: Sequence[str], base: Mapping[str, Any] | None = None) -> BaseModel:
    """The method's config: ``base`` (a store's recorded settings) with ``assignments`` applied on top:
    ``name.field=value`` items naming this method (or ``field=value``); values are read as JSON when they
    parse, else as text."""
    import json

    values: dict[str, object] = dict(base or {})
    fields = method.config_class.model_fields
    for item in assignments:
        key, sep, raw = item.partition("=")
        if not sep:
            raise MethodError(f"--set {item!r}: write method.field=value")
        owner, dot, field = key.rpartition(".")
        if dot and owner not in available():
            _unknown(item, owner)
        if dot and owner != method.name:
            continue
        if field not in fields:
            raise MethodError(f"{method.name} has no setting {field!r}; it has {', '.join(fields)}")
        try:
            values[field] = json.loads(raw)
        except ValueError:
            values[field] = raw
    try:
        return method.config_class(**values)
    except ValidationError as exc:
        first = exc.errors()[0]
        raise MethodError(f"{method.name}.{first['loc'][0]}: {first['msg']}") from None
