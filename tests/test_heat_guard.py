"""The heat guard state machine: hysteresis, cool-down continuity, multi-GPU, warnings."""

from __future__ import annotations

from typing import Any

import pytest

from ledger.errors import UsageError
from ledger.heat.guard import PAUSE, RESUME, WARN, Action, HeatGuard


def kinds(actions: list[Action]) -> list[str]:
    return [a.kind.value for a in actions]


def test_below_pause_at_never_acts() -> None:
    guard = HeatGuard()
    for t in range(100):
        assert guard.update(t, {0: 84.9, 1: 60.0}) == []
    assert not guard.paused


def test_pause_at_threshold_names_hottest_gpu() -> None:
    guard = HeatGuard(pause_at=85)
    actions = guard.update(10.0, {0: 85.0, 1: 91.0, 2: 70.0})
    assert actions == [Action(PAUSE, 10.0, gpu=1, temp_c=91.0)]
    assert guard.paused
    # Still hot: no second PAUSE.
    assert guard.update(11.0, {0: 95.0, 1: 95.0, 2: 95.0}) == []


def test_hysteresis_between_resume_at_and_pause_at_stays_paused() -> None:
    guard = HeatGuard(pause_at=85, resume_at=75, resume_after=0)
    guard.update(0, {0: 90})
    for t in range(1, 50):
        assert guard.update(t, {0: 80}) == []  # cooler than pause_at, not cool enough
    assert guard.paused
    assert kinds(guard.update(50, {0: 75})) == ["resume"]  # at resume_at counts as cool
    assert not guard.paused
    # Back in the band while running: no pause.
    assert guard.update(51, {0: 84}) == []


def test_resume_needs_resume_after_seconds_of_continuous_cool() -> None:
    guard = HeatGuard(resume_at=75, resume_after=30)
    guard.update(0, {0: 90})
    assert guard.update(10, {0: 70}) == []  # cool window starts at 10
    assert guard.update(39.9, {0: 70}) == []
    assert guard.update(40, {0: 70}) == [Action(RESUME, 40, paused_s=40)]


def test_a_warm_reading_restarts_the_cool_down_window() -> None:
    guard = HeatGuard(resume_at=75, resume_after=30)
    guard.update(0, {0: 90})
    guard.update(10, {0: 70})
    assert guard.update(25, {0: 76}) == []  # breaks continuity
    assert guard.update(30, {0: 70}) == []  # new window starts here
    assert guard.update(59, {0: 70}) == []
    assert kinds(guard.update(60, {0: 70})) == ["resume"]


def test_every_gpu_must_be_cool_to_resume() -> None:
    guard = HeatGuard(resume_at=75, resume_after=5)
    guard.update(0, {0: 90, 1: 70})
    for t in range(1, 20):
        assert guard.update(t, {0: 70, 1: 80}) == []  # GPU 1 now too warm
    assert guard.update(20, {0: 70, 1: 75}) == []
    assert kinds(guard.update(25, {0: 70, 1: 75})) == ["resume"]


def test_unknown_or_missing_readings_do_not_count_as_cool() -> None:
    guard = HeatGuard(resume_at=75, resume_after=5)
    guard.update(0, {0: 90, 1: 60})
    guard.update(1, {0: 70, 1: 60})
    assert guard.update(4, {0: None, 1: 60}) == []  # restarts the window
    assert guard.update(8, {}) == []  # no readings at all: restarts too
    assert guard.update(9, {0: 70, 1: 60}) == []
    assert kinds(guard.update(14, {0: 70, 1: 60})) == ["resume"]


def test_unknown_reading_never_triggers_a_pause() -> None:
    guard = HeatGuard()
    assert guard.update(0, {0: None, 1: 50}) == []
    assert not guard.paused


def test_resume_after_zero_resumes_on_first_cool_reading() -> None:
    guard = HeatGuard(resume_after=0)
    guard.update(0, {0: 90})
    assert kinds(guard.update(1, {0: 74})) == ["resume"]


def test_pause_again_after_resume() -> None:
    guard = HeatGuard(resume_after=0)
    assert kinds(guard.update(0, {0: 90})) == ["pause"]
    assert kinds(guard.update(1, {0: 70})) == ["resume"]
    assert guard.update(2, {0: 88}) == [Action(PAUSE, 2, gpu=0, temp_c=88)]


def test_warn_after_max_pause_then_once_a_minute() -> None:
    guard = HeatGuard(max_pause=600)
    guard.update(0, {0: 90})
    warned = [t for t in range(0, 1000, 5) if kinds(guard.update(t, {0: 90})) == ["warn"]]
    assert warned == [605, 665, 725, 785, 845, 905, 965]
    assert guard.paused


def test_warn_carries_pause_length_and_resets_after_resume() -> None:
    guard = HeatGuard(max_pause=10, resume_after=0)
    guard.update(0, {0: 90})
    assert guard.update(11, {0: 90}) == [Action(WARN, 11, paused_s=11)]
    assert kinds(guard.update(12, {0: 70})) == ["resume"]
    guard.update(100, {0: 90})
    assert guard.update(105, {0: 90}) == []
    assert kinds(guard.update(111, {0: 90})) == ["warn"]  # new pause, new first warning


def test_no_warn_once_resumed() -> None:
    guard = HeatGuard(max_pause=0, resume_after=0)
    guard.update(0, {0: 90})
    assert kinds(guard.update(1, {0: 70})) == ["resume"]
    assert guard.update(500, {0: 70}) == []


def test_disabled_guard_never_acts() -> None:
    guard = HeatGuard(enabled=False)
    for t in range(0, 2000, 10):
        assert guard.update(t, {0: 110.0}) == []
    assert not guard.paused
    assert guard.settings.enabled is False


def test_release_ends_a_pause_the_caller_ended() -> None:
    guard = HeatGuard()
    assert guard.release(0) is None
    guard.update(5, {0: 99})
    assert guard.release(8) == Action(RESUME, 8, paused_s=3)
    assert not guard.paused
    assert guard.release(9) is None


@pytest.mark.parametrize(
    ("kwargs", "text"),
    [
        ({"pause_at": 80, "resume_at": 80}, "must be below pause_at"),
        ({"pause_at": 80, "resume_at": 90}, "must be below pause_at"),
        ({"resume_after": -1}, ">= 0 seconds"),
        ({"max_pause": -5}, ">= 0 seconds"),
    ],
)
def test_bad_settings_are_usage_errors(kwargs: dict[str, Any], text: str) -> None:
    with pytest.raises(UsageError, match=text):
        HeatGuard(**kwargs)


def test_settings_to_dict() -> None:
    guard = HeatGuard(pause_at=83, resume_at=70, resume_after=12, max_pause=300)
    assert guard.settings.to_dict() == {
        "enabled": True,
        "pause_at": 83,
        "resume_at": 70,
        "resume_after": 12,
        "max_pause": 300,
    }
