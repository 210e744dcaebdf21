"""The interface every population member's algorithm implements (MADDPG, MATD3, IPPO, MAPPO).

Usage, in a rollout worker and a learner (the runtime wraps these same calls in Ray actors)::

    algo = MADDPG(observation_spaces, action_spaces, net_config, hp, device="cpu", seed=0)
    # rollout worker
    algo.set_weights(weights)                      # from the learner's get_weights()
    actions = algo.act(obs)                        # obs: agent -> (num_envs, *obs_shape)
    actions, extras = algo.act_with_info(obs)      # on-policy: with log-probs and values
    metrics = algo.learn(fragment)                 # on-policy: field -> agent -> (T, E, ...)
    algo.reset_noise(terminated | truncated)       # sub-envs whose episode ended
    # learner
    metrics, _ = algo.learn_batches([batch])       # off-policy: field -> agent -> (B, ...)
    weights = algo.get_weights()                   # numpy only, for the workers
    state = algo.state_dict()                      # torch.save / torch.load(weights_only=True)
    # HPO (distmarl.hpo plans, the runtime applies)
    algo.set_hyperparameter("lr_actor", 5e-4)
    algo.mutate_architecture("add_node", rng)

Three roles, so that each caller depends on no more than it uses:

* :class:`Policy`: acting alone (``act``, ``set_weights``, ``reseed``), what rollout workers,
  league opponents, evaluation and exported policies need;
* :class:`ReplayLearner` (MADDPG, MATD3): ``learn_batches(batches, weights)``, one update per
  replayed batch, the rows' new priorities under prioritised replay;
* :class:`FragmentLearner` (IPPO, MAPPO): ``learn(fragment)`` from a whole fragment of its own
  rollouts, which it collects with ``act_with_info`` and ``value_estimates``.

What the runtime asks of an algorithm before building one, it asks once:
:meth:`Algorithm.rollout_spec` gives the :class:`~distmarl.types.RolloutSpec` (family, global
state, fields) that the vector env, collector, buffer and learner are built from; a built one
has its own as :attr:`Algorithm.spec`.

Everything that crosses a process boundary is plain data: dicts, lists, numbers, strings,
numpy arrays (weights) or tensors (state). Every random choice of a mutation comes from the
``numpy.random.Generator`` passed in.
"""

from __future__ import annotations

import copy
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol, runtime_checkable

import numpy as np
import torch

from distmarl.algorithms.common.capture import StepSettings
from distmarl.config.hparams import check_hp
from distmarl.types import RolloutSpec

AgentObs = Mapping[str, np.ndarray]
Batch = Mapping[str, Mapping[str, torch.Tensor]]


@runtime_checkable
class Acting(Protocol):
    """What evaluation and league games call: actions per agent for a batch of observations
    (any :class:`Policy`, or a scripted player: random play, a league's references).
    ``obs``: agent -> a batch ``(num_envs, ...)`` (an array, or a dict of them)."""

    def act(self, obs: Any, explore: bool = True,
            action_mask: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]: ...


@runtime_checkable
class Policy(Acting, Protocol):
    """A member's policy apart from its learning: what rollout workers and league opponents
    hold (weights come from the learner) and exported policies are read from
    (:class:`Algorithm` is one)."""

    agents: list[str]

    def set_weights(self, weights: Mapping[str, Any]) -> None: ...

    def reseed(self, seed: int | None) -> None: ...


class Algorithm(ABC):
    """A multi-agent learner: acts for every agent, learns from batches, saves and evolves."""

    #: the name configs use (``algorithm.name``), stored in ``state_dict()["algorithm"]``
    name: ClassVar[str]
    #: every hyperparameter the algorithm has, with its default
    DEFAULT_HP: ClassVar[dict[str, Any]]
    device: torch.device
    #: current hyperparameters (plain numbers / bools); change them with set_hyperparameter
    hp: dict[str, Any]

    @classmethod
    @abstractmethod
    def rollout_spec(cls, hp: Mapping[str, Any] | None, state_space: Any) -> RolloutSpec:
        """What the rollouts of one built with ``hp`` and ``state_space`` (the env's global
        state space; None: the env has none) record: its family and whether it reads the
        env's global state."""

    @property
    @abstractmethod
    def spec(self) -> RolloutSpec:
        """What this one's rollouts record (:meth:`rollout_spec` of what it was built with)."""

    def __init__(self, observation_spaces: Mapping[str, Any], action_spaces: Mapping[str, Any],
                 net_config: Mapping[str, Any] | None, hp: Mapping[str, Any] | None = None,
                 device: str | torch.device = "cpu", seed: int | None = None,
                 learner: bool = True) -> None:
        """The constructor every algorithm has (one whose :meth:`rollout_spec` can read the
        env's global state also takes ``state_space=``). It sets what every algorithm needs
        first: agents (in observation-space order), their spaces, the net_config, device,
        hyperparameters (the defaults of ``name`` with ``hp`` over them, checked by
        :func:`distmarl.config.hparams.check_hp`) and the seeded numpy and torch generators.

        ``learner=False`` builds a policy: what acting needs and nothing more (actors and
        exploration; PPO's policies, log-stds and value networks), without critics, target
        copies or optimisers. It acts, takes weights (:meth:`set_weights`) and reseeds; it
        cannot learn (what rollout workers and league opponents hold)."""
        self.agents = list(observation_spaces)
        if set(self.agents) != set(action_spaces):
            raise ValueError(f"observation spaces for {self.agents} but action spaces for "
                             f"{list(action_spaces)}")
        self.observation_spaces = dict(observation_spaces)
        self.action_spaces = {a: action_spaces[a] for a in self.agents}
        self.net_config = copy.deepcopy(dict(net_config or {}))
        self.device = torch.device(device)
        #: whether this one learns (False: a policy, see the constructor)
        self.learner = learner
        #: how its stacks run their update step (a learner sets it from
        #: ``resources.learner_step``; off-policy stacks read it, on-policy ones run eagerly:
        #: their epochs read masks on the host every minibatch)
        self.step = StepSettings()
        self.hp = check_hp(self.name, hp)
        self._rng = np.random.default_rng(seed)
        self._torch_gen = torch.Generator(device=self.device)
        self._torch_gen.manual_seed(int(self._rng.integers(2**62)))

    @abstractmethod
    def act(self, obs: AgentObs, explore: bool = True,
            action_mask: Mapping[str, Any] | None = None) -> dict[str, np.ndarray]:
        """Actions per agent for ``num_envs`` sub-envs: Box -> float32 ``(num_envs, *shape)``
        within bounds, Discrete -> int64 ``(num_envs,)``, never an action a mask forbids
        (masks come in dict observations ``{"observation", "action_mask"}``, PettingZoo's
        convention, or as ``action_mask[agent]`` ``(num_envs, n)``, which wins). NaN
        observations count as zeros."""

    @abstractmethod
    def acting_network(self, agent: str) -> torch.nn.Module:
        """The network ``agent`` acts with: its network input ``(B, ...)`` -> the output its
        greedy action is read from (Box: ``mid + half * tanh(out)``; Discrete: the arg-max of
        the legal logits), what :mod:`distmarl.export` writes out."""

    def reset_noise(self, mask: np.ndarray) -> None:
        """Restart exploration noise of the sub-envs where ``mask`` (bool ``(num_envs,)``) is True.

        A no-op for algorithms without a noise process.
        """
        return None

    @abstractmethod
    def get_weights(self) -> dict[str, Any]:
        """``{"arch": ..., "params": {name: np.ndarray}, "hp": {...}}``: what acting needs."""

    @abstractmethod
    def set_weights(self, weights: Mapping[str, Any]) -> None:
        """Load :meth:`get_weights` output (rebuilding actors whose architecture differs)."""

    @abstractmethod
    def state_dict(self) -> dict[str, Any]:
        """Complete state as plain tensors / numbers / strings / lists / dicts."""

    @abstractmethod
    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Load :meth:`state_dict` output, rebuilding networks whose architecture differs."""

    @abstractmethod
    def clone(self) -> Algorithm:
        """An independent copy (no shared tensors)."""

    def reseed(self, seed: int | None) -> None:
        """New random streams (exploration, sampling, minibatch order). load_state_dict restores
        the source's streams for exact reproduction; a member that copied another may call this
        so the two do not draw the same numbers from then on. Subclasses with more streams
        (noise processes) extend it."""
        self._rng = np.random.default_rng(seed)
        self._torch_gen.manual_seed(int(self._rng.integers(2**62)))

    def _rng_state(self) -> dict[str, Any]:
        """The numpy and torch generators' states, for :meth:`state_dict`."""
        return {"numpy": copy.deepcopy(self._rng.bit_generator.state),
                "torch": self._torch_gen.get_state(), "torch_device": self.device.type}

    def _load_rng_state(self, state: Mapping[str, Any]) -> None:
        """Restore :meth:`_rng_state` output. Torch generator states are device-specific: from
        another device a new torch seed is drawn reproducibly instead."""
        self._rng.bit_generator.state = copy.deepcopy(state["numpy"])
        if state["torch_device"] == self.device.type:
            self._torch_gen.set_state(state["torch"].clone())
        else:
            self._torch_gen.manual_seed(int(self._rng.integers(2**62)))

    def _check_fits(self, state: Mapping[str, Any]) -> None:
        """Refuse a state of another algorithm or another set of agents."""
        if state["algorithm"] != self.name or list(state["agents"]) != self.agents:
            raise ValueError(f"state of {state['algorithm']} for agents {state['agents']} does not "
                             f"fit {self.name} for agents {self.agents}")

    @abstractmethod
    def stack_settings(self) -> dict[str, Any]:
        """What members must share, beyond their algorithm and device, to be updated as one
        stack, as plain data (network shapes, optimiser settings; PPO: its epochs' shape)."""

    @abstractmethod
    def set_hyperparameter(self, name: str, value: Any) -> None:
        """Change one hyperparameter; it takes effect at once (learning rates in the optimiser)."""

    @abstractmethod
    def mutate_architecture(self, kind: str, rng: np.random.Generator,
                            preserve_output: bool = True) -> dict[str, Any]:
        """``add_layer`` / ``remove_layer`` / ``add_node`` / ``remove_node`` on every network;
        returns a plain description of what changed."""

    @abstractmethod
    def mutate_activation(self, rng: np.random.Generator,
                          choices: Sequence[str] | None = None) -> dict[str, Any]:
        """Switch every network to another activation; returns what changed."""

    @abstractmethod
    def mutate_parameters(self, mutation_sd: float, rng: np.random.Generator) -> dict[str, Any]:
        """Perturb the policy weights (AgileRL's Gaussian parameter mutation); returns what
        changed."""


def require_learner(algo: Algorithm) -> None:
    """Refuse to learn, save or copy a policy (an algorithm built with ``learner=False``),
    which holds only what acting needs."""
    if not algo.learner:
        raise RuntimeError(f"this {algo.name} is a policy, built for acting (learner=False): "
                           f"it has no critics, target copies or optimisers to learn, save "
                           f"or copy")


class ReplayLearner(Algorithm):
    """An algorithm that learns from replayed rows (MADDPG, MATD3)."""

    @classmethod
    def rollout_spec(cls, hp: Mapping[str, Any] | None, state_space: Any) -> RolloutSpec:
        return RolloutSpec(on_policy=False)

    @property
    def spec(self) -> RolloutSpec:
        return RolloutSpec(on_policy=False)

    @abstractmethod
    def learn_batches(self, batches: Sequence[Batch],
                      weights: Sequence[torch.Tensor] | None = None
                      ) -> tuple[list[dict[str, float]], np.ndarray | None]:
        """One update per batch (a learner's train call; field -> agent -> ``(B, ...)``),
        each one's metrics (keys like ``loss/critic/<agent>``); with ``weights`` (one ``(B,)``
        per batch: prioritised replay's importance weights) every row's new priority,
        concatenated in batch order (None without ``weights``)."""

    def learn(self, batch: Batch) -> dict[str, float]:
        """One update from one batch (:meth:`learn_batches` of one); its metrics."""
        return self.learn_batches([batch])[0][0]


class FragmentLearner(Algorithm):
    """An algorithm that learns on-policy, once from each whole fragment of its own
    rollouts, collected with its behaviour log-probs and values (IPPO, MAPPO)."""

    @classmethod
    def rollout_spec(cls, hp: Mapping[str, Any] | None, state_space: Any) -> RolloutSpec:
        return RolloutSpec(on_policy=True)

    @abstractmethod
    def act_with_info(self, obs: AgentObs, explore: bool = True,
                      action_mask: Mapping[str, Any] | None = None,
                      state: np.ndarray | None = None
                      ) -> tuple[dict[str, np.ndarray], dict[str, dict[str, np.ndarray]]]:
        """Actions (as :meth:`act`) and what the learner stores with them:
        ``{"log_prob": {agent: (num_envs,)}, "value": {agent: (num_envs,)}}``. ``state``:
        the env's global state ``(num_envs, state_dim)``, read when ``spec.global_state``."""

    @abstractmethod
    def value_estimates(self, obs: AgentObs, state: np.ndarray | None = None
                        ) -> dict[str, np.ndarray]:
        """Value estimates of ``obs`` per agent, float32 ``(num_envs,)``."""

    @abstractmethod
    def learn(self, fragment: Batch) -> dict[str, float]:
        """One update from a whole fragment (field -> agent -> ``(T, E, ...)``); its
        metrics."""
