"""The heat guard: a pure state machine deciding when to pause and resume a hot job.

Rules (times are whatever the caller's clock says; the guard never reads a clock):
- While running, any GPU at or above `pause_at` -> PAUSE (naming the hottest such GPU).
- While paused, once ALL GPUs have read at or below `resume_at` continuously for `resume_after`
  seconds -> RESUME. A reading above `resume_at`, or an unknown (None) reading, or an update with
  no readings at all, restarts that cool-down window: resuming a GPU we cannot read is exactly
  what the guard exists to prevent.
- A pause longer than `max_pause` seconds -> WARN, then again at most every `warn_every` seconds.
- Disabled, the guard never acts.

A GPU is named by its key in `temps`: an index on one machine, or `(node, index)` on a Ray
cluster; a PAUSE carries the trigger's `node` and `gpu` either way.
"""

from __future__ import annotations

import enum
from collections.abc import Hashable, Mapping
from typing import Any

import msgspec
from msgspec.structs import asdict

from ledger.config import HEAT
from ledger.errors import UsageError


class ActionKind(str, enum.Enum):
    """What the caller must do."""

    PAUSE = "pause"
    RESUME = "resume"
    WARN = "warn"


PAUSE = ActionKind.PAUSE
RESUME = ActionKind.RESUME
WARN = ActionKind.WARN


class Action(msgspec.Struct, frozen=True):
    """One decision. `node`/`gpu`/`temp_c`: the trigger (PAUSE); `paused_s`: pause length so far."""

    kind: ActionKind
    at: float
    gpu: int | None = None
    temp_c: float | None = None
    paused_s: float = 0.0
    node: str | None = None


class GuardSettings(msgspec.Struct, frozen=True):
    """The guard's thresholds, as recorded in the manifest and the heat log."""

    enabled: bool = HEAT.enabled
    pause_at: float = HEAT.pause_at
    resume_at: float = HEAT.resume_at
    resume_after: float = HEAT.resume_after
    max_pause: float = HEAT.max_pause

    def to_dict(self) -> dict[str, Any]:
        """Plain dict for the manifest's `gpu.guard`."""
        return asdict(self)


class HeatGuard:
    """Hysteresis between `pause_at` and `resume_at`, with a continuous cool-down window."""

    def __init__(
        self,
        pause_at: float = HEAT.pause_at,
        resume_at: float = HEAT.resume_at,
        resume_after: float = HEAT.resume_after,
        max_pause: float = HEAT.max_pause,
        enabled: bool = True,
        warn_every: float = 60.0,
    ):
        if resume_at >= pause_at:
            raise UsageError(
                f"heat guard resume_at ({resume_at:g} C) must be below pause_at ({pause_at:g} C)",
                hint="e.g. pause at 85 and resume at 75",
            )
        if resume_after < 0 or max_pause < 0 or warn_every <= 0:
            raise UsageError(
                "heat guard resume_after and max_pause must be >= 0 seconds",
                hint="e.g. resume_after 30, max_pause 600",
            )
        self.settings = GuardSettings(enabled, pause_at, resume_at, resume_after, max_pause)
        self.warn_every = warn_every
        self._paused_since: float | None = None
        self._cool_since: float | None = None
        self._last_warn: float | None = None

    @property
    def paused(self) -> bool:
        """Whether the guard holds the job paused."""
        return self._paused_since is not None

    def update(self, now: float, temps: Mapping[Hashable, float | None]) -> list[Action]:
        """Feed one reading per GPU (None = unknown); returns what to do, usually nothing."""
        if not self.settings.enabled:
            return []
        if self._paused_since is None:
            return self._maybe_pause(now, temps)
        return self._while_paused(now, self._paused_since, temps)

    def _maybe_pause(self, now: float, temps: Mapping[Hashable, float | None]) -> list[Action]:
        """PAUSE for the hottest GPU at or over `pause_at`, if any."""
        hot = [(t, g) for g, t in temps.items() if t is not None and t >= self.settings.pause_at]
        if not hot:
            return []
        temp, key = max(hot, key=lambda h: h[0])
        node, gpu = key if isinstance(key, tuple) else (None, key)
        self._paused_since = now
        self._cool_since = None
        self._last_warn = None
        return [Action(PAUSE, now, gpu=gpu, temp_c=temp, node=node)]

    def _while_paused(self, now: float, since: float, temps: Mapping[Hashable, float | None]) -> list[Action]:
        """RESUME once every GPU has been at or under `resume_at` for `resume_after` seconds;
        else WARN every `warn_every` seconds once the pause is over `max_pause`."""
        s = self.settings
        all_cool = bool(temps) and all(t is not None and t <= s.resume_at for t in temps.values())
        if not all_cool:
            self._cool_since = None
        elif self._cool_since is None:
            self._cool_since = now
        if self._cool_since is not None and now - self._cool_since >= s.resume_after:
            return [self._resume(now)]
        return self._long_pause_warning(now, now - since)

    def _long_pause_warning(self, now: float, paused_s: float) -> list[Action]:
        """WARN when the pause is over `max_pause`, at most every `warn_every` seconds."""
        if paused_s > self.settings.max_pause and (self._last_warn is None or now - self._last_warn >= self.warn_every):
            self._last_warn = now
            return [Action(WARN, now, paused_s=paused_s)]
        return []

    def release(self, now: float) -> Action | None:
        """Forget a pause the caller ended itself; RESUME if one was held, else None."""
        if self._paused_since is None:
            return None
        return self._resume(now)

    def _resume(self, now: float) -> Action:
        assert self._paused_since is not None
        action = Action(RESUME, now, paused_s=now - self._paused_since)
        self._paused_since = None
        self._cool_since = None
        self._last_warn = None
        return action
