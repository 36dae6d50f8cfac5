"""Retry policies for step code (never applied by the job queue)."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from reactorflow.errors import DefinitionError

Strategy = Literal["exponential", "linear", "fixed"]
_STRATEGIES = ("exponential", "linear", "fixed")


class Retry:
    """How often, and how far apart, a failing step is tried again.

    `attempts` counts the first try; `backoff` is the base delay in seconds (0 retries at once).
    `strategy` spaces the tries: exponential (base, 2·base, 4·base…), linear (base, 2·base,
    3·base…) or fixed. `max_delay` caps one delay, `jitter` adds up to that fraction of it at
    random. An exception retries when it is an instance of `retry_on` and of none of
    `never_retry`. See [Concepts](concepts.md#retries).

    Args:
        attempts: Tries in all, the first one included (>= 1).
        backoff: The base delay in seconds (>= 0).
        strategy: `"exponential"`, `"linear"` or `"fixed"`.
        max_delay: The longest one delay may be, in seconds (`None`: no cap).
        jitter: A fraction from 0 to 1: up to that much of a delay is added at random.
        retry_on: Exception classes that are retried.
        never_retry: Exception classes that are never retried (checked first).

    Raises:
        DefinitionError: A value out of range, an unknown strategy, or something that is not an
            exception class in `retry_on`/`never_retry`.
    """

    __slots__ = (
        "attempts", "backoff", "jitter", "max_delay", "never_retry", "retry_on", "strategy",
    )

    def __init__(
        self,
        attempts: int = 3,
        backoff: float = 1.0,
        *,
        strategy: Strategy = "exponential",
        max_delay: float | None = None,
        jitter: float = 0.0,
        retry_on: Sequence[type[BaseException]] = (Exception,),
        never_retry: Sequence[type[BaseException]] = (),
    ) -> None:
        if isinstance(attempts, bool) or not isinstance(attempts, int) or attempts < 1:
            raise DefinitionError(
                f"Retry(attempts={attempts!r}): attempts must be a whole number >= 1 (it counts "
                "the first try)"
            )
        if isinstance(backoff, bool) or not isinstance(backoff, int | float) or backoff < 0:
            raise DefinitionError(f"Retry(backoff={backoff!r}): backoff must be seconds >= 0")
        if strategy not in _STRATEGIES:
            raise DefinitionError(
                f"Retry(strategy={strategy!r}): strategy must be one of {', '.join(_STRATEGIES)}"
            )
        if max_delay is not None and (not isinstance(max_delay, int | float) or max_delay < 0):
            raise DefinitionError(f"Retry(max_delay={max_delay!r}): max_delay must be seconds >= 0")
        if not isinstance(jitter, int | float) or not 0 <= jitter <= 1:
            raise DefinitionError(
                f"Retry(jitter={jitter!r}): jitter must be a fraction from 0 to 1"
            )
        for label, classes in (("retry_on", retry_on), ("never_retry", never_retry)):
            for cls in classes:
                if not (isinstance(cls, type) and issubclass(cls, BaseException)):
                    raise DefinitionError(
                        f"Retry({label}=...): {cls!r} is not an exception class"
                    )
        self.attempts = attempts
        self.backoff = float(backoff)
        self.strategy: Strategy = strategy
        self.max_delay = None if max_delay is None else float(max_delay)
        self.jitter = float(jitter)
        self.retry_on = tuple(retry_on)
        self.never_retry = tuple(never_retry)

    def should_retry(self, error: BaseException, attempt: int) -> bool:
        """Whether `error`, raised by try number `attempt`, earns another try.

        Args:
            error: The exception the try raised.
            attempt: The try's number, 1-based.
        """
        if attempt >= self.attempts:
            return False
        if self.never_retry and isinstance(error, self.never_retry):
            return False
        return isinstance(error, self.retry_on)

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed try number `attempt` before the next one.

        Args:
            attempt: The failed try's number, 1-based.
        """
        if self.strategy == "exponential":
            delay = self.backoff * 2.0 ** (attempt - 1)
        elif self.strategy == "linear":
            delay = self.backoff * attempt
        else:
            delay = self.backoff
        if self.max_delay is not None:
            delay = min(delay, self.max_delay)
        if self.jitter:
            delay += delay * self.jitter * random.random()
        return delay

    def __repr__(self) -> str:
        return (
            f"Retry(attempts={self.attempts}, backoff={self.backoff}, strategy={self.strategy!r}, "
            f"max_delay={self.max_delay}, jitter={self.jitter})"
        )
