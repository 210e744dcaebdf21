"""Exceptions of the env layer. Each one names what went wrong and, where it can, the fix."""

from __future__ import annotations


class _NamesSpec:
    """An error about one env spec: the message is ``env spec '<spec>': <reason>`` (the spec
    said once), or the reason alone when no spec is given. ``spec`` and ``reason`` are kept, so
    a caller that names the spec itself (``env.spec '...': ...``) can print the reason alone."""

    spec: str | None
    reason: str

    def _name(self, reason: str, spec: str | None) -> str:
        self.spec, self.reason = spec, reason
        return reason if spec is None else f"env spec {spec!r}: {reason}"

    def __reduce__(self) -> tuple:
        return (_rebuild, (type(self), self.reason, {"spec": self.spec}))


class EnvSpecError(_NamesSpec, ValueError):
    """An env spec (``"package.module:attr"``) names nothing usable: unknown module or attribute,
    or an object that is neither a PettingZoo parallel env nor convertible to one."""

    def __init__(self, reason: str, *, spec: str | None = None) -> None:
        super().__init__(self._name(reason, spec))


class MissingPackageError(_NamesSpec, ImportError):
    """An env needs an optional package that is not installed; the message gives the pip command."""

    def __init__(self, reason: str, *, spec: str | None = None) -> None:
        super().__init__(self._name(reason, spec))


def spec_reason(err: BaseException, spec: str) -> str:
    """``err``'s message without its ``env spec '<spec>': `` prefix when it is about ``spec``
    (for a message that already names the spec)."""
    if isinstance(err, _NamesSpec) and err.spec == spec:
        return err.reason
    return str(err)


class ClosedEnvError(RuntimeError):
    """A vector env was used after ``close()`` (or after a sub-env crash closed it)."""


class SubEnvError(RuntimeError):
    """A sub-env raised, or its worker process died. The vector env is closed when this is raised.

    Attributes:
        env_index: index of the sub-env in ``env_fns`` (None when the worker died between calls
            and the sub-env cannot be told).
        worker: index of the worker process (None in sync mode).
        exc_type: name of the exception raised inside the sub-env ("" when the process died).
        remote_traceback: the traceback text from the sub-process ("" in sync mode, where the
            original exception is chained as ``__cause__``).
    """

    def __init__(
        self,
        message: str,
        *,
        env_index: int | None,
        worker: int | None = None,
        exc_type: str = "",
        remote_traceback: str = "",
    ) -> None:
        super().__init__(message)
        self.env_index = env_index
        self.worker = worker
        self.exc_type = exc_type
        self.remote_traceback = remote_traceback

    def __reduce__(self) -> tuple:
        # keyword-only arguments: the default BaseException pickling would call
        # SubEnvError(message) and fail, so a process pool or a Ray task could not report it
        return (_rebuild, (type(self), str(self), {
            "env_index": self.env_index, "worker": self.worker, "exc_type": self.exc_type,
            "remote_traceback": self.remote_traceback}))


class NonFiniteError(ValueError):
    """A sub-env returned a NaN / inf observation or reward (with ``nonfinite="raise"``).

    Attributes: ``env_index`` (the sub-env) and ``agent`` (the agent whose row was non-finite).
    """

    def __init__(self, message: str, *, env_index: int, agent: str) -> None:
        super().__init__(message)
        self.env_index = env_index
        self.agent = agent

    def __reduce__(self) -> tuple:
        return (_rebuild, (type(self), str(self), {"env_index": self.env_index,
                                                   "agent": self.agent}))


def _rebuild(cls: type, message: str, kwargs: dict) -> BaseException:
    """Unpickles the errors above (their extra arguments are keyword-only)."""
    return cls(message, **kwargs)
