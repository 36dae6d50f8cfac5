"""Chunks of a fanned-out map: how many consecutive elements one worker job carries.

A job costs a broker message (enqueue, fetch, acknowledgement) on top of its elements' own
storage writes; for elements that take microseconds, that message is most of the cost. So a job
carries a chunk of elements, run one after the other, each still locked, marked started and
settled on its own (`element_job`): a chunk changes how elements reach a worker, never what is
stored per element.

The size:

1. `map_step(chunk_size=n)`: every chunk is `n` elements (fewer at the map's end);
2. else it is measured: the owner's first dispatch sends one element per job (their cost is
   unknown), and each job, as it settles elements, asks for chunks of about `CHUNK_WORK`
   seconds of element work at the mean duration of the element bodies it ran so far
   (`Sizer.want`), at most `batch_size // SPREAD` elements (several chunks share the window, so
   several workers share the map) and `MAX_CHUNK`.

Either way a chunk lies within the map's window: at most `batch_size` elements are dispatched
without an outcome (`Storage.settle_element` claims a chunk only once it fits, see
`contract.maps.claimable`).
"""

from __future__ import annotations

from collections.abc import Iterator

from reactorflow.definition.specs import MAX_CHUNK, MapOptions

CHUNK_WORK = 0.004
"""Seconds of element work a measured chunk aims at: long enough that the broker message is a
small share of the job, short enough that a chunk never holds its elements back for long."""
SPREAD = 8
"""A measured chunk is at most this share of the window (`batch_size // SPREAD`), so the window
always holds several chunks for several workers."""


def first_size(options: MapOptions) -> int:
    """The chunk size of the owner's first dispatch (`chunk_size`, else 1: nothing measured)."""
    return options.chunk_size or 1


class Sizer:
    """The chunk size one job asks for, from the durations of the element bodies it ran."""

    __slots__ = ("_options", "_ran", "_spent")

    def __init__(self, options: MapOptions) -> None:
        self._options = options
        self._ran = 0
        self._spent = 0.0

    def ran(self, seconds: float) -> None:
        """An element body took `seconds`."""
        self._ran += 1
        self._spent += seconds

    def want(self) -> int:
        """The chunk size to claim: `chunk_size`, else measured (see the module docstring; 1
        while no body ran here)."""
        options = self._options
        if options.chunk_size is not None:
            return options.chunk_size
        most = max(1, min(options.batch_size // SPREAD, MAX_CHUNK))
        if not self._ran:
            return 1
        mean = self._spent / self._ran
        return most if mean <= CHUNK_WORK / most else max(1, min(most, int(CHUNK_WORK / mean)))


def split(first: int, count: int, size: int) -> Iterator[tuple[int, int]]:
    """Indexes `first` .. `first + count - 1` as chunks of `size` (the last one shorter):
    `(first index, count)` each."""
    for start in range(first, first + count, size):
        yield start, min(size, first + count - start)
