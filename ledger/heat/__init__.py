"""The heat guard: GPU sampling, pause/resume of hot jobs, the heat log and its reports.

`sensor` (the seam + a scripted sensor), `nvml` (the real sensor), `guard` (pure state machine),
`heatlog` (the TSV log), `monitor` (the sampling thread), `summary` and `plot` (reports).
Importing this package imports neither pynvml nor matplotlib.
"""

from ledger.heat.guard import Action, ActionKind, GuardSettings, HeatGuard
from ledger.heat.heatlog import HeatLog, HeatLogWriter, read_heat_log
from ledger.heat.monitor import HeatMonitor, HeatSummary
from ledger.heat.nvml import NvmlSensor, open_sensor
from ledger.heat.sensor import (
    GpuInfo,
    Sample,
    ScriptedSensor,
    Sensor,
    SensorUnavailable,
)
from ledger.heat.summary import render_heat_summary

__all__ = [
    "Action",
    "ActionKind",
    "GpuInfo",
    "GuardSettings",
    "HeatGuard",
    "HeatLog",
    "HeatLogWriter",
    "HeatMonitor",
    "HeatSummary",
    "NvmlSensor",
    "Sample",
    "ScriptedSensor",
    "Sensor",
    "SensorUnavailable",
    "open_sensor",
    "read_heat_log",
    "render_heat_summary",
]
