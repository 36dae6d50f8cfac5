"""The worker layer: Dramatiq actors for runs handed off, async units and retries exhausted.

Importing `reactorflow` does not import Dramatiq; it is imported on first use.
"""
