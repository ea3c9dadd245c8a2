"""The NVML sensor (real pynvml calls), throttle decoding, sensor choice, and no-NVML runs."""

from __future__ import annotations

import ctypes.util
import subprocess
import sys
from pathlib import Path

import pytest

from ledger.heat.guard import HeatGuard
from ledger.heat.monitor import HeatMonitor
from ledger.heat.nvml import NvmlSensor, decode_throttle, open_sensor
from ledger.heat.sensor import ScriptedSensor, Sensor, SensorUnavailable

HAS_NVML = ctypes.util.find_library("nvidia-ml") is not None


def test_decode_throttle() -> None:
    assert decode_throttle(0) == []
    assert decode_throttle(0x20 | 0x04) == ["power", "thermal"]
    assert decode_throttle(0x08 | 0x40 | 0x80) == [
        "hw_slowdown",
        "hw_thermal",
        "hw_power_brake",
    ]
    assert decode_throttle(0x1 | 0x800 | 0x4000) == ["gpu_idle", "0x800", "0x4000"]


@pytest.mark.skipif(HAS_NVML, reason="this machine has an NVML library")
def test_missing_nvml_is_sensor_unavailable_with_nvml_text() -> None:
    with pytest.raises(SensorUnavailable) as info:
        NvmlSensor()
    assert info.value.reason == "NVML Shared Library Not Found"
    assert str(info.value) == info.value.reason
    with pytest.raises(SensorUnavailable, match="NVML Shared Library Not Found"):
        open_sensor({})
    with pytest.raises(SensorUnavailable):
        open_sensor(None)


def test_no_library_text_is_pynvmls_own() -> None:
    """A machine without the NVML library gets the same `gpu.unavailable` text whether pynvml
    or ledger's check before importing it found the library missing."""
    import pynvml  # type: ignore[import-untyped]

    from ledger.heat.nvml import NO_LIBRARY

    assert NO_LIBRARY == str(pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND))


@pytest.mark.skipif(HAS_NVML, reason="this machine has an NVML library")
def test_missing_nvml_library_never_imports_pynvml() -> None:
    code = (
        "import sys\n"
        "from ledger.heat.nvml import NvmlSensor\n"
        "from ledger.heat.sensor import SensorUnavailable\n"
        "try:\n    NvmlSensor()\nexcept SensorUnavailable as exc:\n    print(exc.reason, 'pynvml' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out == "NVML Shared Library Not Found False\n"


@pytest.mark.skipif(not HAS_NVML, reason="no NVML library on this machine")
def test_real_nvml_samples_every_gpu() -> None:  # pragma: no cover - needs a GPU machine
    try:
        sensor = NvmlSensor()
    except SensorUnavailable as exc:
        pytest.skip(f"NVML present but unusable: {exc.reason}")
    try:
        gpus = sensor.gpus()
        assert gpus and [g.index for g in gpus] == list(range(len(gpus)))
        samples = sensor.sample()
        assert [s.gpu for s in samples] == [g.index for g in gpus]
        assert all(s.temp_c is None or 0 < s.temp_c < 130 for s in samples)
    finally:
        sensor.close()
        sensor.close()


def test_open_sensor_picks_the_timeline(tmp_path: Path) -> None:
    (tmp_path / "t.txt").write_text("0 0 60\n")
    sensor = open_sensor({"timeline": "t.txt"}, base=tmp_path)
    assert isinstance(sensor, ScriptedSensor)
    assert isinstance(sensor, Sensor)
    assert sensor.name == f"scripted:{tmp_path / 't.txt'}"
    absolute = open_sensor({"timeline": str(tmp_path / "t.txt")})
    assert [s.temp_c for s in absolute.sample()] == [60.0]


def test_importing_heat_does_not_import_pynvml_or_matplotlib() -> None:
    import subprocess

    code = "import sys, ledger.heat, ledger.pages.heatplot\nprint('pynvml' in sys.modules, 'matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False"]


def test_monitor_without_sensor_runs_nothing(tmp_path: Path) -> None:
    try:
        sensor: Sensor | None = open_sensor({})
        reason = None
    except SensorUnavailable as exc:
        sensor, reason = None, exc.reason
    if sensor is not None:  # pragma: no cover - GPU machine
        sensor.close()
        pytest.skip("NVML works here")
    calls: list[str] = []
    monitor = HeatMonitor(
        sensor,
        HeatGuard(),
        5.0,
        tmp_path / "heat.log",
        pause=lambda: calls.append("pause"),
        resume=lambda: calls.append("resume"),
        unavailable=reason,
    )
    monitor.start()
    assert not monitor.paused
    assert monitor.resume_if_paused() is False
    summary = monitor.stop()
    assert calls == []
    assert not (tmp_path / "heat.log").exists()
    manifest = summary.to_manifest()
    assert manifest["sensor"] == "unavailable"
    assert manifest["unavailable"] == "NVML Shared Library Not Found"
    assert manifest["gpus"] == [] and manifest["pauses"] == 0 and manifest["paused_s"] == 0
    assert manifest["pause_windows"] == [] and manifest["peak_temp_c"] == {}
