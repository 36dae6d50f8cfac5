"""reactorflow benchmarks: `python -m benchmarks [--quick] [name ...]` (or `nox -s bench`).

Each benchmark measures reactorflow and, in the same run, the baseline its target is written
against, then prints both side by side with a target verdict (MET / MISSED). Nothing here
asserts: a missed target is reported, never raised. Figures are the median over repetitions
with the min-max across repetitions, as in the project's performance anchors.

Modules not starting with `_` are benchmarks; each defines `TITLE`, `NEEDS_REDIS` and
`async def run(ctx: Context) -> None`.
"""
