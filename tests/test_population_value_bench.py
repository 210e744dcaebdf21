"""The population-value benchmark's arithmetic: arms, time to target, paired differences."""

from __future__ import annotations

import pytest

from benchmarks.learning.population_value import (
    ARMS,
    arm_overrides,
    best_fixed_replay,
    paired,
    timed,
    to_target,
)


def test_each_arm_spends_the_same_total_env_steps() -> None:
    assert arm_overrides("evolving", 4, 5000, 60000) == [
        "training.max_steps_per_member=60000", "replay.prioritized_replay=false", "replay.n_step=1"]
    assert "evolution.mode=independent" in arm_overrides("independent", 4, 5000, 60000)
    single = arm_overrides("single", 4, 5000, 60000)
    assert {"training.max_steps_per_member=240000", "population.size=1",
            "evolution.evo_steps=20000"} <= set(single)
    assert "evolution.initial_hp=sampled" in arm_overrides("sampled", 4, 5000, 60000)
    per = arm_overrides("per_nstep", 4, 5000, 60000)
    assert {"replay.prioritized_replay=true", "replay.n_step=3"} <= set(per)
    assert "replay.prioritized_replay=false" not in per
    mixed = arm_overrides("mixed", 4, 5000, 60000)
    assert mixed[1] == ("population.members=[{algorithm: MADDPG, count: 2}, "
                        "{algorithm: MATD3, count: 2}]")
    assert "replay.replay_ratio=0.75" in arm_overrides("replay_0.75", 4, 5000, 60000)
    # the whole search space replaced: the ratio is the only hyperparameter mutated
    assert arm_overrides("replay_evolved_alone", 4, 5000, 60000)[2] == (
        "evolution.hp_config={replay_ratio: {min: 0.05, max: 0.95}}")
    assert arm_overrides("mf_pbt", 4, 5000, 60000)[4] == (
        "evolution.subpopulations=[{size: 3, evo_steps: 5000}, {size: 3, evo_steps: 20000}]")
    with pytest.raises(ValueError, match="unknown arm 'both'"):
        arm_overrides("both", 4, 5000, 60000)


def test_time_to_target_is_the_first_generation_whose_best_fitness_reaches_it() -> None:
    summary = {"fitness_history": [[-60.0, -50.0], [-31.0, -40.0], [-29.5, -45.0], [-20.0, -20.0]],
               "generation_marks": [[10.0, 1000], [20.0, 2000], [30.5, 3000], [40.0, 4000]],
               "members": []}
    assert to_target(summary, -30.0, 500) == (3000, 30.5)
    assert to_target(summary, -10.0, 500) == (None, None)


def test_time_to_target_without_generations_is_the_first_member_evaluation_reaching_it() -> None:
    # asynchronous members: the third evaluation (k = 3) of member 1 is the first at -30 or
    # above, at 3 * 500 of its own env steps, 2 members: 3,000 in all; seconds unrecorded
    summary = {"fitness_history": [], "generation_marks": [],
               "members": [{"fitness": [-60.0, -40.0, -31.0, -10.0]},
                           {"fitness": [-50.0, -35.0, -29.0]}]}
    assert to_target(summary, -30.0, 500) == (3000, None)
    assert to_target(summary, -5.0, 500) == (None, None)
    assert not timed([{"steps_to_target": 3000, "seconds_to_target": None}])
    assert timed([{"steps_to_target": None, "seconds_to_target": None},
                  {"steps_to_target": 3000, "seconds_to_target": 30.5}])


def test_paired_difference_pairs_seeds_and_calls_noise_unresolved() -> None:
    def runs(arm: str, scores: dict[int, float]) -> list[dict[str, float]]:
        return [{"seed": s, "final_score": v, "best_member_score": v + 1.0, "arm": arm}
                for s, v in scores.items()]

    by_arm = {"evolving": runs("evolving", {0: -20.0, 1: -22.0, 2: -21.0}),
              "independent": runs("independent", {0: -30.0, 1: -31.0, 3: -5.0}),
              **{a: [] for a in ARMS if a not in ("evolving", "independent")}}
    lines = paired("task", by_arm)
    # seeds 0 and 1 only; against independent's best member (its score + 1): +9.0 and +8.0
    assert lines[0].startswith("- task: evolving elite minus independent best member, seeds [0, 1]: +8.50 (standard error 0.50)")
    assert lines[0].endswith("resolved: better")
    by_arm["independent"] = runs("independent", {0: -10.0, 1: -35.0})
    assert "not resolved" in paired("task", by_arm)[1]


def test_evolved_replay_is_paired_with_the_best_fixed_ratio() -> None:
    def runs(arm: str, scores: dict[int, float], steps: dict[int, int | None]
             ) -> list[dict[str, object]]:
        return [{"seed": s, "final_score": v, "best_member_score": v, "arm": arm,
                 "steps_to_target": steps[s]} for s, v in scores.items()]

    none = {0: None, 1: None}
    by_arm = {a: [] for a in ARMS}
    by_arm.update({"replay_0.25": runs("replay_0.25", {0: -40.0, 1: -30.0}, none),
                   "replay_0.5": runs("replay_0.5", {0: -20.0, 1: -24.0}, {0: 100, 1: None}),
                   "replay_0.75": runs("replay_0.75", {0: -50.0, 1: -20.0}, none),
                   "replay_evolved": runs("replay_evolved", {0: -21.0, 1: -22.0},
                                          {0: 120, 1: 140})})
    assert best_fixed_replay(by_arm) == "replay_0.5"  # best mean: -22 against -35 and -35
    lines = paired("task", by_arm)
    assert lines[0] == ("- task: env steps to target per seed, replay_evolved / replay_0.5 "
                        "(best fixed ratio): 0: 120 / 100, 1: 140 / never")
    assert lines[1].startswith("- task: replay_evolved elite minus replay_0.5 elite, seeds "
                               "[0, 1]: +0.50 (standard error 1.50)")
