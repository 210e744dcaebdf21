"""The base of every config section, and the error every config problem raises.

A section rejects keys it does not have, suggesting the closest valid name. The error carries
the key in its context, so the message names the full dotted path (``algorithm.hp.lr_actr``).
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict, model_validator
from pydantic_core import PydanticCustomError

#: The error type of an unknown key; its context's ``key`` completes the error's location.
UNKNOWN_KEY = "unknown_key"


class ConfigError(ValueError):
    """A config problem, with the dotted path of the offending field in the message."""


def closest(name: str, known: list[str]) -> str | None:
    """The known name closest to ``name``, or None when none is close."""
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
    return close[0] if close else None


class Section(BaseModel):
    """Base of every config section: unknown keys are errors that suggest the closest name."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)
    #: keys of other tools (AgileRL's) that this section spells otherwise: key -> what to write
    ELSEWHERE: ClassVar[dict[str, str]] = {}

    @model_validator(mode="before")
    @classmethod
    def _known_keys(cls, data: Any) -> Any:
        if isinstance(data, Mapping):
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
