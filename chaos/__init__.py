"""The chaos harness: reactorflow's promises checked under faults (not part of the wheel).

`python -m chaos --quick|--full [--lane redis|cluster|rabbitmq] [--seed N] [--runs N]
[--kills K]`, or `nox -s chaos -- --quick`. See docs/guarantees.md.
"""
