"""The definition layer: decorators record immutable specs; no I/O happens here."""
