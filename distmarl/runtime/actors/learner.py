"""``LearnerShell``: one population member's algorithm, learning from the shared buffer.

It lives in a host actor (:mod:`distmarl.runtime.actors.host`) with the rest of its learner
group, or in the driver's process (the in-process fleet).

The learner samples as its own consumer (``learner-<member>``), learns, and publishes its actors'
weights to the object store every ``weight_sync_updates`` updates; the coordinator hands the
latest ``(version, ref)`` to the member's rollout workers. A copy between members is
``learner_b.load_state.remote(learner_a.get_state.remote())``: the state travels through the
object store without passing the coordinator.

An on-policy learner (IPPO, MAPPO) learns once per whole rollout fragment of its own member,
read through :class:`~distmarl.runtime.actors.fragments.FragmentReader` (each fragment once, none of
another member's), and publishes its weights after every fragment it learned: the member's
workers then collect the next fragments with them. Whatever changes its policy besides learning
(a copy from another member, a mutation, a restored snapshot) discards the fragments still
waiting, which the old policy collected.
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Sequence
from typing import Any, NamedTuple, cast

import numpy as np
import ray

from distmarl import tree
from distmarl.algorithms import FragmentLearner, ReplayLearner
from distmarl.algorithms.common.capture import StepSettings, resolve_step
from distmarl.buffers.tensors import to_torch
from distmarl.collect import fragment_to_batch
from distmarl.config import AlgorithmConfig
from distmarl.factory import converted, make_algorithm
from distmarl.hpo import MutationPlan, apply_mutation
from distmarl.runtime.actors.clients import BufferClient, RayStore, Store
from distmarl.runtime.actors.fragments import fragment_reader
from distmarl.types import (
    OFF_POLICY_FIELDS,
    JoinedSample,
    Pace,
    PriorityUpdate,
    ReadSpec,
    SampleRequest,
)

log = logging.getLogger(__name__)


def learner_device(assigned_gpus: list[Any]) -> str:
    """``cuda`` when Ray assigned this actor a GPU and torch sees one, else ``cpu``."""
    import torch

    if assigned_gpus and torch.cuda.is_available():
        return "cuda"
    return "cpu"


class TrainResult(NamedTuple):
    """What a member's learner did since it last said: updates, their mean metrics and
    seconds, the weights it last published, and what compiling its steps cost."""

    updates: int  # updates done
    metrics: dict[str, float]  # means over these updates
    seconds: float
    weights: tuple[int, Any] | None  # (version, [ObjectRef]) when new weights were published
    incarnation: str = ""  # changes when Ray restarts the learner (its state is then fresh)
    compile_seconds: float = 0.0  # spent compiling or capturing update steps meanwhile
    step_fallbacks: tuple[str, ...] = ()  # compilations or captures that failed meanwhile

    def then(self, later: TrainResult) -> TrainResult:
        """This result followed by ``later``'s, as one: updates and seconds summed, metrics
        averaged over all the updates, the latest weights and incarnation."""
        n = self.updates + later.updates
        keys = set(self.metrics) | set(later.metrics)
        metrics = {k: (self.metrics.get(k, 0.0) * self.updates
                       + later.metrics.get(k, 0.0) * later.updates) / n for k in keys} if n \
            else {}
        return TrainResult(n, metrics, self.seconds + later.seconds,
                           later.weights if later.weights is not None else self.weights,
                           later.incarnation or self.incarnation,
                           self.compile_seconds + later.compile_seconds,
                           self.step_fallbacks + later.step_fallbacks)


class Published(NamedTuple):
    """Weights put in the store: their ``version``, the ``box`` (``[ref]``) that holds them,
    and the learner's ``incarnation``, so that the caller sees a restart in the same reply."""

    version: int
    box: list[Any]
    incarnation: str


class Readout(NamedTuple):
    """What a learner read for its next updates: their batches' tensors, one per update
    (off-policy: sampled, on-policy: whole fragments), prioritised replay's importance weights
    (None without) and the sampled rows' global indices, batch after batch (off-policy)."""

    data: list[Any]
    weights: list[Any] | None
    indices: np.ndarray | None = None


def replay_readouts(joined: JoinedSample, fields: tuple[str, ...], device: str
                    ) -> list[Readout]:
    """Each request's :class:`Readout` of ``joined`` (one buffer call's batches): the arrays
    made tensors on ``device`` once (one copy each to an accelerator), each batch a view of
    its rows; one update's batches of all requests stay adjacent rows, which a stack takes
    as they are (:func:`~distmarl.algorithms.offpolicy.prepare.joined`)."""
    requests = range(len(joined.indices))
    if not joined.rows:
        return [Readout([], None) for _ in requests]
    data = to_torch(dict(zip(fields, joined.data, strict=True)), device)
    weights = None if joined.weights is None else to_torch(joined.weights, device)
    out = []
    for r in requests:
        spans = joined.batches(r)
        out.append(Readout([tree.map(lambda t, s=s, n=n: t[s:s + n], data) for s, n in spans],
                           None if weights is None else [weights[s:s + n] for s, n in spans],
                           joined.indices[r]))
    return out


def read_replay(shells: Sequence[LearnerShell], updates: Sequence[int]) -> list[Readout]:
    """Up to ``updates[k]`` batches of each off-policy member ``shells[k]``, read in one buffer
    call (the members share the buffer) as :func:`replay_readouts`."""
    requests = [s.sample_request(n) for s, n in zip(shells, updates, strict=True)]
    return replay_readouts(shells[0].buffer.sample_joined(requests), shells[0].fields,
                           shells[0].device)


class LearnerShell:
    """One member's learner (see the module's docstring)."""

    def __init__(self, member: int, algo_cfg: AlgorithmConfig, spaces: tuple[Any, ...],
                 buffer: BufferClient, seed: int, weight_sync_updates: int = 8,
                 num_envs: int = 1, fields: tuple[str, ...] = OFF_POLICY_FIELDS,
                 convert: bool = False, store: Store | None = None,
                 learner_step: str = "auto") -> None:
        import torch

        torch.set_num_threads(1)  # many actors share the cores; one thread each avoids thrash
        #: where published weights go (Ray's object store unless the fleet is in-process)
        self.store: Store = RayStore() if store is None else store
        gpu_ids = ray.get_gpu_ids() if ray.is_initialized() else []
        self.device = learner_device(gpu_ids)
        #: why the learner runs elsewhere than Ray placed it (said once, here; None: it doesn't)
        self.device_note: str | None = None
        if gpu_ids and self.device == "cpu":
            self.device_note = (f"learner {member} was given GPU {[str(g) for g in gpu_ids]} "
                                "but torch sees no CUDA device: using CPU")
            log.warning(self.device_note)
        self.member = member
        self.algo_cfg, self.spaces, self.seed = algo_cfg, spaces, seed
        #: how its stacks run their step (``resources.learner_step`` on this device: a graph
        #: needs CUDA, so a learner whose GPU torch does not see runs eagerly, as said above)
        self.step = StepSettings(resolve_step("auto" if learner_step == "graph"
                                              and self.device == "cpu" else learner_step,
                                              self.device))
        self.algo = make_algorithm(algo_cfg, spaces, device=self.device, seed=seed)
        self.algo.step = self.step
        #: a mixed population that converts: a state of another algorithm rebuilds the learner
        self.convert = convert
        self.buffer = buffer
        self.consumer = f"learner-{member}"
        self.weight_sync_updates = weight_sync_updates
        self.on_policy = self.algo.spec.on_policy
        self.num_envs = num_envs  # sub-envs per rollout worker: a fragment's E
        self.fields = fields  # the buffer's, in order (off-policy: n-step rows add n_steps)
        self.fragments = (fragment_reader(buffer, self.consumer, member, num_envs)
                          if self.on_policy else None)
        self.updates = 0
        self.version = 0
        self._since_publish = 0
        self._incarnation = uuid.uuid4().hex
        #: TD errors of the last round's prioritised batches, sent with the next sample
        self._priorities: PriorityUpdate | None = None
        #: moves on whenever what the learner reads changes (a copy, a mutation, new
        #: hyperparameters): batches read before then are not learned
        self.read_epoch = 0

    def incarnation(self) -> str:
        return self._incarnation

    def share_step(self, step: StepSettings) -> None:
        """Run and count this learner's steps with ``step`` (a learner group's, whose stacks
        are built from its first member's)."""
        self.step = self.algo.step = step

    # ------------------------------------------------------------------ learning
    def train(self, num_updates: int) -> TrainResult:
        """Up to ``num_updates`` updates: off-policy, of batch ``hp['batch_size']`` sampled
        from the buffer; on-policy, one per whole fragment of this member (``hp['learn_step']``
        steps), with the weights published after them."""
        start = time.perf_counter()
        read = self.read(num_updates)
        return self.finish(self.learn(read), time.perf_counter() - start)

    def read(self, num_updates: int) -> Readout:
        """What the next (up to ``num_updates``) updates learn from.

        Off-policy: batches in one sample call (:meth:`sample_request`,
        :func:`replay_readouts`).
        On-policy: this member's next whole fragments, rows ``(T * E, ...)`` as tensors
        ``(T, E, ...)``."""
        if self.fragments is not None:  # on-policy
            frags = self.fragments.read(int(self.algo.hp["learn_step"]), num_updates)
            return Readout([fragment_to_batch(dict(zip(self.fields, b.data, strict=True)),
                                              self.num_envs, self.device) for b in frags], None)
        return read_replay([self], [num_updates])[0]

    def sample_request(self, num_updates: int) -> SampleRequest:
        """Off-policy: the sample call for the next (up to ``num_updates``) updates, paced (the
        buffer grants as many as the member's data earned at its ``learn_step``), with this
        member's replay settings (its ``replay_ratio`` and prioritised replay's exponents,
        which may evolve) and the TD errors of the last call's prioritised batches, which go
        back with it (and are then no longer this learner's to send)."""
        hp = self.algo.hp
        spec = ReadSpec.from_ratio(hp["replay_ratio"], hp["prioritized_replay_alpha"],
                                   hp["prioritized_replay_beta"])
        request = SampleRequest(self.consumer, int(hp["batch_size"]), num_updates, spec,
                                self._priorities, Pace(self.member, float(hp["learn_step"])))
        self._priorities = None
        return request

    def learn(self, read: Readout) -> list[dict[str, float]]:
        """This member's own updates on ``read``; each update's metrics."""
        algo = self.algo
        if isinstance(algo, FragmentLearner):
            return [algo.learn(batch) for batch in read.data]
        if not read.data:
            return []
        metrics, errors = cast(ReplayLearner, algo).learn_batches(read.data, read.weights)
        self.learned(read, errors)
        return metrics

    def learned(self, read: Readout, errors: np.ndarray | None) -> None:
        """Off-policy updates on ``read`` gave these rows' TD errors (prioritised replay; None
        without): they go back to the buffer with the next sample call."""
        if errors is not None and read.indices is not None:
            self._priorities = PriorityUpdate(read.indices, errors)

    def finish(self, metrics: list[dict[str, float]], seconds: float) -> TrainResult:
        """Count the updates whose metrics are ``metrics`` (done in ``seconds``) and publish
        the weights when due."""
        n = len(metrics)
        self.updates += n
        self._since_publish += n
        weights = None
        if n and (self.on_policy or self._since_publish >= self.weight_sync_updates):
            weights = self.publish()[:2]
        built, fallbacks = self.step.log.take()
        return TrainResult(n, _means(metrics), seconds, weights, self._incarnation, built,
                           fallbacks)

    def catch_up(self) -> TrainResult:
        """No update; the weights published when it learned since it last published (a
        member at its boundary is evaluated with all it learned)."""
        weights = self.publish()[:2] if self._since_publish else None
        return TrainResult(0, {}, 0.0, weights, self._incarnation)

    def discard_pending(self) -> int:
        """Drop this member's fragments not learned yet (on-policy; off-policy: 0, and its
        batches read ahead and not learned yet are dropped when next read, for its read
        epoch moves on: they were read with its old hyperparameters)."""
        self.read_epoch += 1
        return self.fragments.discard_pending() if self.fragments is not None else 0

    def used_fragments(self) -> list[tuple[int, int]]:
        """``(first, stop)`` global buffer rows of every fragment learned, in order (on-policy;
        for tests and debugging)."""
        return self.fragments.used() if self.fragments is not None else []

    def publish(self) -> Published:
        """Put the current actor weights in the store, as the next version."""
        self.version += 1
        self._since_publish = 0
        return Published(self.version, [self.store.put(self.algo.get_weights())],
                         self._incarnation)

    # ------------------------------------------------------------------ state and evolution
    def get_state(self) -> dict[str, Any]:
        return {"algo": _to_cpu(self.algo.state_dict()), "updates": self.updates}

    def load_state(self, state: dict[str, Any]) -> dict[str, Any]:
        """Become a copy of another member (or of a checkpoint); on-policy, the fragments the
        previous policy collected are discarded. A state of another algorithm rebuilds the
        learner for it where the population converts members (else the load refuses it)."""
        name = state["algo"]["algorithm"]
        if name != self.algo.name and self.convert:
            cfg = converted(self.algo_cfg, name, state["algo"]["hp"])
            self.algo = make_algorithm(cfg, self.spaces, device=self.device, seed=self.seed)
            self.algo.step = self.step
            self._priorities = None  # TD errors of the old critic
        self.algo.load_state_dict(state["algo"])
        self.updates = int(state.get("updates", self.updates))
        self.discard_pending()
        return self.hyperparameters()

    def mutate(self, plan: MutationPlan) -> dict[str, Any]:
        """Carry out ``plan``; on-policy, fragments collected before it are discarded."""
        change = apply_mutation(self.algo, plan)
        self.discard_pending()
        return {"change": change, "hp": self.hyperparameters()}

    def hyperparameters(self) -> dict[str, Any]:
        return dict(self.algo.hp)

    def set_hyperparameters(self, values: dict[str, Any]) -> dict[str, Any]:
        """Set each of ``values`` (a population's diverse start); returns the hyperparameters."""
        for name, value in values.items():
            self.algo.set_hyperparameter(name, value)
        self.discard_pending()
        return self.hyperparameters()

    def info(self) -> dict[str, Any]:
        ctx = ray.get_runtime_context()
        return {"member": self.member, "pid": os.getpid(), "device": self.device,
                "step": self.step.mode,
                "device_note": self.device_note,
                "node_id": ctx.get_node_id(), "resources": ctx.get_assigned_resources(),
                "gpu_ids": [str(g) for g in ray.get_gpu_ids()], "updates": self.updates,
                "discarded_rows": self.fragments.discarded_rows if self.fragments else 0}


def _means(metrics: list[dict[str, float]]) -> dict[str, float]:
    """Each metric's sum over the updates divided by their number (a metric some updates
    lack, such as a delayed actor loss, counts as 0 for them)."""
    sums: dict[str, float] = {}
    for m in metrics:
        for k, v in m.items():
            sums[k] = sums.get(k, 0.0) + float(v)
    return {k: v / len(metrics) for k, v in sums.items()}


def _to_cpu(obj: Any) -> Any:
    """Every tensor in ``obj`` (dicts, lists, tuples) detached on the CPU."""
    import torch

    return tree.map_all(lambda x: x.detach().cpu() if isinstance(x, torch.Tensor) else x, obj)

