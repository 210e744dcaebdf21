"""Ray token authentication for ``distmarl submit`` / ``distmarl jobs``.

A Ray head started while a token exists (``~/.ray/auth_token``, written by ``ray
get-auth-token --generate`` and by any local ``ray.init``) turns token authentication on, and
its job server then answers 401 to a request without ``Authorization: Bearer <token>``. Ray's
``JobSubmissionClient`` sends that header only when ``RAY_AUTH_MODE=token`` is set in the
client's environment. For a job server on this machine (a local head, or a tunnel /
port-forward to ``127.0.0.1``) distmarl sends the token from where Ray keeps it when
``RAY_AUTH_MODE`` is unset. A job server elsewhere gets a token only when ``RAY_AUTH_MODE=token`` says
so, as with Ray's own clients, so a local token never travels to another machine unasked.

Where Ray's token loader looks, first found wins (the same rules as Ray's loader, checked
against it by tests/jobs/test_job_auth.py):

1. ``RAY_AUTH_TOKEN``: the token itself (surrounding whitespace dropped);
2. ``RAY_AUTH_TOKEN_PATH``: a file whose first line is the token (unreadable or empty: an error);
3. ``$HOME/.ray/auth_token``: the same, where ``ray get-auth-token --generate`` writes it.

This module imports no Ray: the CLI builds the client with :func:`token_headers` and turns
Ray's ``AuthenticationError`` into :func:`auth_failure_message`.
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

MODE_VAR = "RAY_AUTH_MODE"
TOKEN_VAR = "RAY_AUTH_TOKEN"
TOKEN_PATH_VAR = "RAY_AUTH_TOKEN_PATH"


@dataclass(frozen=True)
class RayToken:
    """The token Ray's loader would use (``value``; None: none found) and where it was looked
    for (``source``: ``RAY_AUTH_TOKEN``, ``RAY_AUTH_TOKEN_PATH=<file>`` or the default file).
    ``problem`` says why an explicitly named file gave no token. ``value`` is never printed."""

    value: str | None
    source: str
    problem: str | None = None


def default_token_path(environ: Mapping[str, str] = os.environ) -> Path:
    """``$HOME/.ray/auth_token``: where Ray writes and looks for the token by default."""
    return Path(environ.get("HOME") or Path.home()) / ".ray" / "auth_token"


def _first_line(path: Path) -> str:
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return ""
    return lines[0].strip() if lines else ""


def find_token(environ: Mapping[str, str] = os.environ) -> RayToken:
    """The token as Ray's loader finds it (the order is in the module docstring)."""
    if environ.get(TOKEN_VAR):
        return RayToken(environ[TOKEN_VAR].strip() or None, TOKEN_VAR)
    named = environ.get(TOKEN_PATH_VAR)
    path = Path(named) if named else default_token_path(environ)
    token = _first_line(path) or None
    if named:
        source = f"{TOKEN_PATH_VAR}={path}"
        return RayToken(token, source, None if token else f"{source} cannot be read or is empty")
    return RayToken(token, str(path))


def is_local(address: str) -> bool:
    """Whether the job server at ``address`` (an ``http(s)://host:port`` URL) is on this
    machine: ``localhost`` or a loopback IP, as a local head, an SSH tunnel or a
    ``kubectl port-forward`` is."""
    host = urlparse(address if "://" in address else f"http://{address}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def token_headers(address: str, environ: Mapping[str, str] = os.environ) -> dict[str, str]:
    """Headers for a ``JobSubmissionClient`` of the job server at ``address``: the bearer
    token when ``RAY_AUTH_MODE`` is unset, the server is on this machine and a token is found;
    otherwise none (with ``RAY_AUTH_MODE`` set, Ray's client adds the header itself or not).

    A server without token authentication ignores the header, so sending it costs nothing.
    """
    if environ.get(MODE_VAR) is not None or not is_local(address):
        return {}
    token = find_token(environ)
    return {"Authorization": f"Bearer {token.value}"} if token.value else {}


def auth_failure_message(address: str, refused: bool,
                         environ: Mapping[str, str] = os.environ) -> str:
    """What to set, after the job server at ``address`` answered 401 (no token: ``refused``
    False) or 403 (a wrong token: ``refused`` True). Names the variables and the default
    token file; never shows a token."""
    token = find_token(environ)
    mode = environ.get(MODE_VAR)
    if refused:
        head = f"refused the token from {token.source}"
    elif token.problem:
        head = f"requires a token and none was sent: {token.problem}"
    elif token.value and mode is None:
        head = ("requires a token; distmarl sends the one it finds without RAY_AUTH_MODE=token "
                "only to a job server on this machine (localhost)")
    elif token.value:
        head = f"requires a token and none was sent ({MODE_VAR}={mode!r})"
    else:
        head = "requires a token and none was found"
    fix = (f"Put the cluster's token (`ray get-auth-token` on its head prints it) in {TOKEN_VAR}, "
           f"or in a file named by {TOKEN_PATH_VAR}, or in {default_token_path(environ)}")
    if mode is None and not is_local(address):
        fix += f", and set {MODE_VAR}=token"
    elif mode is not None and mode.lower() != "token":
        fix += f", and set {MODE_VAR}=token (or unset it)"
    return f"distmarl: Ray job server {address} {head}. {fix}."
