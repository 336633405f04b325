"""CallClock: the calls in flight and the time covered by at least one call."""

from multihop_rag.llm.usage import CallClock


def test_a_clock_counts_the_calls_in_flight_and_their_union():
    clock = CallClock()
    first, second = clock.start(), clock.start()
    assert clock.in_flight() == 2
    clock.stop(first)
    assert clock.in_flight() == 1
    clock.stop(second)
    assert clock.in_flight() == 0
    (a_begin, a_end), (b_begin, b_end) = clock.intervals()
    assert clock.busy() == max(a_end, b_end) - min(a_begin, b_begin)  # overlapping: counted once
