"""The NVML sensor. The only module that imports pynvml (lazily, so `ledger --help` stays fast).

Every NVML failure to start becomes `SensorUnavailable(<NVML's own text>)`; once started, a
failing per-field query gives None for that field and never stops sampling.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

from ledger.heat.sensor import (
    GpuInfo,
    Sample,
    ScriptedSensor,
    Sensor,
    SensorUnavailable,
)

T = TypeVar("T")

NVML_LIBRARY = "libnvidia-ml.so.1"  # the name pynvml's `_LoadNvmlLibrary` opens on Linux
NO_LIBRARY = "NVML Shared Library Not Found"  # pynvml's text for NVML_ERROR_LIBRARY_NOT_FOUND

# NVML's clocks event (formerly "throttle") reason bits, from nvml.h; names as in the heat log.
THROTTLE_REASONS: tuple[tuple[int, str], ...] = (
    (0x0001, "gpu_idle"),
    (0x0002, "app_clocks"),
    (0x0004, "power"),  # software power cap
    (0x0008, "hw_slowdown"),
    (0x0010, "sync_boost"),
    (0x0020, "thermal"),  # software thermal slowdown
    (0x0040, "hw_thermal"),
    (0x0080, "hw_power_brake"),
    (0x0100, "display_clocks"),
    (0x0200, "board_limit"),
    (0x0400, "reliability"),
)


def decode_throttle(bits: int) -> list[str]:
    """NVML clock throttle reason bits -> names; unknown bits appear as hex (`0x800`)."""
    names = [name for bit, name in THROTTLE_REASONS if bits & bit]
    known = 0
    for bit, _ in THROTTLE_REASONS:
        known |= bit
    rest = bits & ~known
    bit = 1
    while rest >= bit:
        if rest & bit:
            names.append(hex(bit))
        bit <<= 1
    return names


def _text(value: object) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def _try(query: Callable[[], T]) -> T | None:
    # pynvml raises NVMLError subclasses; older bindings also lack newer functions
    # (AttributeError). Neither may stop sampling, so any failure is a missing value.
    try:
        return query()
    except Exception:  # noqa: BLE001 - see above
        return None


class NvmlSensor:
    """Samples every GPU through NVML."""

    name = "nvml"

    def __init__(self) -> None:
        if sys.platform != "win32":
            try:  # what pynvml loads first; without it, importing pynvml (~20 ms) is for nothing
                ctypes.CDLL(NVML_LIBRARY)
            except OSError as exc:
                raise SensorUnavailable(NO_LIBRARY) from exc
        try:
            import pynvml  # type: ignore[import-untyped]
        except ImportError as exc:  # pragma: no cover - nvidia-ml-py is a dependency
            raise SensorUnavailable(f"pynvml is not installed: {exc}") from exc
        self._nvml: Any = pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            raise SensorUnavailable(str(exc)) from exc
        self._open = True
        try:
            count = pynvml.nvmlDeviceGetCount()
            self._handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(count)]
        except pynvml.NVMLError as exc:
            self.close()
            raise SensorUnavailable(str(exc)) from exc
        if not self._handles:
            self.close()
            raise SensorUnavailable("NVML found no GPUs")
        self._infos = [self._info(i, h) for i, h in enumerate(self._handles)]

    def _info(self, index: int, handle: object) -> GpuInfo:
        nv = self._nvml
        memory = _try(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
        limit_mw = _try(lambda: nv.nvmlDeviceGetEnforcedPowerLimit(handle))
        cuda = _try(nv.nvmlSystemGetCudaDriverVersion)
        name = _try(lambda: nv.nvmlDeviceGetName(handle))
        uuid = _try(lambda: nv.nvmlDeviceGetUUID(handle))
        driver = _try(nv.nvmlSystemGetDriverVersion)
        return GpuInfo(
            index=index,
            name=None if name is None else _text(name),
            uuid=None if uuid is None else _text(uuid),
            memory_total_mib=None if memory is None else memory.total / 2**20,
            driver_version=None if driver is None else _text(driver),
            # NVML encodes CUDA 12.4 as 12040
            cuda_version=None if cuda is None else f"{cuda // 1000}.{cuda % 1000 // 10}",
            power_limit_w=None if limit_mw is None else limit_mw / 1000,
        )

    def gpus(self) -> list[GpuInfo]:
        """Static facts about each GPU, read once at start."""
        return list(self._infos)

    def sample(self) -> list[Sample]:
        """Read every GPU now; a field NVML cannot read is None."""
        return [self._sample(i, h) for i, h in enumerate(self._handles)]

    def _sample(self, index: int, handle: object) -> Sample:
        nv = self._nvml
        temp = _try(lambda: nv.nvmlDeviceGetTemperature(handle, nv.NVML_TEMPERATURE_GPU))
        power_mw = _try(lambda: nv.nvmlDeviceGetPowerUsage(handle))
        clock = _try(lambda: nv.nvmlDeviceGetClockInfo(handle, nv.NVML_CLOCK_SM))
        util = _try(lambda: nv.nvmlDeviceGetUtilizationRates(handle))
        memory = _try(lambda: nv.nvmlDeviceGetMemoryInfo(handle))
        reasons = _try(lambda: nv.nvmlDeviceGetCurrentClocksEventReasons(handle))
        if reasons is None:
            reasons = _try(lambda: nv.nvmlDeviceGetCurrentClocksThrottleReasons(handle))
        return Sample(
            gpu=index,
            temp_c=None if temp is None else float(temp),
            power_w=None if power_mw is None else power_mw / 1000,
            sm_clock_mhz=None if clock is None else float(clock),
            util_pct=None if util is None else float(util.gpu),
            mem_used_mib=None if memory is None else memory.used / 2**20,
            throttle=[] if reasons is None else decode_throttle(int(reasons)),
        )

    def close(self) -> None:
        """Shut NVML down; safe to call twice."""
        if getattr(self, "_open", False):
            self._open = False
            _try(self._nvml.nvmlShutdown)


def open_sensor(config: Mapping[str, Any] | None = None, base: Path | None = None) -> Sensor:
    """The scripted sensor when `config` has `timeline: FILE` (relative to `base`), else NVML.

    Raises SensorUnavailable when NVML cannot start (the run goes ahead without sampling) and
    LedgerError for a bad timeline file (a user mistake).
    """
    timeline = (config or {}).get("timeline")
    if timeline:
        path = Path(str(timeline))
        if base is not None and not path.is_absolute():
            path = base / path
        return ScriptedSensor(path)
    return NvmlSensor()
