import pytest

from multihop_rag.metrics import (
    answer_recall_at_k,
    cosine_score,
    exact_match,
    f1_score,
    normalize_answer,
    precision_recall_f1,
    says_unknown,
    supporting_recall_at_k,
)


def test_normalisation_is_hotpotqa_s():
    assert normalize_answer("The  Orrin River!") == "orrin river"
    assert normalize_answer("An apple, a day") == "apple day"


def test_exact_match_takes_best_gold():
    assert exact_match("the Orrin River", ["Orrin River", "Orrin"]) == 1.0
    assert exact_match("Orrin", "Orrin River") == 0.0


def test_f1_tokens():
    p, r, f = precision_recall_f1("Orrin River in Astrel", "the Orrin River")
    assert (p, r) == (0.5, 1.0)
    assert f == pytest.approx(2 / 3)
    assert f1_score("Sable", ["Orrin River", "Sable River"]) == pytest.approx(2 / 3)


def test_yes_no_only_match_exactly():
    assert f1_score("yes it is", "yes") == 0.0
    assert f1_score("yes", "yes") == 1.0
    assert f1_score("no", "yes") == 0.0


def test_answer_recall_and_supporting_recall():
    texts = ["nothing here", "the town of Velmora lies on the Orrin"]
    assert answer_recall_at_k(texts, ["Velmora"], 1) == 0.0
    assert answer_recall_at_k(texts, ["Velmora"], 2) == 1.0
    assert answer_recall_at_k(["Velmorax is elsewhere"], ["Velmora"], 1) == 0.0
    assert supporting_recall_at_k(["a", "b", "c"], ["b", "d"], 2) == 0.5
    assert supporting_recall_at_k(["a"], [], 5) == 0.0


def test_cosine():
    assert cosine_score([1, 0], [1, 0]) == pytest.approx(1.0)
    assert cosine_score([1, 0], [0, 1]) == pytest.approx(0.0)
    assert cosine_score([0, 0], [1, 0]) == 0.0


def test_bootstrap_interval_brackets_the_mean_and_is_seeded():
    from multihop_rag.metrics import bootstrap_ci

    values = [0.0, 1.0] * 20
    mean, low, high = bootstrap_ci(values)
    assert mean == 0.5 and low < 0.5 < high and high - low < 0.4
    assert bootstrap_ci(values) == (mean, low, high)
    assert bootstrap_ci([]) == (0.0, 0.0, 0.0)
    assert bootstrap_ci([1.0, 1.0]) == (1.0, 1.0, 1.0)


def test_rouge_l_is_the_longest_common_subsequence_f_measure():
    from multihop_rag.metrics import rouge_l

    assert rouge_l("The garden.", ["the garden"]) == 1.0
    assert rouge_l("Orrin River flows", ["Lake", "Orrin River"]) == pytest.approx(0.8)  # P 2/3, R 1
    assert rouge_l("", "x") == 0.0


def test_says_unknown_reads_refusals_whole_or_as_a_sentence_not_titles_that_begin_with_a_refusal_word():
    """One reading for the report's "no answer" and HiRAG's unknown sub-answers: the report's prefix rule
    counted "Unknown Pleasures" as a refusal and missed "The record label of X is unknown."."""
    for said in ("", "unknown", "Unknown.", "None", "N/A", "I don't know", "I do not know the answer.",
                 "I cannot determine that from the passages.", "Not mentioned.",
                 "The average yearly income for Betty Friedan is unknown.",
                 "The record label of the Another Page performer is unknown.", "The missionaries were unknown.",
                 "The first person to marry Theodore Mosby was not mentioned in the known information.",
                 "The designer is not given in the known information.",
                 "Michael Rosenbaum's birthday is not mentioned in the given information.",
                 "The place of death of Ian Barry is not specified in the provided passages.",
                 "The information provided does not mention any place of death for King Bhumibol Adulyadej.",
                 "The husband of Jeanne-Marie Grandon was born in a location that is unknown."):
        assert says_unknown(said), said
    for answer in ("Unknown Pleasures", "The Unknown Soldier is buried in Arlington.", "Nonesuch Records",
                   "Its composer remains unknown to most listeners, Arvo Kask.", "Notting Hill",
                   "The Kesh Bridge was designed by Tomas Halvard.", "Nothin' My Love Can't Fix's album"):
        assert not says_unknown(answer), answer
