"""Evolution strategies as pure plans: which groups are due, what each group's step changes
(copies within labels, elites kept, forced mutations of copies, migrants), determinism, the
pre-training pass, and which strategy each ``evolution.mode`` builds."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from distmarl.config import ConfigError, EvolutionConfig, load_config
from distmarl.hpo import (
    AsyncExploit,
    HyperparameterConfig,
    MutationPlan,
    Mutations,
    RLParameter,
    TournamentSelection,
)
from distmarl.hpo.multi_frequency import MultiFrequency
from distmarl.hpo.strategies import (
    AsyncPBT,
    EvolutionStrategy,
    Fitness,
    Group,
    Independent,
    MultipleFrequencies,
    Step,
    Tournament,
    make_strategy,
)
from distmarl.hpo.tournament import select_by_side

TINY = Path(__file__).resolve().parents[2] / "examples" / "configs" / "tiny.yaml"
HP = HyperparameterConfig(lr=RLParameter(1e-5, 1.0))
SEEDS = range(40)


def hps_of(n: int) -> list[dict[str, Any]]:
    """``n`` members, each with its own learning rate (so a plan's ``old`` value names the
    member whose hyperparameters it was drawn for)."""
    return [{"lr": 1e-3 * (m + 1)} for m in range(n)]


def always_mutate(mutate_elite: bool = True) -> Mutations:
    """Never ``none`` unless the elite is kept; rl_hp often, so ``old`` values show up."""
    return Mutations(0.0, 0.3, 0.5, 0.2, 0.0, 0.5, mutate_elite=mutate_elite)


def mostly_none() -> Mutations:
    """``none`` half the time unless forced; forced: always ``rl_hp``."""
    return Mutations(1.0, 0.0, 0.5, 0.0, 0.0, 1.0)


def fitness_of(latest: Sequence[float]) -> Fitness:
    return Fitness([[0.0, f] for f in latest])


def assert_drawn_for(plan: MutationPlan, hp: dict[str, Any]) -> None:
    """An rl_hp plan starts from ``hp`` (the hyperparameters its member holds once copied)."""
    if plan.kind == "rl_hp":
        assert plan.detail["old"] == hp[plan.detail["hp"]], (plan, hp)


# --- due ----------------------------------------------------------------------------------


@pytest.mark.parametrize("strategy", [
    Tournament(TournamentSelection(2, True, 3, 1), always_mutate(), HP), Independent()],
    ids=["tournament", "independent"])
def test_generation_strategies_are_due_once_every_member_waits(strategy: EvolutionStrategy
                                                               ) -> None:
    """Tournament and Independent: one group of all members, in order, only when all wait."""
    assert strategy.due([True, True, True]) == [Group((0, 1, 2))]
    assert strategy.due([True, True, True])[0].subpopulation is None
    assert strategy.due([True, False, True]) == []
    assert strategy.due([False, False, False]) == []


def test_async_pbt_is_due_per_waiting_member() -> None:
    """AsyncPBT: one single-member group per waiting member, in member order."""
    pbt = AsyncPBT(AsyncExploit(), mostly_none(), HP)
    assert pbt.due([True, False, True, True]) == [Group((0,)), Group((2,)), Group((3,))]
    assert pbt.due([False, False]) == []


def test_multiple_frequencies_is_due_per_fully_waiting_subpopulation() -> None:
    """A sub-population is due (with its index) once all of its members wait; a partly
    waiting one is not."""
    mf = MultipleFrequencies(MultiFrequency([[0, 1], [2, 3, 4]], 0.25, 0.25, 0.25),
                             mostly_none(), HP)
    assert mf.due([True] * 5) == [Group((0, 1), 0), Group((2, 3, 4), 1)]
    assert mf.due([True, True, True, False, True]) == [Group((0, 1), 0)]
    assert mf.due([False, True, True, True, True]) == [Group((2, 3, 4), 1)]
    assert mf.due([True, False, True, True, False]) == []


# --- Tournament ---------------------------------------------------------------------------

LABELS = ["a", "b", "a", "b", "a", "b"]
# label a (members 0, 2, 4) all beat label b (1, 3, 5): without labels b would copy a
LABELLED_FITNESS = [9.0, 3.0, 7.0, 1.0, 8.0, 2.0]


def test_tournament_without_labels_copies_across_them() -> None:
    """The fitness of the label tests makes cross-label copies likely when nothing stops them
    (so the labelled test below can fail)."""
    strategy = Tournament(TournamentSelection(2, True, 6, 1), always_mutate(), HP)
    crossed = [(m, src) for seed in SEEDS
               for m, src in strategy.plan(Group(tuple(range(6))), fitness_of(LABELLED_FITNESS),
                                           hps_of(6), np.random.default_rng(seed)).copies
               if LABELS[m] != LABELS[src]]
    assert crossed


@pytest.mark.parametrize("mutate_elite", [False, True])
def test_tournament_copies_within_labels_and_keeps_each_labels_elite(mutate_elite: bool) -> None:
    """Every copy stays within its label; each label's best member is an elite that keeps its
    state and (unless mutate_elite) gets no mutation; the step's copies are its selection's;
    each member's mutation is drawn for the hyperparameters it holds after its copy."""
    strategy = Tournament(TournamentSelection(2, True, 3, 1), always_mutate(mutate_elite), HP,
                          LABELS)
    hps = hps_of(6)
    copied = 0
    for seed in SEEDS:
        step = strategy.plan(Group(tuple(range(6))), fitness_of(LABELLED_FITNESS), hps,
                             np.random.default_rng(seed))
        sel = step.selection
        assert sel is not None
        assert step.copies == tuple(sel.copies())
        assert all(LABELS[m] == LABELS[src] for m, src in step.copies)
        assert sel.elites == (0, 1)  # label a's best (9.0), then label b's (3.0)
        assert sel.sources[0] == 0 and sel.sources[1] == 1
        assert [p.member for p in step.mutations] == list(range(6))
        for p in step.mutations:
            if p.member in sel.elites:
                assert (p.kind == "none") is not mutate_elite
            else:
                assert p.kind != "none"  # no_mutation is 0
            assert_drawn_for(p, hps[sel.sources[p.member]])
        assert step.hp_from == () and step.lineage_copies == () and step.events == ()
        copied += len(step.copies)
    assert copied > 0


def test_tournament_selection_is_the_selection_rule_with_the_same_draws() -> None:
    """The step's selection is exactly what the selection rule plans from the same generator
    (whole population without labels, per label with them)."""
    hist: list[list[float]] = [[1.0, 4.0], [2.0, 2.0], [5.0, 0.0], [3.0, 3.0]]
    sel = TournamentSelection(2, True, 4, 2)
    plain = Tournament(sel, always_mutate(), HP)
    labelled = Tournament(TournamentSelection(2, True, 2, 2), always_mutate(), HP,
                          ["x", "x", "y", "y"])
    for seed in range(10):
        step = plain.plan(Group((0, 1, 2, 3)), Fitness(hist), hps_of(4),
                          np.random.default_rng(seed))
        assert step.selection == sel.select(hist, np.random.default_rng(seed))
        step = labelled.plan(Group((0, 1, 2, 3)), Fitness(hist), hps_of(4),
                             np.random.default_rng(seed))
        assert step.selection == select_by_side(labelled.selection, hist, ["x", "x", "y", "y"],
                                                np.random.default_rng(seed))


# --- Independent --------------------------------------------------------------------------


def test_independent_plans_nothing_and_does_not_pretrain() -> None:
    step = Independent().plan(Group((0, 1, 2)), fitness_of([3.0, 1.0, 2.0]), hps_of(3),
                              np.random.default_rng(0))
    assert step == Step()
    assert Independent().pretrain(hps_of(3), np.random.default_rng(0)) == []


# --- AsyncPBT -----------------------------------------------------------------------------

# label a: 0-3 far ahead of label b: 4-7. Globally (quarters of 8) the top is {0, 1} and the
# bottom {7, 4}; within b (quarters of 4) the top is 6 and the bottom 7.
PBT_LABELS = ["a"] * 4 + ["b"] * 4
PBT_FITNESS = [10.0, 9.0, 8.0, 7.0, 1.0, 2.0, 3.0, 0.0]


def test_async_pbt_bottom_member_copies_the_top_and_mutates() -> None:
    """Without labels only a bottom member copies, from the top; its mutation is forced,
    names it and is drawn for the copied hyperparameters; lineage_copies match the copy."""
    pbt = AsyncPBT(AsyncExploit(0.25, 0.25), mostly_none(), HP)
    hps = hps_of(8)
    sources: set[int] = set()
    for seed in SEEDS:
        for member in range(8):
            step = pbt.plan(Group((member,)), fitness_of(PBT_FITNESS), hps,
                            np.random.default_rng(seed))
            if member not in (4, 7):
                assert step == Step()
                continue
            ((m, src),) = step.copies
            (plan,) = step.mutations
            assert m == member and src in (0, 1)
            assert plan.member == member and plan.kind != "none"
            assert_drawn_for(plan, hps[src])
            assert step.lineage_copies == ((member, src, plan),)
            assert step.selection is None and step.hp_from == ()
            sources.add(src)
    assert sources == {0, 1}


def test_async_pbt_ranks_and_copies_within_the_members_label() -> None:
    """With labels a member is ranked among its own label: 7 (bottom of b) copies b's top 6,
    never a's better members; 4 (bottom globally, not within b) carries on."""
    pbt = AsyncPBT(AsyncExploit(0.25, 0.25), mostly_none(), HP, PBT_LABELS)
    for seed in SEEDS:
        rng = np.random.default_rng(seed)
        step = pbt.plan(Group((7,)), fitness_of(PBT_FITNESS), hps_of(8), rng)
        assert step.copies == ((7, 6),)
        assert step.mutations[0].member == 7 and step.mutations[0].kind != "none"
        assert pbt.plan(Group((4,)), fitness_of(PBT_FITNESS), hps_of(8), rng) == Step()
        assert pbt.plan(Group((3,)), fitness_of(PBT_FITNESS), hps_of(8), rng).copies == ((3, 0),)


def test_async_pbt_ranks_only_evaluated_members() -> None:
    """Members without a fitness yet neither rank nor get copied; the member itself needs
    one."""
    pbt = AsyncPBT(AsyncExploit(0.5, 0.5), mostly_none(), HP)
    fitness = Fitness([[1.0], [], [5.0], []])
    for seed in range(10):
        assert pbt.plan(Group((0,)), fitness, hps_of(4), np.random.default_rng(seed)
                        ).copies == ((0, 2),)
    with pytest.raises(ValueError, match="member 1 has no fitness"):
        pbt.plan(Group((1,)), fitness, hps_of(4), np.random.default_rng(0))


# --- MultipleFrequencies ------------------------------------------------------------------

# fast sub-population 0: 0-3; slow 1: 4-7 (MF-PBT brackets of 4: 1 winner, 1 survivor, 1 open
# slot, 1 loser)
MF_FITNESS = [-10.0, -20.0, -30.0, -40.0, -5.0, -25.0, -35.0, -50.0]


def mf_strategy() -> MultipleFrequencies:
    return MultipleFrequencies(MultiFrequency([[0, 1, 2, 3], [4, 5, 6, 7]], 0.25, 0.25, 0.25),
                               mostly_none(), HP)


def test_slow_subpopulation_clones_mutate_and_fast_migrants_take_the_elites_hps() -> None:
    """Slow sub-population: loser 7 clones winner 4 and mutates (forced, drawn for 4's
    hyperparameters); open slot 6 takes the faster member 0's weights only, then its elite
    4's hyperparameters; the event names the migration."""
    hps = hps_of(8)
    for seed in SEEDS:
        step = mf_strategy().plan(Group((4, 5, 6, 7), 1), fitness_of(MF_FITNESS), hps,
                                  np.random.default_rng(seed))
        assert step.copies == ((7, 4), (6, 0))
        (plan,) = step.mutations
        assert plan.member == 7 and plan.kind != "none"
        assert_drawn_for(plan, hps[4])
        assert step.hp_from == ((6, 4),)
        assert step.lineage_copies == ((7, 4, plan), (6, 0, None))
        assert step.events == ({"member": 6, "migrated_from": 0, "weights_only": True},)
        assert step.selection is None


def test_fast_subpopulation_clones_a_slower_migrant_in_full() -> None:
    """Fast sub-population: a migrant from the slower one keeps its own hyperparameters (no
    hp_from) and does not mutate; only the loser's clone does."""
    hps = hps_of(8)
    step = mf_strategy().plan(Group((0, 1, 2, 3), 0), fitness_of(MF_FITNESS), hps,
                              np.random.default_rng(0))
    assert step.copies == ((3, 0), (2, 4))
    assert [p.member for p in step.mutations] == [3]
    assert_drawn_for(step.mutations[0], hps[0])
    assert step.hp_from == ()
    assert step.lineage_copies == ((3, 0, step.mutations[0]), (2, 4, None))
    assert step.events == ({"member": 2, "migrated_from": 4, "weights_only": False},)


def test_multiple_frequencies_needs_a_subpopulation_group() -> None:
    with pytest.raises(ValueError, match="not a sub-population"):
        mf_strategy().plan(Group((0, 1, 2, 3)), fitness_of(MF_FITNESS), hps_of(8),
                           np.random.default_rng(0))


# --- determinism and pre-training ---------------------------------------------------------


def planned(strategy: EvolutionStrategy, group: Group, latest: Sequence[float], seed: int
            ) -> Step:
    return strategy.plan(group, fitness_of(latest), hps_of(len(latest)),
                         np.random.default_rng(seed))


CASES: list[tuple[str, EvolutionStrategy, Group, list[float]]] = [
    ("tournament", Tournament(TournamentSelection(2, True, 6, 1), always_mutate(), HP),
     Group(tuple(range(6))), LABELLED_FITNESS),
    ("labelled tournament", Tournament(TournamentSelection(2, True, 3, 1), always_mutate(), HP,
                                       LABELS), Group(tuple(range(6))), LABELLED_FITNESS),
    ("async", AsyncPBT(AsyncExploit(0.5, 0.5), always_mutate(), HP), Group((7,)), PBT_FITNESS),
    ("multi_frequency", MultipleFrequencies(
        MultiFrequency([[0, 1, 2, 3, 4, 5, 6, 7]], 0.25, 0.25, 0.0), always_mutate(), HP),
     Group(tuple(range(8)), 0), MF_FITNESS),
]


@pytest.mark.parametrize("strategy,group,latest", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_same_seed_same_step(strategy: EvolutionStrategy, group: Group, latest: list[float]
                             ) -> None:
    """A step is a function of its generator's seed: equal for one seed, and the seed matters
    (some other seed gives another step)."""
    step = planned(strategy, group, latest, 3)
    assert step == planned(strategy, group, latest, 3)
    assert step.copies or step.mutations
    assert any(planned(strategy, group, latest, s) != step for s in range(10))


@pytest.mark.parametrize("strategy", [c[1] for c in CASES[:3]] + [mf_strategy()],
                         ids=[c[0] for c in CASES[:3]] + ["multi_frequency"])
def test_pretrain_mutates_every_member_once(strategy: EvolutionStrategy) -> None:
    """Every strategy that changes members pre-trains with one forced mutation per member,
    drawn for that member's hyperparameters, the same for the same seed."""
    hps = hps_of(8)
    plans = strategy.pretrain(hps, np.random.default_rng(5))
    assert [p.member for p in plans] == list(range(8))
    assert all(p.kind != "none" for p in plans)
    for p in plans:
        assert_drawn_for(p, hps[p.member])
    assert plans == strategy.pretrain(hps, np.random.default_rng(5))


def test_pretrain_is_forced_even_where_no_mutation_dominates() -> None:
    """With ``none`` half of the unforced draws, the pre-training pass still mutates all."""
    for strategy in (AsyncPBT(AsyncExploit(), mostly_none(), HP), mf_strategy(),
                     Tournament(TournamentSelection(2, True, 8, 1), mostly_none(), HP)):
        for seed in range(10):
            assert {p.kind for p in strategy.pretrain(hps_of(8), np.random.default_rng(seed))
                    } == {"rl_hp"}


# --- make_strategy ------------------------------------------------------------------------


def evolution(*overrides: str) -> EvolutionConfig:
    return load_config(TINY, list(overrides)).evolution


MF_OVERRIDES = ("population.size=5", "evolution.mode=multi_frequency",
                "evolution.subpopulations=[{size: 2, evo_steps: 100}, {size: 3, evo_steps: 300}]")


@pytest.mark.parametrize("overrides,cls", [
    ((), Tournament),
    (("evolution.mode=sync",), Tournament),
    (("evolution.mode=async",), AsyncPBT),
    (("evolution.mode=independent",), Independent),
    (MF_OVERRIDES, MultipleFrequencies),
], ids=["default", "sync", "async", "independent", "multi_frequency"])
def test_each_mode_builds_its_strategy(overrides: tuple[str, ...], cls: type) -> None:
    members = 5 if cls is MultipleFrequencies else 2
    assert type(make_strategy(evolution(*overrides), members, HP)) is cls


def test_sync_strategy_takes_the_tournament_mutation_settings_and_labels() -> None:
    """Tournament settings, mutation probabilities and mutate_elite come from the config; the
    selection is sized for the smallest label; labels pass through."""
    evo = evolution("population.size=5", "evolution.eval_loop=3",
                    "evolution.mutation.mutate_elite=false")
    labels = ["a", "a", "a", "b", "b"]
    strategy = make_strategy(evo, 5, HP, labels)
    assert isinstance(strategy, Tournament)
    assert list(strategy.labels or []) == labels and strategy.hp_config is HP
    sel = strategy.selection
    assert (sel.tournament_size, sel.elitism, sel.population_size, sel.eval_loop) == (2, True, 2, 3)
    np.testing.assert_allclose(strategy.mutations.probs, [0.0, 0.3, 0.3, 0.0, 0.4])
    assert strategy.mutations.mutate_elite is False
    unlabelled = make_strategy(evo, 5, HP)
    assert isinstance(unlabelled, Tournament)
    assert unlabelled.labels is None and unlabelled.selection.population_size == 5


def test_sync_strategy_refuses_a_tournament_larger_than_a_label() -> None:
    evo = evolution("population.size=5", "evolution.tournament.size=3")
    with pytest.raises(ValueError, match="tournament_size"):
        make_strategy(evo, 5, HP, ["a", "a", "a", "b", "b"])


def test_async_strategy_takes_its_fractions_and_labels() -> None:
    evo = evolution("evolution.mode=async", "evolution.bottom_frac=0.5",
                    "evolution.top_frac=0.125")
    strategy = make_strategy(evo, 2, HP, ["x", "y"])
    assert isinstance(strategy, AsyncPBT)
    assert (strategy.exploit.bottom_frac, strategy.exploit.top_frac) == (0.5, 0.125)
    assert list(strategy.labels or []) == ["x", "y"]


def test_multi_frequency_strategy_numbers_members_through_its_subpopulations() -> None:
    """Sub-populations of the configured sizes, members numbered through them in order, with
    the configured fractions; missing sub-populations are refused."""
    evo = evolution(*MF_OVERRIDES, "evolution.migration_frac=0.5", "evolution.top_frac=0.5")
    strategy = make_strategy(evo, 5, HP)
    assert isinstance(strategy, MultipleFrequencies)
    freq = strategy.frequencies
    assert freq.subpopulations == [[0, 1], [2, 3, 4]]
    assert (freq.top_frac, freq.bottom_frac, freq.migration_frac) == (0.5, 0.25, 0.5)
    assert strategy.due([False, False, True, True, True]) == [Group((2, 3, 4), 1)]
    with pytest.raises(ConfigError, match=r"evolution\.subpopulations: Field required"):
        evolution("evolution.mode=multi_frequency")
