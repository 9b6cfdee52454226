"""Fuzz tests for the pure input parsers (capabilities, node-device and hwloc XML, cpuset and size text).

Strategies live in ``values``, ``raw``, ``mutate`` and ``generate``; the
oracle (what a parser may do with any input) in ``oracle``. ``bench/fuzz_long.py``
reuses them for longer, randomly seeded runs.
"""
