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


def test_spec_errors_keep_their_spec_and_reason_and_say_the_spec_once() -> None:
    from distmarl.envs.errors import EnvSpecError, MissingPackageError, spec_reason
    from distmarl.envs.probe import EnvProbeError

    for cls in (EnvSpecError, MissingPackageError):
        err = cls("has no 'x_v1'", spec="pkg:x_v1")
        back = pickle.loads(pickle.dumps(err))
        assert type(back) is cls and str(back) == str(err) == "env spec 'pkg:x_v1': has no 'x_v1'"
        assert (back.spec, back.reason) == ("pkg:x_v1", "has no 'x_v1'")
        assert spec_reason(back, "pkg:x_v1") == "has no 'x_v1'"  # for a message naming it
        assert spec_reason(back, "other:spec") == str(err)
    assert str(EnvSpecError("no spec here")) == "no spec here"
    probe = pickle.loads(pickle.dumps(EnvProbeError("step", "RuntimeError: boom")))
    assert (probe.phase, probe.detail) == ("step", "RuntimeError: boom")
    assert str(probe) == "the env failed on step: RuntimeError: boom"
