"""Learning benchmarks: what members learn, each trained as a sweep of seeds and arms
(:mod:`distmarl.studies.sweep`; ``python -m benchmarks.learning.NAME``)."""
