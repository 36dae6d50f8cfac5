"""What runs beside workers: job handling, the in-process queue, the sweeper, the scheduler."""
