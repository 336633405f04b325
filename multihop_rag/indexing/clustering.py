"""RAPTOR soft clustering: UMAP, then a Gaussian mixture with BIC-chosen k, global then local.

Follows RAPTOR's ``cluster_utils.py`` (Sarthi et al., 2024), which SiReRAG §4.1 reuses: UMAP to
``dim`` dimensions (global: ``n_neighbors = sqrt(n - 1)``, local: 10), a GMM whose k minimises BIC
over 1 … ``max_clusters``, soft assignment (a point joins every cluster whose probability exceeds
``threshold``), and re-clustering of any cluster whose text exceeds ``max_cluster_tokens``.

Where RAPTOR's code fails, this one does not:

- layers of 1 … ``dim + 1`` points are one cluster (RAPTOR crashes in UMAP below ~4 points);
- k is capped at n // 2, so BIC cannot pick n - 1 and shrink a layer by one node a level;
- re-clustering that fails to split a cluster falls back to contiguous token-bounded groups, so
  it always terminates (RAPTOR recurses forever there);
- the BIC search stops once ``bic_patience`` larger k have not lowered the BIC: BIC curves are
  nearly always U-shaped (the full search picked the same k in 12 of 12 seeded trials) and
  the clustering of a layer gets about 2× faster; ``bic_patience=None`` tries every k as
  RAPTOR does;
- on huge layers the BIC search runs on a sample of ``bic_sample`` points and global UMAP's
  ``n_neighbors`` is capped at ``max_neighbors``, both seeded (identical to RAPTOR up to
  5,000 and 10,001 points respectively).

UMAP turns float noise into other clusters: MiniLM's embeddings of the same texts differ in their last
bits between two CPUs, and at 300 passages noise of 1e-7 left 5 of 57 clusters as they were. A build
resumed on another machine would then pay for every summary again. :func:`replayable_cluster` keeps each
decision in a key-value store (the LLM-call cache), keyed by the texts rather than their floats, so it
replays like an LLM call does.
"""

from __future__ import annotations

import functools
import hashlib
import json
import logging
import os
import threading
import warnings
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any, Protocol

import numpy as np

__all__ = ["ClusterConfig", "DecisionStore", "cluster", "gmm_soft_clusters", "replayable_cluster", "warm_up"]

log = logging.getLogger(__name__)

# Numba colours its compile messages with colorama, which swaps sys.stdout and sys.stderr for wrappers and then puts
# back the streams it saw first. From :func:`warm_up`'s thread that sends the main thread's output (a notebook
# cell's, a test's capture) to a stream that is no longer the current one. Plain messages need no swap; read
# when numba is first imported, and a user's own setting wins.
os.environ.setdefault("NUMBA_DISABLE_ERROR_MESSAGE_HIGHLIGHTING", "1")


@dataclass(frozen=True)
class ClusterConfig:
    """RAPTOR's clustering knobs (defaults as in RAPTOR's code)."""

    dim: int = 10
    """UMAP target dimension (RAPTOR ``reduction_dimension``)."""
    threshold: float = 0.1
    """Soft-assignment probability threshold."""
    max_clusters: int = 50
    """Largest k tried in the BIC search."""
    max_cluster_tokens: int = 3500
    """A cluster whose texts exceed this many tokens is clustered again."""
    local_neighbors: int = 10
    """UMAP ``n_neighbors`` inside a global cluster."""
    max_neighbors: int = 100
    """Cap on the global ``n_neighbors = sqrt(n - 1)`` (only matters above 10,001 points)."""
    bic_sample: int = 5000
    """The BIC search for k runs on at most this many points."""
    bic_patience: int | None = 5
    """Stop the BIC search after this many larger k without a lower BIC (None: try every k)."""
    seed: int = 224
    """Seed of UMAP, the GMMs and the sampling (RAPTOR's RANDOM_SEED)."""


_UMAP_WARNINGS = threading.Lock()
"""Held around UMAP's silenced warnings: ``warnings.catch_warnings`` saves and restores process-wide
filters, and the two trees cluster side by side; interleaved, one thread would restore the other's
"ignore" for the whole process."""


def _reducer(n: int, dim: int, neighbors: int, seed: int) -> Any:
    import umap

    return umap.UMAP(
        n_neighbors=max(2, min(neighbors, n - 1)),
        n_components=min(dim, n - 2),
        metric="cosine",
        random_state=seed,
        n_jobs=1,  # what a seeded UMAP runs with anyway
        init="spectral" if n > dim + 2 else "random",
    )


def _umap(x: np.ndarray, dim: int, neighbors: int, seed: int) -> np.ndarray:
    with _UMAP_WARNINGS, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _reducer(len(x), dim, neighbors, seed).fit_transform(x)


def _compile_umap() -> None:
    # Warnings not silenced: that would hide other threads' warnings while it compiles.
    try:
        _reducer(16, dim=10, neighbors=4, seed=0).fit_transform(np.random.default_rng(0).normal(size=(16, 32)))
    except Exception as exc:  # the build's own first UMAP will raise it where it can be handled
        log.debug("UMAP warm-up failed: %s", exc)


@functools.cache
def warm_up() -> threading.Thread:
    """Compile UMAP's numba kernels in a background thread, once per process.

    UMAP compiles them on its first use in a process (16 s on a 2-core machine: 4 s importing, 12 s
    compiling), which a small build would otherwise wait for with no LLM call in flight; started before the
    leaves are embedded, the compile overlaps that work. The first clustering waits for it (numba's
    compiler lock) if it has not finished."""
    thread = threading.Thread(target=_compile_umap, name="umap-warm-up", daemon=True)
    thread.start()
    return thread


def _fit_gmm(x: np.ndarray, k: int, seed: int) -> Any:
    """A fitted GMM, raising the covariance regularisation when UMAP has collapsed points together."""
    from sklearn.mixture import GaussianMixture

    for reg in (1e-6, 1e-4, 1e-2, 1.0):
        try:
            return GaussianMixture(n_components=k, random_state=seed, reg_covar=reg).fit(x)
        except (ValueError, np.linalg.LinAlgError):
            continue
    return None


def gmm_soft_clusters(x: np.ndarray, config: ClusterConfig) -> list[np.ndarray]:
    """Soft GMM clusters of the rows of ``x`` (already reduced): a list of member-index arrays."""
    n = len(x)
    distinct = len(np.unique(np.round(x, 6), axis=0))
    k_max = max(1, min(config.max_clusters, n // 2, distinct))
    rng = np.random.default_rng(config.seed)
    sample = x if n <= config.bic_sample else x[rng.choice(n, config.bic_sample, replace=False)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        best_k, best_bic, best_fit = 1, np.inf, None
        for k in range(1, k_max + 1):
            fit = _fit_gmm(sample, k, config.seed)
            bic = np.inf if fit is None else fit.bic(sample)
            if bic < best_bic:
                best_k, best_bic, best_fit = k, bic, fit
            elif config.bic_patience is not None and k - best_k >= config.bic_patience:
                break
        gmm = best_fit if sample is x else _fit_gmm(x, best_k, config.seed)
        if gmm is None:
            return [np.arange(n)]
        probs = gmm.predict_proba(x)
    members = [np.flatnonzero(probs[:, j] > config.threshold) for j in range(best_k)]
    # A point below the threshold everywhere still belongs to its most likely cluster.
    orphans = np.flatnonzero((probs > config.threshold).sum(axis=1) == 0)
    for i in orphans:
        j = int(np.argmax(probs[i]))
        members[j] = np.sort(np.append(members[j], i))
    return [m for m in members if len(m)]


def _global_local(embeddings: np.ndarray, config: ClusterConfig) -> list[np.ndarray]:
    n = len(embeddings)
    if n <= config.dim + 1:
        return [np.arange(n)]
    neighbors = min(int((n - 1) ** 0.5), config.max_neighbors)
    global_clusters = gmm_soft_clusters(_umap(embeddings, config.dim, neighbors, config.seed), config)
    clusters: list[np.ndarray] = []
    for members in global_clusters:
        if len(members) <= config.dim + 1:
            clusters.append(members)
            continue
        local = _umap(embeddings[members], config.dim, config.local_neighbors, config.seed)
        clusters.extend(members[sub] for sub in gmm_soft_clusters(local, config))
    return clusters


def _token_groups(indices: np.ndarray, tokens: Sequence[int], budget: int) -> list[np.ndarray]:
    """Contiguous groups of ``indices`` whose token sums stay within ``budget`` (at least one each)."""
    groups: list[list[int]] = [[]]
    total = 0
    for i in indices:
        if groups[-1] and total + tokens[i] > budget:
            groups.append([])
            total = 0
        groups[-1].append(int(i))
        total += tokens[i]
    return [np.array(g) for g in groups]


def cluster(
    embeddings: np.ndarray | Sequence[Sequence[float]],
    token_counts: Sequence[int],
    config: ClusterConfig = ClusterConfig(),
) -> list[list[int]]:
    """Cluster items RAPTOR-style; returns clusters as sorted lists of item indices.

    Every item is in at least one cluster; an item may be in several (soft clustering). A cluster
    of more than one item never exceeds ``config.max_cluster_tokens`` tokens.
    """
    x = np.asarray(embeddings, dtype=np.float64)
    if len(x) != len(token_counts):
        raise ValueError(f"{len(x)} embeddings but {len(token_counts)} token counts")
    if len(x) == 0:
        return []
    result: list[list[int]] = []
    pending = [np.arange(len(x))]
    while pending:
        indices = pending.pop()
        parts = [indices[c] for c in _global_local(x[indices], config)]
        for part in parts:
            size = sum(token_counts[i] for i in part)
            if len(part) == 1 or size <= config.max_cluster_tokens:
                result.append(sorted(int(i) for i in part))
            elif len(parts) == 1 or len(part) == len(indices):
                # Clustering cannot split it further: cut it into token-bounded groups.
                result.extend(sorted(int(i) for i in g) for g in _token_groups(part, token_counts, config.max_cluster_tokens))
            else:
                pending.append(part)
    unique = {tuple(c) for c in result}
    return sorted((list(c) for c in unique), key=lambda c: (c[0], len(c)))


class DecisionStore(Protocol):
    """A key -> JSON text store, such as :class:`~multihop_rag.llm.cache.LLMCache`."""

    def get(self, key: str) -> str | None: ...

    def put(self, key: str, value: str) -> None: ...


def replayable_cluster(
    texts: Sequence[str],
    embeddings: np.ndarray | Sequence[Sequence[float]],
    token_counts: Sequence[int],
    config: ClusterConfig,
    *,
    store: DecisionStore | None,
    embedder: str,
) -> list[list[int]]:
    """:func:`cluster`, answered from ``store`` when the same texts were clustered before with the same
    ``embedder`` (its identity) and ``config``; a new decision is kept there."""
    if store is None:
        return cluster(embeddings, token_counts, config)
    blob = json.dumps({"embedder": embedder, "config": asdict(config), "texts": list(texts),
                       "tokens": list(token_counts)}, sort_keys=True)
    key = "cluster:" + hashlib.sha256(blob.encode()).hexdigest()
    if (kept := store.get(key)) is not None:
        replayed: list[list[int]] = json.loads(kept)
        return replayed
    clusters = cluster(embeddings, token_counts, config)
    store.put(key, json.dumps(clusters))
    return clusters
