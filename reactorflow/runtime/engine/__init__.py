"""The engine: one execution's drive of an owned run (state, driver, forward, runners, step
call, rollback, parking, interrupts, async units, inputs, ownership) and its step-kind table."""
