"""The core's reading of "same country" questions and of the reply listing each one's country (issue 40)."""

import pytest

from multihop_rag.metrics import countries_named, normalize_entity
from multihop_rag.same_country import asks_same_country, same_country, same_country_question


def test_countries_are_named_by_name_demonym_or_alternate_in_order():
    assert countries_named("an American actor, born in Canada") == ["united states", "canada"]
    assert countries_named("Tomas Halvard, engineer") == []
    assert normalize_entity("the Jordanian") == normalize_entity("Jordan")


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("Were Tomas Halvard and Mara Quill of the same nationality?", True),
        ("Are the directors of films Lantern Road and Sable Song both from the same country?", True),
        ("Did the bands Kesh and Sable, originate from the same country?", True),
        ("Who was born first, Tomas Halvard or Mara Quill?", False),
        ("Are Tomas Halvard and Mara Quill both engineers?", False),
    ],
)
def test_a_same_country_question_asks_whether_two_things_share_a_country_or_nationality(question, expected):
    assert asks_same_country(question) is expected


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        ("Tomas Halvard: American engineer\nMara Quill: born in Ohio, United States", True),
        ("Lantern Road: directed by Franco Rossi, Italian\nSable Song: French film", False),
        # England, Scotland, Wales and Northern Ireland share the United Kingdom's citizenship
        ("Tomas Halvard: English\nMara Quill: Scottish", True),
        # no decision: a country unknown, two countries in a line, one line, the same name twice, no country known
        ("Tomas Halvard: American\nMara Quill: unknown", None),
        ("Tomas Halvard: American and Canadian\nMara Quill: Canadian", None),
        ("Tomas Halvard and Mara Quill: both American", None),
        ("Tomas Halvard: American\nTomas Halvard: Canadian", None),
        ("Tomas Halvard: Dunmere\nMara Quill: Estmark", None),
    ],
)
def test_each_things_country_is_read_from_its_own_line(reply, expected):
    assert same_country(reply) is expected


def test_a_same_country_question_asks_a_reading_and_decides_yes_or_no_in_the_comparisons_shape():
    """The shape ReSP's generator loops over with the comparisons in time and of amounts."""
    assert same_country_question("Who was born first, Tomas Halvard or Mara Quill?") is None
    comparison = same_country_question("Were Tomas Halvard and Mara Quill of the same nationality?")
    assert comparison is not None
    prompt = comparison.prompt("Were Tomas Halvard and Mara Quill of the same nationality?", "Tomas Halvard is American.")
    assert prompt.startswith("The following are given reference: Tomas Halvard is American.\nQuestion: Were Tomas")
    assert comparison.decide("Tomas Halvard: American\nMara Quill: born in Ohio, United States")[0] == "Yes"
    assert comparison.decide("Tomas Halvard: American\nMara Quill: French")[0] == "No"
    assert comparison.decide("Tomas Halvard: American\nMara Quill: unknown") is None
