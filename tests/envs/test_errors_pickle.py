"""The env layer's errors cross processes (process pools, Ray tasks) intact."""

from __future__ import annotations

import pickle

from distmarl.envs.errors import NonFiniteError, SubEnvError


def test_sub_env_and_non_finite_errors_survive_pickling() -> None:
    err = SubEnvError("sub-env 3 raised ValueError: boom", env_index=3, worker=1,
                      exc_type="ValueError", remote_traceback="Traceback ...")
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is SubEnvError and str(back) == str(err)
    assert (back.env_index, back.worker, back.exc_type, back.remote_traceback) == (
        3, 1, "ValueError", "Traceback ...")
    nf = pickle.loads(pickle.dumps(NonFiniteError("NaN", env_index=2, agent="a_0")))
    assert type(nf) is NonFiniteError and (nf.env_index, nf.agent) == (2, "a_0")
