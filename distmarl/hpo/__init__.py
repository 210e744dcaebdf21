"""Evolutionary HPO (no Ray): search spaces, tournament selection, mutation plans, asynchronous
exploit, lineage. Decisions are pure functions of an explicit ``numpy.random.Generator``."""

from distmarl.hpo.apply import apply_mutation
from distmarl.hpo.hyperparams import HyperparameterConfig, RLParameter
from distmarl.hpo.lineage import Individual, Lineage
from distmarl.hpo.mutation import MutationPlan, Mutations
from distmarl.hpo.pbt import AsyncExploit
from distmarl.hpo.tournament import SelectionPlan, TournamentSelection, mean_fitness

__all__ = [
    "AsyncExploit", "HyperparameterConfig", "Individual", "Lineage", "MutationPlan", "Mutations",
    "RLParameter", "SelectionPlan", "TournamentSelection", "apply_mutation", "mean_fitness",
]
