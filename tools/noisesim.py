"""Simulated runs with a known effect and known noise: the error rates of `ledger.compare.noise`.

A simulated run logs one metric for `steps` steps: a learning curve shared by every run, plus the
effect of the setting under test (side B only), plus run-to-run noise (one offset per run, as a
seed that starts a little better stays better) and step noise that is correlated from step to step
(AR(1), coefficient `phi`). Its run mean over the steps therefore has the standard deviation
`run_mean_sd`; effects are given in units of it ("noise SDs"), the unit `ledger diff` tests in.

`rejection_rate` runs many such experiments through `noise.judge_metric` (the code `ledger diff`
uses) and counts `beyond noise`; with a zero effect that is the false-positive rate, else the
power. `tools/noise_power.py` prints the table of docs/noise.md; tests/test_noise.py checks it.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass

from ledger.compare.noise import BEYOND, TRAIN_AXIS, RunSeries, judge_metric
from ledger.metrics.table import MetricsTable

METRIC = "train/loss"


@dataclass(frozen=True)
class Noise:
    """How noisy a simulated run is: per-run offset SD, per-step SD, step-to-step correlation."""

    run_sd: float = 1.0
    step_sd: float = 1.0
    phi: float = 0.5
    steps: int = 20


def run_mean_sd(noise: Noise) -> float:
    """The standard deviation of one simulated run's mean over its steps (the unit of effects)."""
    n, phi = noise.steps, noise.phi
    factor = 1 + 2 * sum((1 - k / n) * phi**k for k in range(1, n))  # variance of an AR(1) mean, times n
    return math.sqrt(noise.run_sd**2 + noise.step_sd**2 * factor / n)


def simulate_run(rng: random.Random, noise: Noise, effect: float) -> MetricsTable:
    """One run's metrics table: curve + effect + run offset + AR(1) step noise (stationary)."""
    offset = rng.gauss(0.0, noise.run_sd)
    innovation = noise.step_sd * math.sqrt(1 - noise.phi**2)
    e = rng.gauss(0.0, noise.step_sd)
    table = MetricsTable()
    for step in range(noise.steps):
        if step:
            e = noise.phi * e + rng.gauss(0.0, innovation)
        table.train_steps[step] = {METRIC: 2.0 * math.exp(-step / 5) + effect + offset + e}
    return table


def one_verdict(
    rng: random.Random, replicas: int, effect_sds: float, noise: Noise, replicas_b: int | None = None, noise_b: Noise | None = None
) -> str:
    """The verdict of one simulated experiment: `replicas` runs a side, B shifted by the effect."""
    effect = effect_sds * run_mean_sd(noise)
    side_a = [RunSeries(f"a{i}", simulate_run(rng, noise, 0.0)) for i in range(replicas)]
    side_b = [
        RunSeries(f"b{i}", simulate_run(rng, noise_b or noise, effect)) for i in range(replicas if replicas_b is None else replicas_b)
    ]
    judged = judge_metric(METRIC, TRAIN_AXIS, side_a, side_b, permutation=False)
    assert judged is not None
    return judged.verdict


def rejection_rate(
    seed: int,
    trials: int,
    replicas: int,
    effect_sds: float,
    noise: Noise = Noise(),
    replicas_b: int | None = None,
    noise_b: Noise | None = None,
) -> float:
    """The share of `trials` simulated experiments judged `beyond noise` (fixed `seed`)."""
    rng = random.Random(seed)
    hits = sum(one_verdict(rng, replicas, effect_sds, noise, replicas_b, noise_b) == BEYOND for _ in range(trials))
    return hits / trials


def binomial_slack(rate: float, trials: int, sds: float = 3.0) -> float:
    """`sds` binomial standard deviations of an observed rate around `rate` over `trials`."""
    return sds * math.sqrt(rate * (1 - rate) / trials)
