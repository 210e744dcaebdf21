"""Fixed reference opponents that give league ratings an anchor a user understands: perfect
tictactoe play, one-step lookahead connect four, a simple_tag prey that flees; beside
:class:`~distmarl.collect.evaluation.RandomPolicy` (uniformly random legal play).

Each acts like an algorithm (``act(obs, explore, action_mask)``, observations batched over
sub-envs: ``agent -> (num_envs, ...)``), from the observation alone, for whichever agents it is
handed (a board player whose mask allows nothing is not to move: it answers 0). Ties between
equally good moves are broken by a seeded generator, so a reference is not one fixed line of
play that a learner could memorise.

Board layouts (PettingZoo classic): ``observation[..., 0]`` holds the player to move's marks,
``[..., 1]`` the opponent's; tictactoe's action ``a`` is square ``observation.reshape(9)[a]``;
connect four's action is a column, row 5 the bottom.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np

from distmarl.agents import Sides
from distmarl.collect.evaluation import RandomPolicy

__all__ = ["REFERENCES", "BoardPlayer", "FleeingPrey", "LookaheadConnectFour",
           "MinimaxTicTacToe", "make_reference", "reference_sides", "tictactoe_values"]

_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))


def _split(o: Any) -> tuple[np.ndarray, np.ndarray]:
    """``(observation, action_mask)`` of one agent's batched dict observation."""
    if not isinstance(o, Mapping) or "observation" not in o or "action_mask" not in o:
        raise ValueError("a board-game reference reads dict observations with 'observation' "
                         "and 'action_mask' (PettingZoo classic)")
    return np.asarray(o["observation"]), np.asarray(o["action_mask"]).astype(bool)


class BoardPlayer:
    """A scripted board-game player: one move per sub-env from its board and mask
    (:meth:`_move`), ties broken by a generator seeded with ``seed``."""

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)

    def act(self, obs: Mapping[str, Any], explore: bool = False,
            action_mask: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        out = {}
        for agent, o in obs.items():
            board, mask = _split(o)
            out[agent] = np.array([self._move(board[i], mask[i]) for i in range(len(mask))],
                                  dtype=np.int64)
        return out

    def _move(self, board: np.ndarray, mask: np.ndarray) -> int:
        raise NotImplementedError


class MinimaxTicTacToe(BoardPlayer):
    """Perfect tictactoe: a move of the best game-theoretic value (win > draw > loss, sooner
    wins first), ties broken at random."""

    def _move(self, board: np.ndarray, mask: np.ndarray) -> int:
        mine, theirs = board[..., 0].reshape(9), board[..., 1].reshape(9)
        state = tuple(int(m) - int(t) for m, t in zip(mine, theirs))  # 1 mine, -1 theirs
        values = tictactoe_values(state)
        legal = [a for a in range(9) if mask[a]]
        if not legal:  # not this player's turn (the env ignores the action)
            return 0
        best = max(values[a] for a in legal)
        return int(self.rng.choice([a for a in legal if values[a] == best]))


def tictactoe_values(state: tuple[int, ...]) -> dict[int, float]:
    """Value of each empty square for the player to move (``state``: 1 own mark, -1 the
    opponent's, 0 empty, squares 0-8): +1 a forced win, 0 a draw, -1 a forced loss, scaled by
    0.9 per move so sooner wins and later losses rank higher."""
    return {a: -0.9 * _negamax(_flip(_place(state, a))) for a in range(9) if state[a] == 0}


def _place(state: tuple[int, ...], a: int) -> tuple[int, ...]:
    return (*state[:a], 1, *state[a + 1:])


def _flip(state: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(-s for s in state)


@cache
def _negamax(state: tuple[int, ...]) -> float:
    """Value for the player to move in ``state`` (the opponent just moved)."""
    if any(all(state[i] == -1 for i in line) for line in _LINES):
        return -1.0
    empty = [a for a in range(9) if state[a] == 0]
    if not empty:
        return 0.0
    return max(-0.9 * _negamax(_flip(_place(state, a))) for a in empty)


class LookaheadConnectFour(BoardPlayer):
    """One-step lookahead connect four: wins when it can, blocks when it must (a column where
    the opponent would win next), else a uniformly random legal column."""

    def _move(self, board: np.ndarray, mask: np.ndarray) -> int:
        legal = [c for c in range(board.shape[1]) if mask[c]]
        if not legal:  # not this player's turn (the env ignores the action)
            return 0
        for plane in (0, 1):  # my winning move first, then the opponent's to block
            wins = [c for c in legal if _wins_after(board, plane, c)]
            if wins:
                return int(self.rng.choice(wins))
        return int(self.rng.choice(legal))


def _wins_after(board: np.ndarray, plane: int, column: int) -> bool:
    """Whether a piece of ``plane``'s owner dropped in ``column`` of ``board`` ``(rows, cols,
    2)`` (it lands on the lowest empty cell) makes four in a row."""
    empty = np.flatnonzero((board[:, column, 0] == 0) & (board[:, column, 1] == 0))
    if empty.size == 0:
        return False
    row = int(empty.max())
    pieces = board[..., plane] != 0
    rows, cols = pieces.shape
    for dr, dc in ((0, 1), (1, 0), (1, 1), (1, -1)):
        run = 1
        for sign in (1, -1):
            r, c = row + sign * dr, column + sign * dc
            while 0 <= r < rows and 0 <= c < cols and pieces[r, c]:
                run += 1
                r, c = r + sign * dr, c + sign * dc
        if run >= 4:
            return True
    return False


class FleeingPrey:
    """A simple_tag prey that runs from the nearest predator (mpe2's ``simple_tag_v3``, discrete
    or continuous moves), and back towards the middle near the edge of the arena.

    A prey's observation (mpe2): its velocity (2), position (2), each obstacle's relative
    position (2 each), every other agent's relative position (predators first, 2 each), other
    prey's velocities (2 each). ``num_adversaries`` and ``num_obstacles`` must be the env's."""

    #: discrete moves (mpe2): no-op, left, right, down, up
    _MOVES = np.array([[0.0, 0.0], [-1.0, 0.0], [1.0, 0.0], [0.0, -1.0], [0.0, 1.0]])

    def __init__(self, num_adversaries: int = 3, num_obstacles: int = 2, edge: float = 0.8
                 ) -> None:
        self.num_adversaries, self.num_obstacles, self.edge = num_adversaries, num_obstacles, edge

    def act(self, obs: Mapping[str, Any], explore: bool = False,
            action_mask: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        out = {}
        for agent, o in obs.items():
            out[agent] = self._actions(np.asarray(o, dtype=np.float64))
        return out

    def direction(self, o: np.ndarray) -> np.ndarray:
        """Unit directions ``(num_envs, 2)`` away from the nearest predator, turned back
        towards the middle along each axis where the prey is past ``edge``."""
        start = 4 + 2 * self.num_obstacles
        rel = o[:, start:start + 2 * self.num_adversaries].reshape(len(o), -1, 2)
        if rel.shape[1] != self.num_adversaries:
            raise ValueError(f"a prey observation of {o.shape[1]} values holds no "
                             f"{self.num_adversaries} predators after {self.num_obstacles} "
                             f"obstacles")
        nearest = rel[np.arange(len(o)), np.argmin((rel ** 2).sum(-1), axis=1)]
        away = -nearest
        pos = o[:, 2:4]
        past = np.abs(pos) > self.edge
        away[past] = -np.sign(pos[past])
        return away / np.maximum(np.linalg.norm(away, axis=1, keepdims=True), 1e-8)

    def _actions(self, o: np.ndarray) -> np.ndarray:
        d = self.direction(o)
        return np.argmax(d @ self._MOVES.T, axis=1).astype(np.int64)


#: reference names (``league.references``) -> what they play
REFERENCES = {
    "random": "uniformly random legal play (any game)",
    "minimax": "perfect tictactoe (pettingzoo.classic:tictactoe_v3)",
    "lookahead": "one-step lookahead connect four (pettingzoo.classic:connect_four_v3)",
    "flee": "a prey fleeing the nearest predator (mpe2:simple_tag_v3's prey side)",
}


def make_reference(name: str, agents: Sequence[str], observation_spaces: Mapping[str, Any],
                   action_spaces: Mapping[str, Any], env_kwargs: Mapping[str, Any],
                   seed: int) -> Any:
    """The reference ``name`` playing ``agents`` (one side), checked against their spaces:
    ValueError naming the reference, the game it plays and what it found instead."""
    if name not in REFERENCES:
        raise ValueError(f"unknown reference {name!r}; known: {sorted(REFERENCES)}")
    if name == "random":
        return RandomPolicy(dict(action_spaces), seed)  # any seat it is handed
    if name == "flee":
        n_adv = int(env_kwargs.get("num_adversaries", 3))  # mpe2's defaults
        n_obs = int(env_kwargs.get("num_obstacles", 2))
        n_good = int(env_kwargs.get("num_good", 1))
        # velocity, position, obstacles, every other agent, other prey's velocities
        want = 4 + 2 * n_obs + 2 * (n_adv + n_good - 1) + 2 * (n_good - 1)
        _expect(name, agents, observation_spaces, lambda s: s.shape == (want,),
                f"an observation of {want} values")
        return FleeingPrey(n_adv, n_obs)
    board = (3, 3, 2) if name == "minimax" else (6, 7, 2)
    _expect(name, agents, observation_spaces,
            lambda s: hasattr(s, "spaces") and "observation" in s.spaces
            and s.spaces["observation"].shape == board, f"a {board} board with an action mask")
    return MinimaxTicTacToe(seed) if name == "minimax" else LookaheadConnectFour(seed)


def _expect(name: str, agents: Sequence[str], spaces: Mapping[str, Any], fits: Any,
            what: str) -> None:
    for a in agents:
        if not fits(spaces[a]):
            raise ValueError(f"reference {name!r} plays {REFERENCES[name]}: it needs {what}, "
                             f"but {a!r} observes {spaces[a]}")


def reference_sides(names: Sequence[str], sides: Sides, observation_spaces: Mapping[str, Any],
                    action_spaces: Mapping[str, Any], env_kwargs: Mapping[str, Any]
                    ) -> dict[str, list[str]]:
    """Reference name -> the sides it can play (each is built once to check): ``random`` every
    side, ``flee`` only simple_tag's prey. A reference that plays no side of the game is a
    ValueError naming it, the game it plays and why each side refused it."""
    out: dict[str, list[str]] = {}
    for name in names:
        if name not in REFERENCES:
            raise ValueError(f"league.references: unknown reference {name!r}; known: "
                             f"{sorted(REFERENCES)}")
        refused = []
        for side, members in sides.agents.items():
            try:
                make_reference(name, members, observation_spaces, action_spaces, env_kwargs, 0)
            except ValueError as err:
                refused.append(f"side {side!r}: {err}")
            else:
                out.setdefault(name, []).append(side)
        if name not in out:
            raise ValueError(f"league.references: {name!r} plays no side of this game ("
                             + "; ".join(refused) + ")")
    return out
