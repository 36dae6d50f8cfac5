"""The field names that bind each sealed value to its place in a run (the associated data,
`envelope.associated`): one function per kind of value, so a writer and its readers always
name a field alike. A ciphertext moved to another field (or run) fails authentication."""

from __future__ import annotations

INPUTS = "inputs"
"""The run's inputs (`RunMeta.inputs`; a rewind's changed inputs, which become them)."""
ERROR = "error"
"""Every error text of the run: its error (`RunState.error`: message, traceback, rollback
failures), its steps' and elements' error records, the detail of its failure events (a run's
error is copied from its failing step's record, so they share one field)."""


def result(step: str) -> str:
    """A step's result (`StepRecord.result`)."""
    return f"steps.{step}.result"


def child_inputs(step: str) -> str:
    """A composed step's child inputs (`StepRecord.child_inputs`)."""
    return f"steps.{step}.child_inputs"


def claim(step: str) -> str:
    """An interrupt's claimed payload."""
    return f"claims.{step}"


def element(map_key: str, index: int) -> str:
    """The prefix of a map element's values: its `ElementRecord`'s `result` and `inputs` (an
    element reactor's, as `RunKeys.within` names them), and the records nested in it
    (`maps.<map>.<i>.steps.<key>.result`). (Error text is the run's: `ERROR`.)"""
    return f"maps.{map_key}.{index}."


def element_result(map_key: str, index: int) -> str:
    """A map element's result (`ElementRecord.result`)."""
    return f"maps.{map_key}.{index}.result"


def item(map_key: str, index: int) -> str:
    """A fanned-out map's item (stored for its element job)."""
    return f"maps.{map_key}.items.{index}"


def argument(map_key: str, parameter: str) -> str:
    """A fanned-out map's shared argument (`ElementArgs.values`)."""
    return f"maps.{map_key}.args.{parameter}"
