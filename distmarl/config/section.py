"""The base of every config section, and the error every config problem raises.

A section rejects keys it does not have, suggesting the closest valid name. The error carries
the key in its context, so the message names the full dotted path (``algorithm.hp.lr_actr``).
A key that was renamed is still read under its old name, with a warning saying the new one; a
key of another mode (``evolution.tournament`` in an ``async`` run) is dropped with a warning.
"""

from __future__ import annotations

import difflib
import warnings
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

#: The error type of an unknown key; its context's ``key`` completes the error's location.
UNKNOWN_KEY = "unknown_key"


class ConfigError(ValueError):
    """A config problem, with the dotted path of the offending field in the message."""


class RenamedKeyWarning(UserWarning):
    """A config key was written under its old name (it is read under the new one)."""


class MovedKeyWarning(UserWarning):
    """A config key was written in the section it used to be in (it is read where it is)."""


class ForeignKeyWarning(UserWarning):
    """A config key of a sibling model (another mode's) was written: it does nothing here."""


def closest(name: str, known: list[str]) -> str | None:
    """The known name closest to ``name``, or None when none is close."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return close[0] if close else None


class Section(BaseModel):
    """Base of every config section: unknown keys are errors that suggest the closest name."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    #: keys of other tools (AgileRL's) that this section spells otherwise: key -> what to write
    ELSEWHERE: ClassVar[dict[str, str]] = {}
    #: keys this section used to have: old name -> the field it is now
    RENAMED: ClassVar[dict[str, str]] = {}
    #: keys that moved between this section's subsections: ``old.path`` -> ``new.path``; read
    #: where they are now, with a warning
    MOVED: ClassVar[dict[str, str]] = {}
    #: keys of a sibling model that this one lacks (another ``evolution.mode``'s): key -> why
    #: it does nothing here; read with a warning and dropped, so that a base config of one
    #: mode can be run in another
    FOREIGN: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
            data = cls._foreign(cls._renamed(cls._moved(data)))
            known = sorted(cls.model_fields)
            for key in data:
                if key not in cls.model_fields:
                    near = closest(str(key), known)
                    hint = (f"; {cls.ELSEWHERE[key]}" if key in cls.ELSEWHERE else
                            f"; did you mean '{near}'?" if near else "")
                    raise PydanticCustomError(
                        UNKNOWN_KEY, "unknown key '{key}'{hint} (valid keys: {valid})",
                        {"key": str(key), "hint": hint, "valid": str(known)})
        return data

    @classmethod
    def _moved(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """``data`` with its keys of :attr:`MOVED` where they are now (warned); a key given
        in both places is an error naming them."""
        out: dict[str, Any] | None = None
        for old, new in cls.MOVED.items():
            section, key = old.split(".")
            if not isinstance(data.get(section), Mapping) or key not in data[section]:
                continue
            out = dict(data) if out is None else out
            where, name = new.split(".")
            source = out[section] = dict(out[section])
            target = out[where] = dict(out.get(where) or {})
            if name in target:
                raise PydanticCustomError(
                    UNKNOWN_KEY, "'{key}' moved to '{new}'{hint}: keep '{new}' only",
                    {"key": old, "new": new, "hint": ", and both are set"})
            warnings.warn(f"config key '{old}' is now '{new}' (read as '{new}'; move it)",
                          MovedKeyWarning, stacklevel=2)
            value = source.pop(key)
            if value is not None:  # a null meant the default, which the new place has too
                target[name] = value
        return data if out is None else out

    @classmethod
    def _foreign(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """``data`` without its keys of :attr:`FOREIGN` (each warned)."""
        foreign = [k for k in data if k in cls.FOREIGN]
        for key in foreign:
            warnings.warn(f"config key '{key}' is {cls.FOREIGN[key]}: ignored",
                          ForeignKeyWarning, stacklevel=2)
        return {k: v for k, v in data.items() if k not in foreign} if foreign else data

    @classmethod
    def _renamed(cls, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """``data`` with its keys of :attr:`RENAMED` under their new names (warned); both
        names at once are an error naming them."""
        old = [k for k in cls.RENAMED if k in data]
        if not old:
            return data
        out = dict(data)
        for key in old:
            new = cls.RENAMED[key]
            if new in out:
                raise PydanticCustomError(
                    UNKNOWN_KEY, "'{key}' is the old name of '{new}'{hint}: keep '{new}' only",
                    {"key": key, "new": new, "hint": ", and both are set"})
            warnings.warn(f"config key '{key}' is now '{new}' (read as '{new}'; rename it)",
                          RenamedKeyWarning, stacklevel=2)
            out[new] = out.pop(key)
        return out
