"""The league's win-rate plot: a PNG whose cells are coloured by the rate."""

from __future__ import annotations

import matplotlib.image as mpimg
import numpy as np

from distmarl.league.plans import MatchRecord
from distmarl.tracking.plots import plot_win_rates


def test_the_win_rate_matrix_plot_colours_wins_green_and_losses_red(tmp_path) -> None:
    rec = MatchRecord()
    for _ in range(30):
        rec.record("member/0", "ref/random", 1.0)
    players = ["member/0", "ref/random"]
    path = plot_win_rates(players, rec.matrix(players), tmp_path / "league" / "win_rates.png")
    img = mpimg.imread(path)
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and img.ndim == 3
    bigger = plot_win_rates(players * 3, np.full((6, 6), 0.5), tmp_path / "six.png")
    assert mpimg.imread(bigger).shape[0] > img.shape[0]
    red = img[..., 0] - img[..., 1]  # strongly red pixels: the loss cell; green: the win cell
    assert (red > 0.4).sum() > 100 and (red < -0.2).sum() > 100
