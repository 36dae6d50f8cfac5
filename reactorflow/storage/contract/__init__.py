"""The storage contract and everything backend-neutral: `Storage` in parts by concern, the
values its methods pass, and the small helpers both backends use to keep the promises it
states for all of them (list cursors, scan rotation, decoding errors, the engine's method
marks). The backends import this package and never each other."""
