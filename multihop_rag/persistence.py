"""The manifest of a persisted index: which method wrote the folder, in which format, with which
settings and models. Every index reads it the same way, so a missing, empty or foreign folder always
raises the same :class:`IndexFolderError` with a line that says what to do.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from multihop_rag.stores import StoreError

__all__ = ["MANIFEST", "IndexFolderError", "write_manifest", "read_manifest", "prepare_folder"]

MANIFEST = "multihop_rag.json"


class IndexFolderError(StoreError):
    """A folder holds no index, or another method's, or one written in another format."""


def write_manifest(folder: str | Path, method: str, format_version: int, **fields: Any) -> dict[str, Any]:
    """Record ``method``, its ``format_version`` and ``fields`` (settings, statistics, models …) in ``folder``."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    previous = _read(path / MANIFEST) or {}
    manifest = {**previous, **fields, "method": method, "format": format_version, "written": time.time()}
    (path / MANIFEST).write_text(json.dumps(manifest, indent=1, default=str))
    return manifest


def _read(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def read_manifest(
    folder: str | Path, method: str | tuple[str, ...] | None = None, format_version: int | None = None
) -> dict[str, Any]:
    """The manifest of ``folder``; with ``method`` (one name or several) and ``format_version`` given,
    the folder must hold such an index in that format."""
    path = Path(folder)
    methods = (method,) if isinstance(method, str) else method
    manifest = _read(path / MANIFEST)
    if manifest is None:
        what = " or ".join(methods) + " " if methods else ""
        raise IndexFolderError(f"{path} holds no {what}index (no {MANIFEST}): build one there first ('multihop-rag index')")
    if methods is not None and manifest.get("method") not in methods:
        raise IndexFolderError(
            f"{path} holds a {manifest.get('method')} index, not a {' or '.join(methods)} one: use --method "
            f"{manifest.get('method')} or another folder"
        )
    if format_version is not None and manifest.get("format") != format_version:
        raise IndexFolderError(
            f"{path} was written in format {manifest.get('format')} of {manifest.get('method')}, this version reads "
            f"format {format_version}: rebuild it"
        )
    return manifest


def prepare_folder(folder: str | Path, method: str, format_version: int, *, overwrite: bool = False, **fields: Any) -> None:
    """Claim ``folder`` for a new build of ``method`` (its manifest then says ``status: building``).

    A folder with no index, or with this method's unfinished build (a killed one: its LLM-call cache
    lets the new build resume), is taken; one holding a finished index or another method's is refused
    with a line naming the ``overwrite`` option (and ``multihop-rag index`` updates an index in place)."""
    path = Path(folder)
    manifest = _read(path / MANIFEST)
    if manifest is not None and not overwrite:
        unfinished = manifest.get("method") == method and manifest.get("status") == "building"
        if not unfinished:
            raise IndexFolderError(
                f"{path} already holds a {'finished ' if manifest.get('status') == 'done' else ''}"
                f"{manifest.get('method')} index: pass overwrite=True (command line: --overwrite) to replace it, "
                "or update it in place (insert / refresh_ref_docs; 'multihop-rag index' on the same folder)"
            )
    write_manifest(path, method, format_version, status="building", **fields)
