"""Learning benchmarks: what members learn, trained per seed through :mod:`benchmarks.harness`
(``python -m benchmarks.learning.NAME``)."""
