"""The execution layer: executor, rollback, ownership and run operations."""
