"""The manifest of a persisted index: which method wrote the folder, in which format, with which
settings and models. Every index reads it the same way, so a missing, empty or foreign folder always
raises the same :class:`IndexFolderError` with a line that says what to do.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock, Timeout

from multihop_rag.errors import IndexFolderError

__all__ = ["MANIFEST", "LOCK", "write_manifest", "read_manifest", "prepare_folder", "write_atomic",
           "store_lock", "reset_store", "CALL_CACHE", "OutsideStore", "undoable_update", "undo_cut_update", "settled_store",
           "readable_store", "recover"]

MANIFEST = "multihop_rag.json"
LOCK = ".multihop_rag.lock"
log = logging.getLogger(__name__)


def write_atomic(path: str | Path, data: str | bytes) -> None:
    """Write ``data`` (text as UTF-8) to ``path`` so that a reader (or a crash) sees the old file or the new one,
    never half of one: a temporary file in the same folder, flushed to disk, then renamed over ``path``."""
    target = Path(path)
    temporary = target.with_name(f".{target.name}.{secrets.token_hex(6)}.tmp")
    handle = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the user's umask, as a plain write
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(data.encode("utf-8") if isinstance(data, str) else data)
            file.flush()
            os.fsync(file.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


CALL_CACHE = "llm_calls.sqlite"
CHROMA_DB = "chroma.sqlite3"


def reset_store(folder: str | Path) -> None:
    """Empty a store for a build from nothing (``--overwrite``), whatever state it is in: every file but the lock
    and a sound LLM-call cache (the new build replays its calls); a damaged cache is set aside. A non-empty folder
    that is no store (no manifest) is refused, so a mistyped path never empties a folder of the user's."""
    path = Path(folder)
    if not path.is_dir() or not any(path.iterdir()):
        return
    if not (path / MANIFEST).exists():
        raise IndexFolderError(f"{path} is not a multihop-rag store (no {MANIFEST}) and not empty: choose an empty or new folder")
    cache = path / CALL_CACHE
    if cache.exists() and not _sound_sqlite(cache):
        aside = cache.with_name(f"{CALL_CACHE}.damaged-{int(time.time())}")
        cache.rename(aside)
        log.warning("the LLM-call cache %s was damaged: set aside as %s; the build makes its calls again", cache, aside.name)
    for entry in path.iterdir():
        if entry.name == LOCK or entry.name.startswith(CALL_CACHE):
            continue
        if entry.is_dir() and not entry.is_symlink():
            if _sound_sqlite(entry / CHROMA_DB):
                continue  # a sound vector store: the build empties its collection (its client may be open in this process)
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _sound_sqlite(path: Path) -> bool:
    if not path.is_file():
        return False
    try:
        with closing(sqlite3.connect(path)) as db:
            return db.execute("PRAGMA quick_check").fetchone()[0] == "ok"
    except sqlite3.DatabaseError:
        return False


@contextmanager
def store_lock(folder: str | Path, say: Any = None) -> Iterator[None]:
    """Hold the store's write lock for the block; a second writer waits for the first (``say`` is told why)."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    lock = FileLock(path / LOCK, is_singleton=True)  # one lock per file: a thread holding it may take it again
    try:
        lock.acquire(timeout=0)
    except Timeout:
        (say or log.warning)(f"another 'multihop-rag index' is writing {path}; waiting for it to finish")
        lock.acquire()
    try:
        yield
    finally:
        lock.release()



SNAPSHOT = ".before_update"
"""Inside a store: a copy of its files (all but the lock and the LLM-call cache) taken before an update."""
SNAPSHOT_COMPLETE = ".complete"


def _own_files(path: Path) -> list[Path]:
    """The store's files that an update may change: all but the lock, the LLM-call cache and the snapshot."""
    return [e for e in path.iterdir() if e.name not in (LOCK, SNAPSHOT) and not e.name.startswith(CALL_CACHE)]


def _copy(entry: Path, target: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.copytree(entry, target / entry.name, symlinks=True)
    else:
        shutil.copy2(entry, target / entry.name, follow_symlinks=False)


OUTSIDE = "outside_store"
"""Inside the snapshot: a copy of the entries of a vector store the index keeps outside its folder."""


class OutsideStore(Protocol):
    """A vector store an index keeps outside its folder (a Chroma server, a collection elsewhere): the copy an
    update takes of the folder cannot hold it, so it copies its entries itself."""

    def save(self, folder: Path) -> None:
        """Write every entry (id, embedding, text, metadata) into ``folder``."""

    def restore(self, folder: Path) -> None:
        """Make the store hold exactly the entries :meth:`save` wrote into ``folder``."""


@contextmanager
def undoable_update(folder: str | Path, outside: OutsideStore | None = None) -> Iterator[None]:
    """Run an in-place update of ``folder`` (its lock held) so that it finishes or leaves the last finished store.

    A method's update writes its vector store as it goes and its state at the end; cut half-way (Ctrl-C, a
    crash, ``kill -9``) the two would disagree. So the store's files are copied first (the LLM-call cache is
    not: an update's finished calls are kept, and the next run replays them); an exception puts the copy back
    at once, and a process that died is undone by the next reader or writer (:func:`undo_cut_update`). The
    copy costs a read and a write of the store's files (seconds for thousands of passages), no LLM call.
    ``outside``: the index's vector store when it lives outside the folder; its entries are copied too."""
    path = Path(folder)
    if path.resolve() in _UPDATING:  # inside an update of the same store (the CLI's around an index's own)
        yield
        return
    snapshot = path / SNAPSHOT
    if snapshot.exists():
        shutil.rmtree(snapshot)
    snapshot.mkdir()
    for entry in _own_files(path):
        _copy(entry, snapshot)
    if outside is not None:
        (snapshot / OUTSIDE).mkdir()
        outside.save(snapshot / OUTSIDE)
    write_atomic(snapshot / SNAPSHOT_COMPLETE, "")
    _UPDATING.add(path.resolve())
    try:
        yield
    except BaseException:
        undo_cut_update(path, outside)
        raise
    finally:
        _UPDATING.discard(path.resolve())
    shutil.rmtree(snapshot)


_UPDATING: set[Path] = set()
"""Stores this process is updating inside :func:`undoable_update`."""


def recover(folder: str | Path, outside: OutsideStore | None = None) -> bool:
    """Undo an update of ``folder`` that a dead process left unfinished (under the store's lock, so a running
    update is waited for); True if one was. A folder this process cannot write is left as it is."""
    path = Path(folder)
    if path.resolve() in _UPDATING or not (path / SNAPSHOT).is_dir() or not os.access(path, os.W_OK):
        return False  # this process's own update running (an index loaded inside it), no update, or read-only
    with store_lock(path):
        return undo_cut_update(path, outside)


def undo_cut_update(folder: str | Path, outside: OutsideStore | None = None) -> bool:
    """Put back the files of ``folder`` as they were before an update that did not finish (its lock held by the
    caller), and the entries of ``outside`` (the index's vector store outside the folder) if the update copied
    them; True if there was one. Safe to repeat: the copy is removed only once everything is back."""
    path = Path(folder)
    snapshot = path / SNAPSHOT
    if not snapshot.is_dir():
        return False
    if not (snapshot / SNAPSHOT_COMPLETE).exists():  # cut while copying: the store itself was not touched yet
        shutil.rmtree(snapshot)
        return False
    if (snapshot / OUTSIDE).is_dir():
        if outside is None:
            raise IndexFolderError(
                f"{path}: an update that did not finish changed the index's vector store outside this folder; "
                "load the index with that store (vector_store=…) to undo the update there too")
        outside.restore(snapshot / OUTSIDE)
    for entry in _own_files(path):
        shutil.rmtree(entry) if entry.is_dir() and not entry.is_symlink() else entry.unlink()
    for entry in snapshot.iterdir():
        if entry.name not in (SNAPSHOT_COMPLETE, OUTSIDE):
            _copy(entry, path)
    shutil.rmtree(snapshot)
    log.warning("%s: an update that did not finish was undone; the store holds its last finished index", path)
    return True


def settled_store(folder: str | Path) -> Path:
    """The folder to read ``folder``'s index from: the store itself, after undoing an update that did not
    finish; while an update runs, its copy of the last finished store. A folder that is no store, or one
    this process cannot lock (read-only), is read as it is."""
    path = Path(folder)
    if not (path / MANIFEST).exists() and not (path / SNAPSHOT).exists():
        return path
    lock = FileLock(path / LOCK)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        snapshot = path / SNAPSHOT
        return snapshot if (snapshot / SNAPSHOT_COMPLETE).exists() else path
    except OSError:
        return path
    try:
        undo_cut_update(path)
    finally:
        lock.release()
    return path


@contextmanager
def readable_store(folder: str | Path) -> Iterator[Path]:
    """The folder to read ``folder``'s index from (:func:`settled_store`); for a store this process cannot write
    (a read-only mount or folder: Chroma writes to its database to open it), a private copy of it, removed
    afterwards (copying costs a read of the store's files, no model call)."""
    path = settled_store(folder)
    if not path.is_dir() or os.access(path, os.W_OK):
        yield path
        return
    with tempfile.TemporaryDirectory(prefix="multihop-rag-read-only-") as temporary:
        copy = Path(temporary) / path.name
        shutil.copytree(path, copy, ignore=shutil.ignore_patterns(LOCK, SNAPSHOT, f"{CALL_CACHE}*"))
        log.info("%s is read-only: reading a private copy", path)
        yield copy


def write_manifest(folder: str | Path, method: str, format_version: int, **fields: Any) -> dict[str, Any]:
    """Record ``method``, its ``format_version`` and ``fields`` (settings, statistics, models …) in ``folder``."""
    path = Path(folder)
    path.mkdir(parents=True, exist_ok=True)
    previous = _read(path / MANIFEST) or {}
    manifest = {**previous, **fields, "method": method, "format": format_version, "written": time.time()}
    write_atomic(path / MANIFEST, json.dumps(manifest, indent=1, default=str))
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
    if manifest is None and (path / MANIFEST).exists():
        raise IndexFolderError(f"{path / MANIFEST} is damaged (not readable JSON): rebuild the store with "
                               f"'multihop-rag index CORPUS --store {path} --overwrite' (the LLM-call cache is kept)")
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
