"""The elite's video as a user sees it: a tiny run tracked by a real ``mlflow server`` (the one
``test_real_mlflow_server`` reads: ``served_run`` of ``tests/tracking/conftest.py``), its
artifact page opened in headless Chromium (Debian's, ``scripts/install_browser.sh``), whose
rendered page must show ``videos/elite.gif`` loaded as an image. Skips without Chromium,
unless ``DISTMARL_REQUIRE_BROWSER`` is set (``.ci/run`` sets it)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

pytestmark = [pytest.mark.slow]

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
#: headless flags for a closed network (no background connections, no first-run pages)
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--window-size=1500,1000"]
#: the artifact viewer's image, once the browser fetched the file (a blob URL holds its bytes)
SHOWN = re.compile(r'<img alt="videos/elite\.gif" src="blob:')


def rendered_page(url: str, profile: Path, screenshot: Path) -> str:
    """``url``'s DOM after its scripts ran (up to 20 s of the page's time), and a
    screenshot of it."""
    base = [str(CHROMIUM), *FLAGS, f"--user-data-dir={profile}", "--virtual-time-budget=20000"]
    subprocess.run([*base, f"--screenshot={screenshot}", url], capture_output=True,
                   timeout=180, check=False)
    out = subprocess.run([*base, "--dump-dom", url], capture_output=True, text=True,
                         timeout=180, check=False)
    return out.stdout


def test_the_mlflow_ui_shows_the_elite_video(request: pytest.FixtureRequest,
                                             tmp_path: Path) -> None:
    if CHROMIUM is None:
        if os.environ.get("DISTMARL_REQUIRE_BROWSER"):
            pytest.fail("DISTMARL_REQUIRE_BROWSER is set but no chromium is on PATH "
                        "(bash scripts/install_browser.sh)")
        pytest.skip("no chromium on PATH: bash scripts/install_browser.sh")
    from mlflow.tracking import MlflowClient

    uri, summary = request.getfixturevalue("served_run")  # once Chromium is known to be here
    parent = summary["mlflow"]["parent"]
    experiment = MlflowClient(uri).get_run(parent).info.experiment_id
    url = f"{uri}/#/experiments/{experiment}/runs/{parent}/artifacts/videos/elite.gif"
    dom = ""
    for attempt in range(3):  # a loaded machine may not finish the page in one budget
        dom = rendered_page(url, tmp_path / f"profile-{attempt}", tmp_path / "artifact-page.png")
        if SHOWN.search(dom):
            break
    assert SHOWN.search(dom), f"the artifact page does not show the video: {dom[-3000:]}"
    assert (tmp_path / "artifact-page.png").stat().st_size > 10_000
