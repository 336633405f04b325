"""Answer and retrieval metrics: EM/F1 with the HotpotQA/SQuAD normalisation, answer recall@k,
and the embedding cosine score of K²RAG §3.3.

Every answer metric takes the best score over the acceptable gold answers.
"""

from __future__ import annotations

import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cache

import numpy as np

__all__ = [
    "normalize_answer",
    "exact_match",
    "f1_score",
    "precision_recall_f1",
    "answer_in_text",
    "answer_recall_at_k",
    "supporting_recall_at_k",
    "cosine_score",
    "bootstrap_ci",
    "format_ci",
    "rouge_l",
]


def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles (a, an, the), collapse white space (HotpotQA)."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def _golds(gold: str | Sequence[str]) -> list[str]:
    return [gold] if isinstance(gold, str) else list(gold)


def exact_match(prediction: str, gold: str | Sequence[str]) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    pred = normalize_answer(prediction)
    return float(any(pred == normalize_answer(g) for g in _golds(gold)))


def _prf(prediction: str, gold: str) -> tuple[float, float, float]:
    pred, ref = normalize_answer(prediction), normalize_answer(gold)
    # HotpotQA: yes/no/noanswer only match exactly.
    if pred in {"yes", "no", "noanswer"} or ref in {"yes", "no", "noanswer"}:
        hit = float(pred == ref)
        return hit, hit, hit
    pred_tokens, ref_tokens = pred.split(), ref.split()
    common = sum((Counter(pred_tokens) & Counter(ref_tokens)).values())
    if common == 0:
        return 0.0, 0.0, 0.0
    precision, recall = common / len(pred_tokens), common / len(ref_tokens)
    return precision, recall, 2 * precision * recall / (precision + recall)


def precision_recall_f1(prediction: str, gold: str | Sequence[str]) -> tuple[float, float, float]:
    """Token precision, recall and F1 against the gold answer that gives the best F1."""
    return max((_prf(prediction, g) for g in _golds(gold)), key=lambda prf: prf[2], default=(0.0, 0.0, 0.0))


def f1_score(prediction: str, gold: str | Sequence[str]) -> float:
    """Token F1 (HotpotQA normalisation), best over the gold answers."""
    return precision_recall_f1(prediction, gold)[2]


def answer_in_text(text: str, gold: str | Sequence[str]) -> bool:
    """Whether any normalised gold answer occurs in the normalised text (as whole words)."""
    norm = f" {normalize_answer(text)} "
    return any(f" {normalize_answer(g)} " in norm for g in _golds(gold) if normalize_answer(g))


def answer_recall_at_k(retrieved: Sequence[str], gold: str | Sequence[str], k: int) -> float:
    """1.0 if any of the first ``k`` retrieved texts contains a gold answer, else 0.0."""
    return float(any(answer_in_text(t, gold) for t in retrieved[:k]))


def supporting_recall_at_k(retrieved_ids: Sequence[str], supporting: Iterable[str], k: int) -> float:
    """Share of the gold supporting passages found among the first ``k`` retrieved ids."""
    gold = set(supporting)
    if not gold:
        return 0.0
    return len(gold & set(retrieved_ids[:k])) / len(gold)


def cosine_score(a: Sequence[float], b: Sequence[float]) -> float:
    """Cosine similarity of two embeddings (K²RAG scores answers by answer-gold embedding cosine)."""
    va, vb = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    denom = np.linalg.norm(va) * np.linalg.norm(vb)
    return float(va @ vb / denom) if denom else 0.0


def bootstrap_ci(values: Sequence[float], *, resamples: int = 2000, seed: int = 0) -> tuple[float, float, float]:
    """Mean and 95% percentile-bootstrap interval of ``values`` (seeded, so reruns agree)."""
    data = np.asarray(values, dtype=np.float64)
    if data.size == 0:
        return 0.0, 0.0, 0.0
    rng = np.random.default_rng(seed)
    means = data[rng.integers(0, data.size, size=(resamples, data.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(data.mean()), float(low), float(high)


def format_ci(values: Sequence[float]) -> str:
    """``mean [low, high]`` of :func:`bootstrap_ci`, for benchmark tables."""
    mean, low, high = bootstrap_ci(values)
    return f"{mean:.3f} [{low:.3f}, {high:.3f}]"


@cache
def _rouge_scorer():
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"])


def rouge_l(prediction: str, gold: str | Sequence[str]) -> float:
    """ROUGE-L F-measure (Google's ``rouge-score``, as Hugging Face Evaluate uses), best over golds."""
    return max(_rouge_scorer().score(g, prediction)["rougeL"].fmeasure for g in _golds(gold))

