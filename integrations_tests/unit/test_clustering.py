import subprocess
import sys

import numpy as np
import pytest

from multihop_rag.indexing.clustering import ClusterConfig, cluster, gmm_soft_clusters, replayable_cluster


def blobs(n: int, k: int = 4, dim: int = 32, seed: int = 0, labels: bool = False):
    rng = np.random.default_rng(seed)
    centers = rng.normal(size=(k, dim)) * 5
    y = rng.integers(0, k, n)
    x = centers[y] + 0.1 * rng.normal(size=(n, dim))
    return (x, y) if labels else x


@pytest.mark.parametrize("n", [1, 2, 3, 11])
def test_tiny_layers_are_one_cluster(n):
    assert cluster(blobs(n), [10] * n) == [list(range(n))]


def test_empty_layer():
    assert cluster(np.zeros((0, 8)), []) == []


def test_every_item_is_clustered_and_budget_holds():
    x = blobs(60)
    tokens = [100] * 60
    clusters = cluster(x, tokens, ClusterConfig(max_cluster_tokens=800))
    assert {i for c in clusters for i in c} == set(range(60))
    assert all(len(c) == 1 or sum(tokens[i] for i in c) <= 800 for c in clusters)
    assert len(clusters) < 60  # a real reduction, not one node fewer


def test_separated_blobs_are_not_mixed():
    x, y = blobs(40, k=2, seed=1, labels=True)
    clusters = cluster(x, [10] * 40)
    assert len(clusters) >= 2
    assert all(len({y[i] for i in c}) == 1 for c in clusters)


def test_unsplittable_cluster_terminates_with_token_groups():
    # Identical points cannot be separated by clustering: the budget must still hold.
    x = np.ones((30, 16))
    tokens = [500] * 30
    clusters = cluster(x, tokens, ClusterConfig(max_cluster_tokens=1200))
    assert {i for c in clusters for i in c} == set(range(30))
    assert all(sum(tokens[i] for i in c) <= 1200 for c in clusters)


def test_oversized_single_item_stays_alone():
    clusters = cluster(blobs(3), [10_000, 5, 5], ClusterConfig(max_cluster_tokens=100))
    assert [0] in clusters
    assert {i for c in clusters for i in c} == {0, 1, 2}


def test_bic_never_picks_n_minus_one():
    x = np.random.default_rng(3).normal(size=(14, 3))
    groups = gmm_soft_clusters(x, ClusterConfig())
    assert len(groups) <= 7


def test_deterministic():
    x = blobs(50, seed=5)
    assert cluster(x, [50] * 50) == cluster(x, [50] * 50)


class DictStore(dict):
    def put(self, key, value):
        self[key] = value


def test_float_noise_changes_clusters_but_a_kept_decision_replays_for_the_same_texts():
    x = np.random.default_rng(7).normal(size=(60, 16))  # no structure: UMAP's layout decides
    noisy = x + np.random.default_rng(8).normal(0, 1e-7, x.shape)
    texts, tokens, config = [f"text {i}" for i in range(60)], [50] * 60, ClusterConfig()
    assert cluster(x, tokens, config) != cluster(noisy, tokens, config)
    store = DictStore()
    first = replayable_cluster(texts, x, tokens, config, store=store, embedder="minilm")
    assert replayable_cluster(texts, noisy, tokens, config, store=store, embedder="minilm") == first
    assert replayable_cluster(texts, noisy, tokens, config, store=store, embedder="bge") == cluster(noisy, tokens, config)
    assert len(store) == 2


def test_mismatched_lengths_raise():
    with pytest.raises(ValueError):
        cluster(blobs(5), [1, 2])


def test_bic_patience_stops_early_but_picks_the_same_k(monkeypatch):
    from multihop_rag.indexing import clustering

    x, _ = blobs(80, k=3, dim=10, seed=2, labels=True)
    fits = []
    real_fit = clustering._fit_gmm
    monkeypatch.setattr(clustering, "_fit_gmm", lambda s, k, seed: fits.append(k) or real_fit(s, k, seed))
    patient = gmm_soft_clusters(x, ClusterConfig(bic_patience=3))
    tried_patient = len(fits)
    fits.clear()
    exhaustive = gmm_soft_clusters(x, ClusterConfig(bic_patience=None))
    assert tried_patient < len(fits) == 40
    assert [m.tolist() for m in patient] == [m.tolist() for m in exhaustive]


def test_warm_up_compiles_umap_once_per_process_in_the_background(monkeypatch):
    import umap

    from multihop_rag.indexing import clustering

    fits = []

    class Recorder:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

        def fit_transform(self, x):
            fits.append((len(x), self.kwargs["metric"]))

    monkeypatch.setattr(umap, "UMAP", Recorder)
    clustering.warm_up.cache_clear()
    thread = clustering.warm_up()
    assert clustering.warm_up() is thread and thread.daemon
    thread.join(timeout=10)
    assert fits == [(16, "cosine")]
    clustering.warm_up.cache_clear()


def test_a_failing_warm_up_is_left_to_the_first_real_clustering(monkeypatch, caplog):
    import umap

    from multihop_rag.indexing import clustering

    def broken(**kwargs):
        raise ValueError("no umap")

    monkeypatch.setattr(umap, "UMAP", broken)
    clustering.warm_up.cache_clear()
    with caplog.at_level("DEBUG", logger=clustering.__name__):
        clustering.warm_up().join(timeout=10)
    assert "no umap" in caplog.text
    clustering.warm_up.cache_clear()


def test_the_warm_up_leaves_the_other_threads_warnings_alone(monkeypatch):
    import threading
    import warnings

    import umap

    from multihop_rag.indexing import clustering

    compiling, release = threading.Event(), threading.Event()

    class Blocking:
        def __init__(self, **kwargs):
            pass

        def fit_transform(self, x):
            compiling.set()
            release.wait(10)

    monkeypatch.setattr(umap, "UMAP", Blocking)
    clustering.warm_up.cache_clear()
    with warnings.catch_warnings(record=True) as caught:  # warnings filters are process-wide
        warnings.simplefilter("always")
        thread = clustering.warm_up()
        assert compiling.wait(10)
        warnings.warn("the user's own warning", UserWarning, stacklevel=1)
        release.set()
        thread.join(timeout=10)
    assert [str(w.message) for w in caught] == ["the user's own warning"]
    clustering.warm_up.cache_clear()


def test_umap_in_two_threads_leaves_the_warning_filters_as_they_were(monkeypatch):
    """The similarity and relatedness trees cluster side by side; interleaved warning catches must not
    leave an "ignore" filter behind for the whole process."""
    import threading
    import time
    import warnings

    import umap

    from multihop_rag.indexing import clustering

    class Slow:
        def __init__(self, **kwargs):
            pass

        def fit_transform(self, x):
            time.sleep(0.3)
            return x[:, :2]

    monkeypatch.setattr(umap, "UMAP", Slow)
    before = list(warnings.filters)
    threads = [threading.Thread(target=clustering._umap, args=(np.zeros((20, 8)), 2, 5, 0)) for _ in range(2)]
    for thread in threads:
        thread.start()
        time.sleep(0.05)
    for thread in threads:
        thread.join(timeout=10)
    assert warnings.filters == before


WATCH_THE_STREAMS = """
import sys, threading, types
from multihop_rag.indexing import clustering

swaps = []


class Watched(types.ModuleType):
    def __setattr__(self, name, value):
        if name in ("stdout", "stderr") and threading.current_thread() is not threading.main_thread():
            swaps.append((threading.current_thread().name, name))
        super().__setattr__(name, value)


sys.__class__ = Watched
clustering.warm_up().join()
print(swaps)
"""


def test_umaps_compile_in_the_background_never_swaps_the_process_output_streams():
    # numba colours its compile messages with colorama, which swaps sys.stdout/sys.stderr and puts back the ones it
    # saw first: from the warm-up thread, that sends the main thread's output (a notebook cell's, a test's capture)
    # to a stream that is no longer the current one
    out = subprocess.run([sys.executable, "-c", WATCH_THE_STREAMS], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
