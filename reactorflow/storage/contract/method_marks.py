"""Marks on storage methods that the engine reads: `@inline` and `@foldable`.

`@inline`: a storage method that finishes without suspending (its body awaits nothing).

`Execution.checkpoint` shields every step write from cancellation (and `Execution.save_state`
a state write that carries step completions), and entering an anyio cancel scope costs more
than a whole `MemoryStorage` write. A cancellation can only reach a
coroutine where it suspends, so a write that never suspends needs no shield: the engine skips
it for a method marked `@inline`. The mark is on the function: a subclass's override, or a
replacement set on an instance (fault injection, a test's slow reply), is not marked and is
shielded. `tests/architecture/test_inline.py` checks that no marked method awaits anything.

`@foldable`: a `save_step` that only stores. The last step of a run that completes needs no
write of its own then: its record rides in the run's final save (`Execution.fold`), one round
trip less per run. The mark is on the function, as above: a replacement set on an instance or
a subclass's override may watch every step's checkpoint (fault injection, a test's slow write),
so each step is then written through it, the last one included.

A backend whose `save_step` is both may also define `save_steps(run_id, owner, steps, events)`,
marked `@inline` (`MemoryStorage` does): the checkpoints of several steps in one fenced write.
The engine then keeps the completions of steps that nothing waits for while its task does not
suspend, and writes them together before it does (`batches`, `Execution.flush`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])
INLINE = "__reactorflow_inline__"
"""The attribute that marks a method: `getattr(method, INLINE, False) is True` (`is_inline`)."""
_FOLDABLE = "__reactorflow_foldable__"


def inline(fn: F) -> F:
    """Mark an `async def` storage method whose body awaits nothing.

    Args:
        fn: the method.
    """
    setattr(fn, INLINE, True)
    return fn


def is_inline(method: Callable[..., Any]) -> bool:
    """Whether `method` (a bound method or a function) was marked `@inline`."""
    return getattr(method, INLINE, False) is True


def foldable(fn: F) -> F:
    """Mark a `save_step` that only stores (see the module).

    Args:
        fn: the method.
    """
    setattr(fn, _FOLDABLE, True)
    return fn


def is_foldable(method: Callable[..., Any]) -> bool:
    """Whether `method` (a bound method or a function) was marked `@foldable`."""
    return getattr(method, _FOLDABLE, False) is True


def batches(storage: Any) -> bool:
    """Whether `storage` takes a batch of step checkpoints in one inline write: its `save_step`
    is its own (`@inline` and `@foldable`) and it defines an `@inline` `save_steps`."""
    save = storage.save_step  # (as `is_inline` and `is_foldable`: read once per execution)
    return (getattr(save, INLINE, False) is True and getattr(save, _FOLDABLE, False) is True
            and getattr(getattr(storage, "save_steps", None), INLINE, False) is True)
