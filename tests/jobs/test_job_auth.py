"""distmarl.job_auth without a cluster: where the Ray token is found (checked against Ray's own
loader), when it is sent, and what a refusal says. Every environment here is a dict with a
``HOME`` under tmp, so the user's own ``~/.ray`` is never read."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from distmarl import job_auth
from distmarl.job_auth import RayToken, auth_failure_message, find_token, is_local, token_headers

LOCAL = "http://127.0.0.1:8265"


@pytest.fixture
def home(tmp_path) -> Path:
    """A ``$HOME`` whose ``.ray/auth_token`` holds ``home-token`` (with Ray's trailing newline)."""
    (tmp_path / "home" / ".ray").mkdir(parents=True)
    (tmp_path / "home" / ".ray" / "auth_token").write_text("home-token\n")
    return tmp_path / "home"


def cases(tmp_path: Path, home: Path) -> dict[str, dict[str, str]]:
    """Environments covering each rule of Ray's token loader."""
    (tmp_path / "file").write_text("  file-token  \nsecond line\n")
    (tmp_path / "blank").write_text("\n\n")
    (tmp_path / "empty-home").mkdir()
    return {
        "default file": {"HOME": str(home)},
        "RAY_AUTH_TOKEN first": {"HOME": str(home), "RAY_AUTH_TOKEN": " env-token\n",
                                 "RAY_AUTH_TOKEN_PATH": str(tmp_path / "file")},
        "empty RAY_AUTH_TOKEN is unset": {"HOME": str(home), "RAY_AUTH_TOKEN": ""},
        "blank RAY_AUTH_TOKEN is no token": {"HOME": str(home), "RAY_AUTH_TOKEN": "  "},
        "RAY_AUTH_TOKEN_PATH before the default": {"HOME": str(home),
                                                   "RAY_AUTH_TOKEN_PATH": str(tmp_path / "file")},
        "RAY_AUTH_TOKEN_PATH missing": {"HOME": str(home),
                                        "RAY_AUTH_TOKEN_PATH": str(tmp_path / "missing")},
        "RAY_AUTH_TOKEN_PATH blank": {"HOME": str(home),
                                      "RAY_AUTH_TOKEN_PATH": str(tmp_path / "blank")},
        "nowhere": {"HOME": str(tmp_path / "empty-home")},
    }


def test_find_token_follows_rays_order(tmp_path, home) -> None:
    found = {name: find_token(env) for name, env in cases(tmp_path, home).items()}
    default = str(home / ".ray" / "auth_token")
    assert found["default file"] == RayToken("home-token", default)
    assert found["RAY_AUTH_TOKEN first"] == RayToken("env-token", "RAY_AUTH_TOKEN")
    assert found["empty RAY_AUTH_TOKEN is unset"] == RayToken("home-token", default)
    assert found["blank RAY_AUTH_TOKEN is no token"] == RayToken(None, "RAY_AUTH_TOKEN")
    named = f"RAY_AUTH_TOKEN_PATH={tmp_path / 'file'}"
    assert found["RAY_AUTH_TOKEN_PATH before the default"] == RayToken("file-token", named)
    missing = f"RAY_AUTH_TOKEN_PATH={tmp_path / 'missing'}"
    assert found["RAY_AUTH_TOKEN_PATH missing"] == RayToken(
        None, missing, f"{missing} cannot be read or is empty")
    assert found["RAY_AUTH_TOKEN_PATH blank"].value is None
    assert found["nowhere"] == RayToken(None, str(tmp_path / "empty-home" / ".ray" / "auth_token"))


PROBE = """
import json, os, sys
from ray._raylet import AuthenticationTokenLoader
from ray.exceptions import AuthenticationError

loader, out = AuthenticationTokenLoader.instance(), {}
for name, env in json.loads(sys.argv[1]).items():
    for var in ("HOME", "RAY_AUTH_TOKEN", "RAY_AUTH_TOKEN_PATH", "RAY_AUTH_MODE"):
        os.environ.pop(var, None)
    os.environ.update(env)
    loader.reset_cache()
    try:
        out[name] = (loader.get_raw_token(ignore_auth_mode=True)
                     if loader.has_token(ignore_auth_mode=True) else None)
    except AuthenticationError:
        out[name] = "error"
print(json.dumps(out))
"""


@pytest.mark.ray
def test_find_token_agrees_with_rays_loader(tmp_path, home) -> None:
    """Ray's own loader (in a subprocess, HOME under tmp) finds the same token in every case;
    where it raises, distmarl reports the named file's problem instead."""
    envs = cases(tmp_path, home)
    proc = subprocess.run([sys.executable, "-c", PROBE, json.dumps(envs)], capture_output=True,
                          text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "HOME": envs["nowhere"]["HOME"]})
    assert proc.returncode == 0, proc.stderr[-2000:]
    rays = json.loads(proc.stdout.strip().splitlines()[-1])
    ours = {name: find_token(env) for name, env in envs.items()}
    assert {n: "error" if t.problem else t.value for n, t in ours.items()} == rays


def test_token_is_sent_unasked_only_to_this_machine_with_the_mode_unset(home) -> None:
    env = {"HOME": str(home)}
    bearer = {"Authorization": "Bearer home-token"}
    for address in (LOCAL, "http://localhost:8265", "http://[::1]:8265", "127.0.0.2:8265"):
        assert token_headers(address, env) == bearer, address
    for address in ("http://10.0.0.5:8265", "https://ray.example.com", "http://0.0.0.0:8265"):
        assert token_headers(address, env) == {}, address
    # RAY_AUTH_MODE set either way: Ray's client decides, distmarl adds nothing
    assert token_headers(LOCAL, {**env, "RAY_AUTH_MODE": "token"}) == {}
    assert token_headers(LOCAL, {**env, "RAY_AUTH_MODE": "disabled"}) == {}
    assert token_headers(LOCAL, {"HOME": str(home.parent / "nowhere")}) == {}
    assert is_local("http://127.0.0.1") and not is_local("http://127.example.com:8265")


def test_refusals_name_the_variables_and_the_default_file(tmp_path, home) -> None:
    nowhere = {"HOME": str(tmp_path / "nowhere")}
    default = tmp_path / "nowhere" / ".ray" / "auth_token"
    fix = ("Put the cluster's token (`ray get-auth-token` on its head prints it) in "
           f"RAY_AUTH_TOKEN, or in a file named by RAY_AUTH_TOKEN_PATH, or in {default}")
    assert auth_failure_message(LOCAL, False, nowhere) == (
        f"distmarl: Ray job server {LOCAL} requires a token and none was found. {fix}.")
    assert auth_failure_message("http://10.0.0.5:8265", False, nowhere).endswith(
        f"{fix}, and set RAY_AUTH_MODE=token.")
    wrong = {**nowhere, "RAY_AUTH_TOKEN": "secret-value"}
    refused = auth_failure_message(LOCAL, True, wrong)
    assert refused.startswith(f"distmarl: Ray job server {LOCAL} refused the token from "
                              "RAY_AUTH_TOKEN. Put")
    assert "secret-value" not in refused
    broken = {**nowhere, "RAY_AUTH_TOKEN_PATH": str(tmp_path / "gone")}
    assert (f"requires a token and none was sent: RAY_AUTH_TOKEN_PATH={tmp_path / 'gone'} "
            "cannot be read or is empty.") in auth_failure_message(LOCAL, False, broken)
    remote = auth_failure_message("http://10.0.0.5:8265", False, {"HOME": str(home)})
    assert "only to a job server on this machine (localhost)" in remote
    assert remote.endswith("and set RAY_AUTH_MODE=token.")
    disabled = auth_failure_message(LOCAL, False, {"HOME": str(home), "RAY_AUTH_MODE": "disabled"})
    assert "none was sent (RAY_AUTH_MODE='disabled')" in disabled
    assert disabled.endswith(", and set RAY_AUTH_MODE=token (or unset it).")
    assert job_auth.default_token_path({"HOME": "/h"}) == Path("/h/.ray/auth_token")
