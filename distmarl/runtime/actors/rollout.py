"""``RolloutWorkerActor``: steps a member's vectorised envs and writes chunks to the buffer.

Each ``collect`` call carries the member's latest weights as ``(version, [ref])``; the worker
fetches them from the object store only when the version is new, so its policy lags the
learner by at most one call. Chunks go straight to the buffer actor (one hop), tagged with the
member; a chunk the buffer's rate limiter refuses is retried, never dropped.

An on-policy member's worker (IPPO, MAPPO) collects with
:class:`~distmarl.collect.Collector` in its on-policy mode, which records the behaviour policy's
log-probabilities and values; the coordinator then asks for ``learn_step`` steps per call, so
each chunk is exactly one rollout fragment (``learn_step * num_envs`` rows, one ``add``).
Episodes run on across fragments. Its policy lags the learner by at most
``workers_per_member`` updates (one fragment with one worker): see
:meth:`distmarl.runtime.logic.datapath.OnPolicyPath.may_collect`.
"""

from __future__ import annotations

import os
import time
from typing import Any, NamedTuple

import ray

from distmarl.collect import Collector, RandomPolicy, evaluate, fixed_scores
from distmarl.collect.cancel import NEVER, Cancel
from distmarl.collect.evaluation import Scores
from distmarl.config import AlgorithmConfig, EnvConfig
from distmarl.factory import converted, make_algorithm, make_venv
from distmarl.league.seating import GameResults, LeaguePlan, MatchResult, SeatingRules
from distmarl.league.state import member_id
from distmarl.league.worker import worker_league
from distmarl.runtime.actors.buffer import chunk_rows
from distmarl.runtime.actors.clients import BufferClient, RayStore, Store
from distmarl.runtime.logic.time_spent import CALL, WAITING_DATA, Ledger, TimeSpent
from distmarl.types import RolloutSpec, TransitionChunk

RETRY_SLEEP_S = 0.01


class CollectResult(NamedTuple):
    env_steps: int
    episode_scores: list[float]
    episode_lengths: list[int]
    version: int  # weights version the chunk was collected with
    seconds: float
    refused: int  # times the rate limiter refused the chunk before it was stored
    nonfinite_rows: int = 0  # agent rows dropped for NaN / inf values (env.nonfinite="drop")
    match_results: tuple[MatchResult, ...] = ()  # league games ended (learner, opponent, result)
    capped_episodes: int = 0  # episodes ended that the env's step limit cut (truncated)


class RolloutShell:
    """The plain class behind :data:`RolloutWorkerActor`."""

    def __init__(self, member: int, worker: int, env_cfg: EnvConfig, algo_cfg: AlgorithmConfig,
                 spaces: tuple[Any, ...], buffer: BufferClient, seed: int,
                 spec: RolloutSpec | None = None, league: SeatingRules | None = None,
                 store: Store | None = None, cancel: Cancel = NEVER) -> None:
        import torch

        torch.set_num_threads(1)
        #: where the weights it is handed live (Ray's object store unless in-process)
        self.store: Store = RayStore() if store is None else store
        #: the run's stop, asked between env steps of evaluations and games (on Ray: whether
        #: the coordinator cancelled the call, :class:`~distmarl.runtime.actors.cancel.RayTaskCancel`)
        self.cancel = cancel
        self.member, self.worker = member, worker
        self.env_cfg, self.buffer = env_cfg, buffer
        self.algo_cfg, self.spaces, self.seed = algo_cfg, spaces, seed
        #: the member's policy: what acting needs, no critics, targets or optimisers
        self.algo = make_algorithm(algo_cfg, spaces, device="cpu", seed=seed, learner=False)
        self.action_spaces = spaces[1]
        spec = self.algo.spec if spec is None else spec  # the run's: its rows, shared
        self.venv = make_venv(env_cfg, seed=seed, global_state=spec.global_state)
        self.collector = Collector(self.venv, self.algo, seed=seed, spec=spec)
        self.eval_venv: Any = None
        #: a league's seats and games (a cooperative run's: none)
        self.league = worker_league(league, member, algo_cfg, spaces, env_cfg.kwargs, seed,
                                    self.store.get)
        self.version = -1
        self.env_steps = 0
        self._dropped_reported = 0  # the venv's dropped_nonfinite already sent to the coordinator
        #: seconds in calls, and waiting for the buffer to take a chunk (where time goes)
        self.ledger = Ledger("rollout")

    def _sync(self, version: int, weights_box: list[Any] | None) -> None:
        if weights_box is not None and version != self.version:
            weights = self.store.get(weights_box[0])
            if weights["algorithm"] != self.algo.name:  # the member took another's state
                self._rebuild(weights["algorithm"])
            self.algo.set_weights(weights)
            self.version = version

    def _rebuild(self, name: str) -> None:
        """Act as a member of algorithm ``name`` from now on (its weights load next)."""
        self.algo = make_algorithm(converted(self.algo_cfg, name), self.spaces, device="cpu",
                                   seed=self.seed, learner=False)
        self.collector.set_algorithm(self.algo)

    def collect(self, num_steps: int, version: int, weights_box: list[Any] | None,
                plan: LeaguePlan | None = None) -> CollectResult:
        """Step ``num_steps`` vectorised steps with the newest weights; store the chunk (for
        an on-policy member: one whole fragment). In a league, ``plan`` gives the next
        matches and their opponents (running games go on)."""
        with self.ledger.spend(CALL):
            return self._collect(num_steps, version, weights_box, plan)

    def _collect(self, num_steps: int, version: int, weights_box: list[Any] | None,
                 plan: LeaguePlan | None) -> CollectResult:
        start = time.perf_counter()
        self._sync(version, weights_box)
        self.league.seat(plan, self.collector)
        rollout = self.collector.collect(num_steps)
        chunk = TransitionChunk(rollout.data, self.member, rollout.env_steps)
        refused = 0
        with self.ledger.spend(WAITING_DATA):
            while not self.buffer.add(chunk).accepted:  # sent again only once there is room
                refused += 1
                while not self.buffer.room(self.member, chunk_rows(chunk)):
                    time.sleep(RETRY_SLEEP_S)
        self.env_steps += rollout.env_steps
        dropped = self.venv.dropped_nonfinite - self._dropped_reported
        self._dropped_reported += dropped
        return CollectResult(rollout.env_steps, rollout.episode_scores, rollout.episode_lengths,
                             self.version, time.perf_counter() - start, refused, dropped,
                             tuple(rollout.match_results), rollout.capped)

    def play(self, version: int, weights_box: list[Any] | None,
             opponent: tuple[str, int | None, list[Any] | None, str], games: int, seed: int,
             side: str | None, explore: bool = False, learner: str | None = None
             ) -> GameResults:
        """League evaluation: ``games`` games of this member (on ``side``; None in a symmetric
        game: every seat in turn) against ``opponent`` ``(player, version, weights box,
        side)``, on the evaluation envs; results as ``(member, opponent, result)``, with
        the count of games the step limit cut (draws).
        ``learner`` (``ref/<name>``) plays instead of the member (a final evaluation's
        baseline)."""
        with self.ledger.spend(CALL):
            if learner is None:
                self._sync(version, weights_box)
                self._seed_sampling(explore, seed)
                me: tuple[str, Any] = (member_id(self.member), self.algo)
            else:
                me = self.league.reference_player(learner, side, seed + 1)
            return self.league.play(self._eval_venv(seed), me, opponent, games, seed, side,
                                    explore, self.cancel)

    def evaluate(self, version: int, weights_box: list[Any] | None, episodes: int,
                 max_steps: int | None, seed: int, explore: bool = False) -> Scores:
        """Scores on a separate copy of the envs (the collection's episodes go on undisturbed),
        without exploration, or (``explore``) sampling the policy from a stream seeded by
        ``seed``; with the count of unfinished episodes (:class:`Scores`)."""
        with self.ledger.spend(CALL):
            self._sync(version, weights_box)
            self._seed_sampling(explore, seed)
            return evaluate(self._eval_venv(seed), self.algo, episodes=episodes,
                            max_steps=max_steps, seed=seed, explore=explore, cancel=self.cancel)

    def score_fixed(self, version: int, weights_box: list[Any] | None, episodes: int,
                    seed: int, random: bool = False, explore: bool = False) -> Scores:
        """Scores of the fixed set of ``episodes`` episodes seeded by ``seed``: of the member's
        policy (sampled with ``explore``, as :meth:`evaluate`), or (``random``) of uniform
        random actions on the same episodes."""
        with self.ledger.spend(CALL):
            if random:
                return fixed_scores(self._eval_venv(seed),
                                    RandomPolicy(self.action_spaces, seed), episodes, seed,
                                    cancel=self.cancel)
            self._sync(version, weights_box)
            self._seed_sampling(explore, seed)
            return fixed_scores(self._eval_venv(seed), self.algo, episodes, seed, explore,
                                self.cancel)

    def _seed_sampling(self, explore: bool, seed: int) -> None:
        """A sampled evaluation's actions come from a stream seeded by its episodes' seed, so
        a checkpoint's member scores the same again (the collection's stream restarts too)."""
        if explore:
            self.algo.reseed(seed)

    def _eval_venv(self, seed: int) -> Any:
        """A separate copy of the envs for evaluations (made at the first)."""
        if self.eval_venv is None:
            self.eval_venv = make_venv(self.env_cfg, mode="sync", seed=seed)
        return self.eval_venv

    def info(self) -> dict[str, Any]:
        ctx = ray.get_runtime_context()
        return {"member": self.member, "worker": self.worker, "pid": os.getpid(),
                "node_id": ctx.get_node_id(), "env_steps": self.env_steps, "version": self.version}

    def start_clock(self) -> None:
        """Training starts: count the worker's time from now."""
        self.ledger.start()

    def time_spent(self) -> list[TimeSpent]:
        return [self.ledger.read()]

    def close(self) -> None:
        for venv in (self.venv, self.eval_venv):
            if venv is not None:
                venv.close()


RolloutWorkerActor = ray.remote(RolloutShell)
