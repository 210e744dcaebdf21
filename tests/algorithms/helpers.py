"""Hand-built spaces (mpe2 simple_speaker_listener_v4 shapes) and fixed batches for the tests."""

from __future__ import annotations

import numpy as np
import torch
from gymnasium import spaces

from distmarl.algorithms import MADDPG, MATD3
from distmarl.algorithms.common.space_tensors import BoxCodec
from distmarl.algorithms.offpolicy.ddpg import OffPolicyMultiAgent
from distmarl.algorithms.offpolicy.draws import DrawPlan, StackDraws
from distmarl.algorithms.offpolicy.stack import OffPolicyStack, smoothed

AGENTS = ["speaker_0", "listener_0"]
OBS = {"speaker_0": spaces.Box(-np.inf, np.inf, (3,), np.float32),
       "listener_0": spaces.Box(-np.inf, np.inf, (11,), np.float32)}
BOX_ACT = {"speaker_0": spaces.Box(0.0, 1.0, (3,), np.float32),
           "listener_0": spaces.Box(0.0, 1.0, (5,), np.float32)}
DISCRETE_ACT = {"speaker_0": spaces.Discrete(3), "listener_0": spaces.Discrete(5)}
MIXED_ACT = {"speaker_0": spaces.Box(-2.0, 2.0, (3,), np.float32), "listener_0": spaces.Discrete(5)}
ACTION_SETS = {"box": BOX_ACT, "discrete": DISCRETE_ACT, "mixed": MIXED_ACT}
NET = {"latent_dim": 16, "encoder_config": {"hidden_size": [32]}, "head_config": {"hidden_size": [32]}}
ALGOS = {"MADDPG": MADDPG, "MATD3": MATD3}


def make(algo: str = "MADDPG", actions: str = "box", seed: int = 0, device: str = "cpu",
         **hp) -> OffPolicyMultiAgent:
    return ALGOS[algo](OBS, ACTION_SETS[actions], NET, hp=hp or None, seed=seed, device=device)


def observations(num_envs: int, seed: int = 0) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {a: rng.standard_normal((num_envs, *s.shape)).astype(np.float32) for a, s in OBS.items()}


def batch(action_spaces: dict, size: int = 64, seed: int = 0) -> dict[str, dict[str, torch.Tensor]]:
    """A fixed batch in OFF_POLICY_FIELDS form: every row active, nothing terminated."""
    g = torch.Generator().manual_seed(seed)
    out: dict[str, dict[str, torch.Tensor]] = {f: {} for f in (
        "obs", "action", "reward", "next_obs", "terminated", "truncated", "active")}
    for a, s in OBS.items():
        out["obs"][a] = torch.randn(size, *s.shape, generator=g)
        out["next_obs"][a] = torch.randn(size, *s.shape, generator=g)
        out["reward"][a] = torch.randn(size, 1, generator=g)
        out["terminated"][a] = torch.zeros(size, 1)
        out["truncated"][a] = torch.zeros(size, 1)
        out["active"][a] = torch.ones(size, 1)
        space = action_spaces[a]
        if isinstance(space, spaces.Discrete):
            out["action"][a] = torch.randint(0, int(space.n), (size, 1), generator=g)
        else:
            low, high = torch.as_tensor(space.low), torch.as_tensor(space.high)
            out["action"][a] = low + (high - low) * torch.rand(size, *space.shape, generator=g)
    return out


def params(algo: OffPolicyMultiAgent, which: str = "online") -> dict[str, torch.Tensor]:
    """Every parameter of every (online or target) network, cloned, by ``<net>/<param>``."""
    nets = getattr(algo.nets, which)
    return {f"{n}/{k}": v.detach().clone() for n, net in nets.items()
            for k, v in net.named_parameters()}


class Recorded(StackDraws):
    """A stack's own draws, each kept (``drawn``: per update ``(K, B, width)``)."""

    def __init__(self, device: torch.device | str = "cpu") -> None:
        super().__init__(torch.device(device))
        self.drawn: list[torch.Tensor] = []

    def uniform(self, shape: tuple[int, int, int], device: torch.device) -> torch.Tensor:
        u = super().uniform(shape, device)
        self.drawn.append(u)
        return u


class Given:
    """Draws handed in: each update takes the next of ``draws`` (a list that may still grow),
    member ``member``'s rows of it where given (a stack of one replaying a stack's draws), cut
    to the update's rows."""

    def __init__(self, draws: list[torch.Tensor], member: int | None = None) -> None:
        self.draws, self.member, self.taken = draws, member, 0

    def start_call(self, members: object) -> None:
        pass

    def uniform(self, shape: tuple[int, int, int], device: torch.device) -> torch.Tensor:
        u = self.draws[self.taken]
        self.taken += 1
        if self.member is not None:
            u = u[self.member:self.member + 1]
        return u[:, :shape[1]].to(device)


def learns_with(agent: OffPolicyMultiAgent, draws: Recorded | Given) -> OffPolicyMultiAgent:
    """``agent``, its own updates (its kept stack of one) drawing from ``draws``."""
    agent._stack = OffPolicyStack([agent], draws=draws)
    return agent


def target_noise(agent: OffPolicyMultiAgent, u: torch.Tensor) -> dict:
    """A lone member's update's target samples from its uniform draws ``u`` ``(1, B, width)``:
    per agent ``codec`` and ``smooth`` ``(B, dim)`` where it draws them."""
    target, _ = DrawPlan(agent.agents, agent.codecs, agent.SMOOTHED_TARGETS).split(u)
    return {a: {k: x[0] for k, x in kinds.items()} for a, kinds in target.items()}


def draws_for(agent: OffPolicyMultiAgent, rows: int, seed: int = 0) -> torch.Tensor:
    """Uniform draws for one update of a lone ``agent`` on ``rows`` rows ``(1, rows, width)``."""
    width = DrawPlan(agent.agents, agent.codecs, agent.SMOOTHED_TARGETS).width
    return torch.rand((1, rows, width), generator=torch.Generator().manual_seed(seed))


def target_action(agent: OffPolicyMultiAgent, a: str, next_obs: torch.Tensor,
                  noise: dict, next_mask: torch.Tensor | None = None) -> torch.Tensor:
    """By hand, agent ``a``'s target action in critic form ``(B, dim)`` on ``next_obs`` with
    the update's target samples ``noise`` (:func:`target_noise`): the codec's, then MATD3's
    smoothing of a Box action."""
    codec = agent.codecs[a]
    draws = noise.get(a, {})
    u = codec.target_with(agent.nets.target[f"actor/{a}"](next_obs), draws.get("codec"),
                          next_mask)
    if agent.SMOOTHED_TARGETS and isinstance(codec, BoxCodec):
        u = smoothed(u, draws["smooth"], agent.hp["policy_noise"], agent.hp["noise_clip"])
    return u


def next_q(agent: OffPolicyMultiAgent, a: str, next_obs: torch.Tensor, next_act: torch.Tensor
           ) -> torch.Tensor:
    """By hand, agent ``a``'s bootstrap value ``(B, 1)``: the minimum over its target critics."""
    return torch.stack([agent.nets.target[f"{r}/{a}"](next_obs, next_act)
                        for r in agent.CRITIC_ROLES]).amin(dim=0)


def assert_actions_fit(out: dict[str, np.ndarray], action_spaces: dict[str, spaces.Space],
                       n: int) -> None:
    """Each agent's env-form actions for ``n`` sub-envs: Box ``(n, *shape)`` float32 within the
    bounds, Discrete ``(n,)`` int64 within ``[start, start + n)``."""
    for a, space in action_spaces.items():
        if isinstance(space, spaces.Box):
            assert out[a].shape == (n, *space.shape) and out[a].dtype == np.float32
            assert np.all(out[a] >= space.low) and np.all(out[a] <= space.high)
        else:
            assert out[a].shape == (n,) and out[a].dtype == np.int64
            assert np.all((out[a] >= space.start) & (out[a] < space.start + space.n))
