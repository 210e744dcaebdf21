"""System benchmarks: the whole trainer, its processes, memory and throughput
(``python -m benchmarks.system.NAME``)."""
