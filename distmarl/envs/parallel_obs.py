"""SuperSuit's observation wrappers on a parallel env, without the round trip through AEC.

SuperSuit builds ``color_reduction``, ``resize``, ``dtype``, ``flatten``, ``reshape`` and
``normalize_obs`` on ``observation_lambda_v0``, which has no parallel form: on a parallel env it
returns ``aec_to_parallel(aec_observation_lambda(parallel_to_aec(env)))`` (``parallel_to_aec``
adds PettingZoo's ``OrderEnforcingWrapper``). Stepping that stack,
``aec_to_parallel`` calls ``last()`` before each agent's action and then observes every agent
again, and the lambda transforms on every ``observe``, so each wrapper transforms (and each
layer below observes) every observation twice per step, through several ``__getattr__``
layers. On pistonball's 20 image observations that doubles the cost of ``resize``.

:func:`direct` recognises exactly that stack and returns :class:`ParallelObservationLambda`,
which calls the same SuperSuit functions (``change_observation_fn``, ``change_obs_space_fn``)
once per agent on the parallel env's own ``reset`` and ``step`` results. Anything else is
returned unchanged. Its tests check it step for step against SuperSuit's stack.
"""

from __future__ import annotations

from typing import Any

from gymnasium import spaces
from pettingzoo.utils.conversions import aec_to_parallel_wrapper, parallel_to_aec_wrapper
from pettingzoo.utils.env import ParallelEnv
from pettingzoo.utils.wrappers import BaseParallelWrapper, OrderEnforcingWrapper


def direct(env: ParallelEnv) -> ParallelEnv:
    """``env`` as a :class:`ParallelObservationLambda` when it is SuperSuit's
    ``aec_to_parallel(aec_observation_lambda(parallel_to_aec(inner)))`` over a parallel
    ``inner``; otherwise ``env`` itself."""
    try:
        from supersuit.lambda_wrappers.observation_lambda import aec_observation_lambda
    except ImportError:  # pragma: no cover - apply_wrappers needs SuperSuit before this
        return env
    if type(env) is not aec_to_parallel_wrapper:
        return env
    lam = env.aec_env
    if type(lam) is not aec_observation_lambda:
        return env
    enforcing = lam.env
    if type(enforcing) is not OrderEnforcingWrapper or \
            type(enforcing.env) is not parallel_to_aec_wrapper:
        return env
    return ParallelObservationLambda(enforcing.env.env, lam)


class ParallelObservationLambda(BaseParallelWrapper):
    """``inner`` with each observation passed through ``lam``'s transform, once per step.

    ``lam`` is the ``aec_observation_lambda`` SuperSuit built (kept for its functions and its
    cached, already validated observation spaces); the AEC env it wraps is not stepped again.
    """

    def __init__(self, inner: ParallelEnv, lam: Any) -> None:
        super().__init__(inner)
        self._lam = lam
        self._spaces: dict[Any, spaces.Space[Any]] = {}

    def observation_space(self, agent: Any) -> spaces.Space[Any]:
        """The transformed space (SuperSuit's own computation, cached per agent)."""
        space = self._spaces.get(agent)
        if space is None:
            space = self._spaces[agent] = self._lam.observation_space(agent)
        return space

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None
              ) -> tuple[dict[Any, Any], dict[Any, Any]]:
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._transform(obs), infos

    def step(self, actions: dict[Any, Any]) -> tuple[dict[Any, Any], ...]:
        obs, rewards, terminations, truncations, infos = self.env.step(actions)
        return self._transform(obs), rewards, terminations, truncations, infos

    def _transform(self, obs: dict[Any, Any]) -> dict[Any, Any]:
        """Each agent's observation through SuperSuit's transform (``_modify_observation``
        reads the inner env's space for that agent, as SuperSuit does)."""
        modify = self._lam._modify_observation
        return {agent: modify(agent, o) for agent, o in obs.items()}
