"""Errors raised when the message broker (Dramatiq's Redis or RabbitMQ broker) fails."""

from __future__ import annotations

from reactorflow.errors.core import ReactorflowError


class BrokerError(ReactorflowError):
    """A job could not be sent to the message broker (it could not be reached, or refused).

    The run the job is for is in storage either way (a job is sent after its run's write), so
    nothing is lost: the sweeper sends the run's job again once it looks stalled
    (`rf.configure(stall_timeout=)`), when the broker is back.

    Attributes:
        job: The job's actor (`reactorflow.execute_run`, `.execute_unit`, `.execute_element`,
            `.execute_undo`).
        reason: What the broker client said (its exception's type and message).
        transient: True: the same call may succeed once the broker is reachable.
    """

    transient: bool = True

    def __init__(self, job: str, reason: str, *, run_id: str | None = None,
                 cause: BaseException | None = None) -> None:
        message = (f"cannot send the {job} job of run {run_id!r} to the broker: "
                   f"{reason.rstrip('. ')}. The run is stored: the sweeper sends its job again "
                   "once the broker is reachable (check the broker's URL and that it runs); do "
                   "not start the run again.")
        super().__init__(message, run_id=run_id, cause=cause)
        self.job = job
        self.reason = reason
