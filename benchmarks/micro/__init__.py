"""Micro benchmarks: one component timed in one process (``python -m benchmarks.micro.NAME``),
and the same measures as pytest-benchmark tests (``pytest benchmarks/micro``), outside the
default test run."""
