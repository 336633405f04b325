"""RAPTOR clustering on layers of many sizes: time, clusters, largest cluster, coverage.

    python benchmarks/bench_clustering.py --sizes 1 2 3 11 100 1000 10000 100000

Embeddings are synthetic (Gaussian blobs, 64 dimensions, seed 0); every item counts 60 tokens.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from multihop_rag.indexing.clustering import ClusterConfig, cluster


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 2, 3, 11, 100, 1000, 10000])
    parser.add_argument("--dim", type=int, default=64)
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    print("| items | clusters | largest | all covered | seconds |\n|---|---|---|---|---|")
    for n in args.sizes:
        centers = rng.normal(size=(max(1, n // 500), args.dim)) * 3
        x = centers[rng.integers(0, len(centers), n)] + rng.normal(size=(n, args.dim))
        started = time.perf_counter()
        clusters = cluster(x, [60] * n, ClusterConfig())
        seconds = time.perf_counter() - started
        covered = len({i for c in clusters for i in c}) == n
        print(f"| {n} | {len(clusters)} | {max(map(len, clusters))} | {covered} | {seconds:.1f} |", flush=True)


if __name__ == "__main__":
    main()
