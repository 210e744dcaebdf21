"""The process a user starts: ``train`` (Ray started, joined, or none with ``--local``),
stopping on signals, the progress display, and the checks a resume makes before Ray starts."""
