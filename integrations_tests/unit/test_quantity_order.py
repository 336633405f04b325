"""The core's reading of questions comparing amounts and of the reply giving each option's number (issue 40)."""

import pytest

from multihop_rag.quantity_order import QUANTITIES, quantity_comparison


@pytest.mark.parametrize(
    ("question", "options", "more"),
    [
        ("Which mountain is taller, Dunmere Peak or Estmark Ri?", ("Dunmere Peak", "Estmark Ri"), True),
        ("Which genus contains more species, Velmora or Caldor?", ("Velmora", "Caldor"), True),
        ("Which species is the most numerous, Velmora or Caldor?", ("Velmora", "Caldor"), True),
        ("Which band has fewer members, Kesh or Sable?", ("Kesh", "Sable"), False),
        ("Which river is shorter, the Velmora or the Caldor?", ("the Velmora", "the Caldor"), False),
    ],
)
def test_a_quantity_comparison_names_two_options_and_one_direction_of_amount(question, options, more):
    comparison = quantity_comparison(question)
    assert comparison is not None and comparison.options == options and comparison.more is more


@pytest.mark.parametrize(
    "question",
    [
        "Who lived longer, Tomas Halvard or Mara Quill?",  # a life's length: time_order's
        "Who was born first, Tomas Halvard or Mara Quill?",  # an order in time
        "Which is a comedy film, Lantern Road or Sable Song?",  # no amount
        "Which band has more members and fewer albums, Kesh or Sable?",  # both directions
        "Which mountain is taller than Dunmere Peak?",  # no two options
    ],
)
def test_other_questions_compare_no_amount(question):
    assert quantity_comparison(question) is None


def test_the_prompt_lists_each_option_for_its_number():
    prompt = QUANTITIES.format(reference="…", question="Which is taller, X or Y?", first="X", second="Y")
    assert prompt.endswith("X:\nY:")


MOUNTAINS = "Which mountain is taller, Dunmere Peak or Estmark Ri?"


@pytest.mark.parametrize(
    ("question", "reply", "picked"),
    [
        (MOUNTAINS, "Dunmere Peak: 8,035 m (26,362 ft)\nEstmark Ri: 7,205 metres", "Dunmere Peak"),
        (MOUNTAINS, "Dunmere Peak: 7,205 m\nEstmark Ri: height 8,035 m", "Estmark Ri"),
        ("Which genus has fewer species, Velmora or Caldor?", "Velmora: about 1,200 species\nCaldor: 70 species", "Caldor"),
        ("Which band sold more records, Kesh or Sable?", "Kesh: 25 million records\nSable: 900,000 records", "Kesh"),
        ("Which band has the most members, Kesh or Sable?", "Kesh: three members\nSable: 5 members", "Sable"),
        # the number in an option's own name is not its amount
        ("Which station has more platforms, Route 66 or Kesh?", "Route 66: 66 platforms, 4\nKesh: 2 platforms", None),
        # no decision: unknown, the same number, units of length mixed, a range, one line, one line naming both
        (MOUNTAINS, "Dunmere Peak: 8,035 m\nEstmark Ri: unknown", None),
        (MOUNTAINS, "Dunmere Peak: 8,035 m\nEstmark Ri: 8,035 m", None),
        (MOUNTAINS, "Dunmere Peak: 8,035 m\nEstmark Ri: 24,000 ft", None),
        # a number with a unit against one without, or against another unit: "18 years" is no "1780"
        ("Which satellite was operational longer, Velmora or Caldor?", "Velmora: 18 years\nCaldor: 1780", None),
        ("Which band has more members, Kesh or Sable?", "Kesh: 5 members\nSable: 3 albums", None),
        ("Which band has more members, Kesh or Sable?", "Kesh: 1 member\nSable: 3 members", "Sable"),
        ("Which satellite was operational longer, Velmora or Caldor?", "Velmora: 1978 to 1996\nCaldor: 1983–1986", None),
        (MOUNTAINS, "Dunmere Peak: 8,035 m", None),
        (MOUNTAINS, "Dunmere Peak and Estmark Ri: 8,035 m and 7,205 m", None),
    ],
)
def test_each_options_number_is_read_from_its_own_line_and_the_direction_picks(question, reply, picked):
    comparison = quantity_comparison(question)
    assert comparison is not None
    result = comparison.pick(comparison.amounts(reply))
    assert (result[0] if result else None) == picked
