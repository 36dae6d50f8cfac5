"""`rotation`: the window a bounded scan reads covers every run exactly once, in ring order."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from reactorflow.storage.contract.rotation import ring_segments, window

sizes_ = st.lists(st.integers(min_value=0, max_value=6), max_size=6)


@given(sizes=sizes_, limit=st.integers(min_value=1, max_value=40))
def test_the_segments_cover_every_position_once_in_ring_order(sizes: list[int],
                                                              limit: int) -> None:
    positions = [(i, p) for i, size in enumerate(sizes) for p in range(size)]
    read = [(i, p) for i, first, last in ring_segments(sizes, limit)
            for p in range(first, last + 1)]
    assert sorted(read) == positions  # all of them, once each
    if read:
        start = positions.index(read[0])
        assert read == positions[start:] + positions[:start]  # round the ring from one point
    if len(positions) <= limit:
        assert read == positions  # everything fits: from the start, as before


def test_a_window_starts_anywhere_when_more_match_than_fit() -> None:
    items = list(range(7))
    starts = {tuple(window(items, 3)) for _ in range(400)}
    assert starts == {tuple((s + k) % 7 for k in range(3)) for s in range(7)}
    assert window(items, 7) == items
