"""A long-running watch reads the inventory's view again when the inventory changed, and only then."""

from __future__ import annotations

from tests.cli.conftest import Cli
from vnuma.services import Settings
from vnuma.services.watch import Watch
from vnuma.watch.rules import Thresholds


def test_the_view_is_read_again_after_a_change_only(fleet: Cli) -> None:
    watch = Watch(Settings(f"sqlite:///{fleet.db}"), Thresholds())
    try:
        seen = watch.placements
        watch.refresh()
        assert watch.placements is seen  # nothing changed: nothing read
        fleet.ok("place", "tenant-a", "--vcpus", "2", "--memory", "2GiB", "--page-size", "2M", "--name", "a3",
                 "--host", "rdt2")
        watch.refresh()
        assert "a3" in watch.placements and "a3" in watch.on_host["rdt2"]
        free = watch.free["rdt2"][0][2048]
        assert free == 4096 - 2 * 1024  # c1's and a3's 2 MiB pages: the inventory's view of the cell
    finally:
        watch.close()


def test_a_reading_from_the_past_is_a_note_and_the_loop_goes_on(fleet: Cli) -> None:
    from vnuma.watch.figures import Reading

    watch = Watch(Settings(f"sqlite:///{fleet.db}"), Thresholds())
    try:
        (first,) = watch.run_round([Reading("rdt2", 100.0, {"c1": {"cpu.time": 0}})])
        (back,) = watch.run_round([Reading("rdt2", 90.0, {"c1": {"cpu.time": 10**9}})])
        (later,) = watch.run_round([Reading("rdt2", 110.0, {"c1": {"cpu.time": 10**10}})])
    finally:
        watch.close()
    assert first.written and later.written and not back.written
    assert back.notes == ["host rdt2: reading at 1970-01-01T00:01:30+00:00 is not later than the last one "
                          "(1970-01-01T00:01:40+00:00): the clock went backwards; nothing written for this round"]
