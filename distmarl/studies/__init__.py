"""Studies: many runs, one answer with its uncertainty (statistics, reports)."""
