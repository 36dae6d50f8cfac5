"""Importable fixture workflows (workers and subprocesses import them by module name)."""
