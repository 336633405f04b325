"""Answer and retrieval metrics: EM/F1 with the HotpotQA/SQuAD normalisation, FlashRAG's
accuracy (a gold answer contained in the prediction, with countries and demonyms as one), the option a
comparison answer picks, answer and supporting-passage recall at k and at token budgets, bootstrap
and paired-bootstrap intervals, and the embedding cosine score of K²RAG §3.3.

Every answer metric takes the best score over the acceptable gold answers.
"""

from __future__ import annotations

import json
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence
from functools import cache, lru_cache
from importlib import resources
from typing import Any

import numpy as np

__all__ = [
    "normalize_answer",
    "normalize_entity",
    "countries_named",
    "accuracy",
    "is_yes_no",
    "answer_in_question",
    "says_unknown",
    "comparison_options",
    "picked_option",
    "comparison_correct",
    "paired_bootstrap_ci",
    "answer_recall_at_budget",
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


_PUNCTUATION = str.maketrans("", "", string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


@lru_cache(maxsize=16384)
def normalize_answer(text: str) -> str:
    """Lower-case, drop punctuation and articles (a, an, the), collapse white space (HotpotQA).
    Cached: a report normalises each evidence text for every depth, budget and method that read it."""
    return " ".join(_ARTICLES.sub(" ", text.lower().translate(_PUNCTUATION)).split())


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
def _rouge_scorer() -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer(["rougeL"])


def rouge_l(prediction: str, gold: str | Sequence[str]) -> float:
    """ROUGE-L F-measure (Google's ``rouge-score``, as Hugging Face Evaluate uses), best over golds."""
    return max(_rouge_scorer().score(g, prediction)["rougeL"].fmeasure for g in _golds(gold))



@cache
def _country_names() -> dict[str, str]:
    """Normalised country name, demonym or alternate -> the country's normalised name."""
    rows = json.loads((resources.files("multihop_rag") / "data" / "demonyms.json").read_text(encoding="utf-8"))
    names: dict[str, str] = {}
    for row in rows:
        canonical = normalize_answer(row[0])
        for name in row:
            names.setdefault(normalize_answer(name), canonical)
    return names


def _with_countries(text: str) -> list[tuple[str, bool]]:
    """:func:`normalize_answer`'s words, each country name, demonym or alternate (up to four words) replaced by its
    country's normalised name; each with whether it is a country."""
    words = normalize_answer(text).split()
    names = _country_names()
    out: list[tuple[str, bool]] = []
    i = 0
    while i < len(words):
        for span in (4, 3, 2, 1):
            piece = " ".join(words[i : i + span])
            if len(words) - i >= span and piece in names:
                out.append((names[piece], True))
                i += span
                break
        else:
            out.append((words[i], False))
            i += 1
    return out


def normalize_entity(text: str) -> str:
    """:func:`normalize_answer`, then every country name, demonym or alternate as its country
    ("Jordanian" and "Jordan" -> "jordan"; "American" -> "united states")."""
    return " ".join(word for word, _ in _with_countries(text))


def countries_named(text: str) -> list[str]:
    """The countries a text names, in its order, each as its normalised name, whether by name, demonym or alternate
    ("an American actor born in Canada" -> ["united states", "canada"])."""
    return [word for word, country in _with_countries(text) if country]


def accuracy(prediction: str, gold: str | Sequence[str]) -> float:
    """FlashRAG's ``acc``: 1.0 if a gold answer (entity-normalised) occurs as whole words in the
    prediction — small models answer in sentences ("…the composer was Paul Thomas Anderson.")."""
    norm = f" {normalize_entity(prediction)} "
    return float(any(f" {normalize_entity(g)} " in norm for g in _golds(gold) if normalize_entity(g)))


def is_yes_no(gold: str | Sequence[str]) -> bool:
    """Whether the gold answer is yes or no (no passage contains it: answer recall is always 0)."""
    return normalize_answer(_golds(gold)[0]) in {"yes", "no"}


def answer_in_question(question: str, gold: str | Sequence[str]) -> bool:
    """Whether a gold answer is named in the question ("which came first, X or Y?"): answer recall
    is then trivially 1 for any evidence that repeats the question's entities."""
    return answer_in_text(question, gold)


_REFUSAL = re.compile(
    r"^\W*(?:(?:unknown|none|n/?a|no answer)\W*$"
    r"|i (?:do not|don'?t|cannot|can'?t)\b|not (?:given|known|mentioned|stated|provided|specified)\b"
    r"|the (?:information|text|passages?|context|documents?)(?: provided| given)? (?:does|do|did) not\b)",
    re.IGNORECASE,
)
_SAID_UNKNOWN = re.compile(
    r"\b(?:is|are|was|were|remains?)\s+(?:unknown|not\s+(?:given|known|mentioned|provided|specified|stated))"
    r"(?:\s+in\s+the\s+[\w\s]{0,40})?\W*$",
    re.IGNORECASE,
)


def says_unknown(answer: str) -> bool:
    """Whether an answer says it has none: empty; a refusal as the whole reply ("unknown", "None") or as its
    opening ("I cannot…", "The information provided does not…"); or a sentence ending "… is unknown." or
    "… is not mentioned in the given information." (the 1.5B writes 16 of 251 MuSiQue sub-answers so). A
    title that begins with such a word ("Unknown Pleasures") is an answer."""
    return not answer.strip() or bool(_REFUSAL.match(answer)) or bool(_SAID_UNKNOWN.search(answer))


_OPTIONS = re.compile(r",\s*(.+?)\s+or\s+(.+?)\s*\?*\s*$", re.IGNORECASE)


def comparison_options(question: str) -> tuple[str, str] | None:
    """The two options of a comparison question ("Who was born first, X or Y?" -> (X, Y)), else None."""
    match = _OPTIONS.search(question.strip())
    return (match.group(1).strip(), match.group(2).strip().rstrip("?").strip()) if match else None


def picked_option(prediction: str, options: Sequence[str]) -> str | None:
    """The option a prediction names first (an answer naming both, "X is older than Y", picks X);
    None when it names neither."""
    norm = f" {normalize_answer(prediction)} "
    found = [(norm.find(f" {normalize_answer(o)} "), o) for o in options if normalize_answer(o)]
    found = [(at, o) for at, o in found if at >= 0]
    return min(found)[1] if found else None


def comparison_correct(question: str, prediction: str, gold: str | Sequence[str]) -> float | None:
    """For a question with two options and a gold that is one of them: 1.0 if the prediction picks
    the gold option, else 0.0; None when the question is not such a comparison."""
    options = comparison_options(question)
    if options is None:
        return None
    golds = {normalize_answer(g) for g in _golds(gold)}
    if not any(normalize_answer(o) in golds for o in options):
        return None
    picked = picked_option(prediction, options)
    return float(picked is not None and normalize_answer(picked) in golds)


def paired_bootstrap_ci(
    a: Sequence[float], b: Sequence[float], *, resamples: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of ``a - b`` over paired items and its 95% percentile-bootstrap interval (items resampled
    together, so per-question difficulty cancels)."""
    diff = np.asarray(a, dtype=np.float64) - np.asarray(b, dtype=np.float64)
    return bootstrap_ci(diff.tolist(), resamples=resamples, seed=seed)


def answer_recall_at_budget(texts: Sequence[str], token_counts: Sequence[int], gold: str | Sequence[str], budget: int) -> float:
    """1.0 if a gold answer occurs in the evidence read in rank order until ``budget`` tokens are spent
    (a unit that would pass the budget is not read)."""
    spent = 0
    for text, tokens in zip(texts, token_counts, strict=True):
        if spent + tokens > budget:
            break
        spent += tokens
        if answer_in_text(text, gold):
            return 1.0
    return 0.0
