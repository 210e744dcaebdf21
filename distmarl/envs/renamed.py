"""Naming the successor of an env that moved, was renamed or was removed.

PettingZoo names its envs ``<name>_v<version>`` and keeps only the newest version of each
(``pistonball_v6``; asking for ``pistonball_v5`` gets a ``DeprecatedModule`` whose constructors
raise), drops envs between releases (``waterworld`` is gone from ``pettingzoo.sisl`` in 1.27),
and moved whole families to their own packages (``pettingzoo.mpe`` -> ``mpe2``,
``pettingzoo.magent`` -> ``magent2``). The messages built here say which spec to use instead,
from what the installed packages hold.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import re
from types import ModuleType
from typing import Any

#: Env families that moved out of PettingZoo: old module -> (new module, its pip name).
MOVED: dict[str, tuple[str, str]] = {
    "pettingzoo.mpe": ("mpe2", "mpe2"),
    "pettingzoo.magent": ("magent2.environments", "magent2"),
}

_VERSIONED = re.compile(r"(?P<base>[A-Za-z0-9_]+?)_v(?P<version>[0-9]+)")


def env_names(module: ModuleType) -> list[str]:
    """The public names of ``module`` and, for a package, of its submodules."""
    names = {n for n in dir(module) if not n.startswith("_")}
    if hasattr(module, "__path__"):
        names |= {m.name for m in pkgutil.iter_modules(module.__path__)}
    return sorted(names)


def other_versions(names: list[str], attr: str) -> list[str]:
    """The names among ``names`` of the env ``attr`` at another version suffix, newest first
    (``["pursuit_v5"]`` for ``"pursuit_v3"``); empty when ``attr`` has no ``_v<N>`` suffix."""
    wanted = _VERSIONED.fullmatch(attr)
    if wanted is None:
        return []
    found = [(int(m["version"]), n) for n in names
             if (m := _VERSIONED.fullmatch(n)) and m["base"] == wanted["base"] and n != attr]
    return [n for _, n in sorted(found, reverse=True)]


def package_version(module_name: str) -> str:
    """``"pettingzoo 1.27.0"`` for ``"pettingzoo.sisl"``: the installed distribution of the
    module's top-level package (just its name when that is not known)."""
    top = module_name.split(".")[0]
    try:
        return f"{top} {importlib.metadata.version(top)}"
    except importlib.metadata.PackageNotFoundError:
        return top


def is_deprecated(target: Any) -> bool:
    """Whether ``target`` is PettingZoo's stand-in for an old version of an env (a
    ``DeprecatedModule``, whose constructors only raise)."""
    try:
        from pettingzoo.utils.deprecated_module import DeprecatedModule
    except ImportError:
        return False
    return isinstance(target, DeprecatedModule)


def missing_env(module: ModuleType, attr: str) -> str:
    """Why ``module`` has no env ``attr``, naming the version it has where there is one, else
    its envs (and close spellings)."""
    import difflib

    where = f"module {module.__name__!r} ({package_version(module.__name__)})"
    names = env_names(module)
    others = other_versions(names, attr)
    if others:
        return (f"{where} has no {attr!r} but has {others[0]!r}, another version of the same "
                f"env: use '{module.__name__}:{others[0]}' (check its changes first)")
    versioned = _VERSIONED.fullmatch(attr)
    envs = [n for n in names if _VERSIONED.fullmatch(n)]
    close = difflib.get_close_matches(attr, names, n=3)
    hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
    if versioned is None or not envs or close:
        return f"{where} has no {attr!r}{hint}"
    return (f"{where} has no {attr!r} and no other version of {versioned['base']!r} (removed "
            f"from this release, or never there; an older release may have it); its envs: "
            f"{', '.join(envs)}{hint}")


def deprecated_env(module_name: str, attr: str, names: list[str]) -> str:
    """The message for an old version ``attr`` of an env that ``module_name`` (whose names are
    ``names``) has at a newer version."""
    others = other_versions(names, attr)
    newer = (f": use '{module_name}:{others[0]}' (check its changes first)" if others else "")
    return f"{attr!r} is an old version that {package_version(module_name)} no longer has{newer}"


def moved_env(old: str, module_name: str, attr: str) -> str:
    """The message for a spec naming ``module_name:attr`` under the moved family ``old``: the
    new package and, where it is installed, the spec there."""
    new, pip = MOVED[old]
    rest = module_name[len(old) + 1:] if module_name != old else attr
    name = rest.split(".")[0] or "<env name>"
    head = f"{old} has moved to the {pip!r} package"
    try:
        target = importlib.import_module(new)
    except ImportError:
        return f"{head}: pip install {pip}, then use '{new}:{name}' (or the version {pip} has)"
    names = env_names(target)
    envs = [n for n in names if _VERSIONED.fullmatch(n)]
    if name == "<env name>":
        return f"{head}: use '{new}:<env name>'; its envs: {', '.join(envs)}"
    if name in names:
        return f"{head}: use '{new}:{name}'"
    others = other_versions(names, name)
    if others:
        return f"{head}: use '{new}:{others[0]}' ({pip}'s version of {name!r})"
    return f"{head}, which has no {name!r}; its envs: {', '.join(envs)}"
