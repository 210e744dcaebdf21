"""Config problems only the env and the algorithm can see are caught before Ray starts.
One row per case: add rows freely."""

from __future__ import annotations

from pathlib import Path

import pytest

from distmarl.config import ConfigError, load_config
from distmarl.factory import preflight

TINY = Path(__file__).resolve().parents[1] / "examples" / "configs" / "tiny.yaml"

#: tiny.yaml with IPPO members: fragments of 16 steps * 2 envs, 2 members of 1 worker
ON_POLICY = ["algorithm.name=IPPO", "algorithm.hp={learn_step: 16}",
             "evolution.hp_config={lr: {min: 0.0001, max: 0.01}}"]

BAD = [
    ("unknown env", ["env.spec=mpe2:nothing_v1"], ["env.spec 'mpe2:nothing_v1'", "has no 'nothing_v1'"]),
    ("missing package", ["env.spec=not_a_package_xyz:env"], ["not_a_package_xyz"]),
    ("net_config for no such group", ["algorithm.net_config.bob.encoder_config.hidden_size=[3]"],
     ["bob", "speaker_0", "listener_0"]),
    ("on-policy fragments overflow the buffer", [*ON_POLICY, "buffer.capacity=100"],
     ["buffer.capacity 100 is too small for IPPO", "at least 256"]),
]


@pytest.mark.parametrize("case,sets,words", BAD, ids=[b[0] for b in BAD])
def test_preflight_names_the_problem(case, sets, words) -> None:
    cfg = load_config(TINY, sets)
    with pytest.raises(ConfigError) as err:
        preflight(cfg)
    for word in words:
        assert word in str(err.value), (word, str(err.value))


def test_preflight_returns_the_env_spaces() -> None:
    obs, act, state = preflight(load_config(TINY))
    assert {a: s.shape for a, s in obs.items()} == {"speaker_0": (3,), "listener_0": (11,)}
    assert {a: s.shape for a, s in act.items()} == {"speaker_0": (3,), "listener_0": (5,)}
    assert state.shape == (14,)  # mpe2's env.state(): the agents' observations side by side


# ------------------------------------------------------------------ the env resets and steps
BROKEN = "tests.envs.toy_envs:BrokenEnv"


@pytest.mark.parametrize("fails_on,how,words", [
    ("reset", "raise", ["on reset", "RuntimeError: simulator broke on reset"]),
    ("step", "raise", ["on step", "RuntimeError: simulator broke on step"]),
    ("reset", "abort", ["on reset", "SIGABRT", "Fatal Python error: Aborted", "in _fail"]),
], ids=["reset raises", "step raises", "reset aborts the process"])
def test_an_env_that_fails_on_reset_or_step_is_a_config_error(fails_on, how, words) -> None:
    cfg = load_config(TINY, [f"env.spec={BROKEN}", f"env.kwargs={{fails_on: {fails_on}, how: {how}}}"])
    with pytest.raises(ConfigError) as err:
        preflight(cfg)
    message = str(err.value)
    assert message.startswith(f"env.spec '{BROKEN}': the env failed on {fails_on}: "), message
    for word in words:
        assert word in message, (word, message)


def test_the_probe_takes_legal_steps_and_sees_the_game() -> None:
    from distmarl.envs.probe import probe_spec

    report = probe_spec("pettingzoo.classic:tictactoe_v3", {}, [], seed=0)
    # an illegal move would end tictactoe at once with -1 for the mover: every game runs on
    assert report.turn_based and report.masked and report.steps == 64
    assert report.scored_steps == report.zero_sum_steps >= 1
    spread = probe_spec("mpe2:simple_spread_v3", {"max_cycles": 5}, [], seed=0)
    assert not spread.turn_based and spread.zero_sum_steps == 0 < spread.scored_steps


def test_env_errors_name_the_spec_once() -> None:
    with pytest.raises(ConfigError) as err:
        preflight(load_config(TINY, ["env.spec=pettingzoo.sisl:pursuit_v3"]))
    message = str(err.value)
    assert message.startswith("env.spec 'pettingzoo.sisl:pursuit_v3': 'pursuit_v3' is an old "
                              "version"), message
    assert "env spec" not in message and message.count("pettingzoo.sisl:pursuit_v3") == 1
    assert "use 'pettingzoo.sisl:pursuit_v" in message


# ------------------------------------------------------ competitive games without a league
EXAMPLES = TINY.parent
COMPETITIVE = [
    ("tictactoe", EXAMPLES / "tictactoe_ippo_league.yaml", ["league.symmetric=false"],
     ["two players taking turns", "summed to exactly 0", "league: {symmetric: true}"]),
    ("connect four", EXAMPLES / "connect_four_ippo.yaml", [],
     ["two players taking turns", "selection is a coin toss", "league: {symmetric: true}"]),
    ("simple_tag", EXAMPLES / "simple_tag_maddpg_league.yaml",
     ["league.sides=null", "league.references=[]", "league.win_above={}"],
     ["adversary vs agent look like opposed sides", "mixes the sides",
      "league: {sides: {adversary: [adversary], agent: [agent]}}"]),
]


@pytest.mark.parametrize("case,path,sets,words", COMPETITIVE, ids=[c[0] for c in COMPETITIVE])
def test_a_competitive_game_without_a_league_warns(case, path, sets, words) -> None:
    from distmarl.factory import CompetitiveGameWarning

    with pytest.warns(CompetitiveGameWarning) as record:
        preflight(load_config(path, sets))
    warned = [str(w.message) for w in record if w.category is CompetitiveGameWarning]
    assert len(warned) == 1
    message = warned[0]
    assert "fitness is the sum of all agents' rewards" in message
    for word in words:
        assert word in message, (word, message)


@pytest.mark.parametrize("path,sets", [
    (TINY, []),  # speaker-listener
    (EXAMPLES / "spread_maddpg.yaml", []),
    (EXAMPLES / "tictactoe_ippo_league.yaml", []),  # competitive, with its league
    (EXAMPLES / "simple_tag_maddpg_league.yaml", []),
], ids=["speaker-listener", "spread", "tictactoe league", "simple_tag league"])
def test_cooperative_games_and_leagues_do_not_warn(path, sets) -> None:
    import warnings

    from distmarl.factory import CompetitiveGameWarning

    with warnings.catch_warnings():
        warnings.simplefilter("error", CompetitiveGameWarning)
        preflight(load_config(path, sets))


# ------------------------------------------------------ episodes at the default step limit
def test_an_env_without_a_limit_warns_of_the_default() -> None:
    """No limit of its own and no board: the default limit is said once; none where the
    config sets one, and none for a board game (go: a limit fitted to its board)."""
    import warnings

    from distmarl.factory import StepLimitWarning

    endless = ["env.spec=tests.envs.toy_envs:EndlessEnv", "env.kwargs={}"]
    with pytest.warns(StepLimitWarning) as record:
        preflight(load_config(TINY, endless))
    warned = [str(w.message) for w in record if w.category is StepLimitWarning]
    assert len(warned) == 1 and "set env.max_episode_steps" in warned[0]
    with warnings.catch_warnings():
        warnings.simplefilter("error", StepLimitWarning)
        preflight(load_config(TINY, [*endless, "env.max_episode_steps=500"]))
        preflight(load_config(EXAMPLES / "connect_four_ippo_league.yaml",
                              ["env.spec=pettingzoo.classic:go_v5", "env.kwargs={board_size: 5}"]))
