"""Analysis: figures read from a stored run without training it
(``python -m benchmarks.analysis.NAME RUN_DIR``)."""
