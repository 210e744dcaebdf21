"""Exceptions of the env layer. Each one names what went wrong and, where it can, the fix."""

from __future__ import annotations


class EnvSpecError(ValueError):
    """An env spec (``"package.module:attr"``) names nothing usable: unknown module or attribute,
    or an object that is neither a PettingZoo parallel env nor convertible to one."""


class MissingPackageError(ImportError):
    """An env needs an optional package that is not installed; the message gives the pip command."""


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
