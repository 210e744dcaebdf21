"""The shared-device benchmark times real work in each way: its processes all report."""

from benchmarks.system import shared_device


def test_each_way_reports_a_rate_over_all_members() -> None:
    stacked = shared_device.stacked(2, batch=8, updates=2, seconds=0.1, device="cpu")
    apart = shared_device.apart(2, batch=8, updates=2, seconds=0.1, device="cpu")
    assert stacked > 0 and apart > 0
