"""n-step transitions from a stream of one-step chunks, no Ray.

An off-policy row ``(obs, action, reward, next_obs, terminated, truncated, active)`` of step
``s`` becomes the row of the window ``s .. s + k - 1`` of its sub-env, ``k = n`` or fewer where
the episode ends first (a termination or a truncation of the sub-env: no window crosses a
reset):

* ``obs``, ``action``, ``active``: step ``s``'s;
* ``reward``: the ``n`` rewards ``r_s .. r_{s+k-1}`` *undiscounted*, zero after ``k`` and after
  the agent's own termination (shape ``(n,)`` per agent): members that share the buffer may
  discount them with different, evolving ``gamma``;
* ``next_obs``, ``truncated``: step ``s + k - 1``'s (the true final observation where the
  episode ended, as one-step rows have it);
* ``terminated``: whether the agent terminated anywhere in the window (then nothing
  bootstraps);
* ``n_steps``: ``k``, so a learner bootstraps with ``gamma ** k``.

A window needs ``n - 1`` later steps, so rows leave ``n - 1`` steps after their step, or at
their episode's end; :class:`NStepWindow` keeps the steps not yet complete between chunks.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from distmarl import tree
from distmarl.types import N_STEPS_FIELD

Rows = dict[str, dict[str, Any]]


class NStepWindow:
    """Turns one-step chunks of ``num_envs`` sub-envs into n-step rows (module docstring).

    :param n: steps per window (1: rows pass through unchanged, with ``n_steps`` 1).
    :param num_envs: sub-envs per vector step.
    """

    def __init__(self, n: int, num_envs: int) -> None:
        if int(n) < 1:
            raise ValueError(f"n_step must be >= 1, got {n}")
        self.n, self.num_envs = int(n), int(num_envs)
        self._rows: Rows | None = None  # the last steps kept, (P * E, ...) time-major
        self._ended = np.zeros((0, self.num_envs), dtype=bool)  # (P, E) episode ended there
        self._emitted = np.zeros((0, self.num_envs), dtype=bool)  # (P, E) row already sent

    @property
    def pending(self) -> int:
        """Rows kept for later chunks (their windows are not complete yet)."""
        return int((~self._emitted).sum())

    def add(self, rows: Rows, ended: np.ndarray) -> Rows:
        """The n-step rows completed by one more chunk.

        :param rows: ``rows[field][agent]`` of shape ``(T * E, ...)``, time-major.
        :param ended: ``(T, E)`` bool, whether the sub-env's episode ended at that step.
        :returns: the completed rows, time-major by their first step, with ``reward`` of shape
            ``(rows, n)`` and ``n_steps`` ``(rows,)`` int32 per agent.
        """
        e_count = self.num_envs
        ended = np.asarray(ended, dtype=bool).reshape(-1, e_count)
        if self._rows is not None:
            rows = {f: {a: tree.concat([self._rows[f][a], v]) for a, v in per.items()}
                    for f, per in rows.items()}
        ended = np.concatenate([self._ended, ended])
        emitted = np.concatenate([self._emitted, np.zeros((len(ended) - len(self._emitted),
                                                            e_count), dtype=bool)])
        steps = len(ended)
        length, complete = self._windows(ended)
        send = complete & ~emitted
        out = self._gather(rows, ended, send, length)
        keep = min(self.n - 1, steps)
        first = (steps - keep) * e_count
        self._rows = {f: {a: tree.take(v, np.arange(first, steps * e_count))
                          for a, v in per.items()} for f, per in rows.items()}
        self._ended = ended[steps - keep:]
        self._emitted = (emitted | send)[steps - keep:]
        return out

    def _windows(self, ended: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Per (step, sub-env): the window's length ``k`` and whether all of it is here."""
        steps = len(ended)
        length = np.full(ended.shape, self.n, dtype=np.int64)
        complete = np.zeros(ended.shape, dtype=bool)
        for s in range(steps):
            stop = min(steps, s + self.n)
            found = ended[s:stop]
            hit = found.any(axis=0)
            first_end = np.argmax(found, axis=0)  # offset of the first ended step
            length[s] = np.where(hit, first_end + 1, self.n)
            complete[s] = hit | (s + self.n <= steps)
        return length, complete

    def _gather(self, rows: Rows, ended: np.ndarray, send: np.ndarray,
                length: np.ndarray) -> Rows:
        e_count = self.num_envs
        s_idx, e_idx = np.nonzero(send)  # time-major order
        k = length[s_idx, e_idx]
        start = s_idx * e_count + e_idx
        last = (s_idx + k - 1) * e_count + e_idx
        out: Rows = {f: {} for f in rows}
        out[N_STEPS_FIELD] = {}
        for a in rows["reward"]:
            for f in ("obs", "action", "active"):
                out[f][a] = tree.take(rows[f][a], start)
            for f in ("next_obs", "truncated"):
                out[f][a] = tree.take(rows[f][a], last)
            term = np.asarray(rows["terminated"][a], dtype=bool)
            rew = np.asarray(rows["reward"][a], dtype=np.float32).reshape(len(term))
            rewards = np.zeros((len(start), self.n), dtype=np.float32)
            alive = np.ones(len(start), dtype=bool)
            terminated = np.zeros(len(start), dtype=bool)
            for i in range(self.n):
                inside = i < k
                at = np.where(inside, start + i * e_count, start)
                rewards[:, i] = np.where(inside & alive, rew[at], 0.0)
                hit = inside & alive & term[at]
                terminated |= hit
                alive &= ~hit
            out["reward"][a] = rewards
            out["terminated"][a] = terminated
            out[N_STEPS_FIELD][a] = k.astype(np.int32)
        return out
