"""The error rates and power table of docs/noise.md, from simulated runs (fixed seeds).

    .venv/bin/python tools/noise_power.py [--trials 4000]

Each experiment simulates `n` replicas a side (`tools/noisesim.py`: a learning curve, a run
offset and AR(1) step noise over 20 steps), B shifted by an effect in units of one run's mean SD,
and judges it with the code `ledger diff` uses (`ledger.compare.noise.judge_metric`). A rate is
the share judged `beyond noise`: with no effect the false-positive rate, else the power.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics

from noisesim import METRIC, Noise, binomial_slack, rejection_rate, run_mean_sd, simulate_run

from ledger.compare.noise import TRAIN_AXIS, RunSeries, judge_metric
from ledger.compare.noisestats import t_quantile

REPLICAS = (2, 3, 5)
EFFECTS = (1.0, 2.0, 3.0, 5.0)


def per_step_false_positives(seed: int, trials: int, noise: Noise) -> float:
    """One run a side, no effect: how often the per-step interval (no replicas) excludes zero."""
    rng, hits = random.Random(seed), 0
    for _ in range(trials):
        a, b = RunSeries("a", simulate_run(rng, noise, 0.0)), RunSeries("b", simulate_run(rng, noise, 0.0))
        judged = judge_metric("train/loss", TRAIN_AXIS, [a], [b], permutation=False)
        assert judged is not None
        low, high = judged.diff_ci or (0.0, 0.0)
        hits += low > 0 or high < 0
    return hits / trials


def pooled_rate(seed: int, trials: int, replicas: int, effect_sds: float, noise_b: Noise | None = None) -> float:
    """The same experiments judged by Student's pooled t instead (what Welch is chosen over)."""
    rng, noise, hits = random.Random(seed), Noise(), 0

    def mean(effect: float, which: Noise) -> float:
        return statistics.fmean(v[METRIC] for v in simulate_run(rng, which, effect).train_steps.values())

    for _ in range(trials):
        a = [mean(0.0, noise) for _ in range(replicas)]
        b = [mean(effect_sds * run_mean_sd(noise), noise_b or noise) for _ in range(replicas)]
        pooled = (statistics.variance(a) + statistics.variance(b)) / 2
        half = t_quantile(0.975, 2 * replicas - 2) * math.sqrt(pooled * 2 / replicas)
        hits += abs(statistics.fmean(b) - statistics.fmean(a)) > half
    return hits / trials


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trials", type=int, default=4000)
    args = ap.parse_args()
    n = args.trials
    print(f"false-positive rate, no effect ({n} simulated experiments each; binomial slack at 5%: +-{binomial_slack(0.05, n):.3f} (3 SD)):")
    print("| replicas a side | same noise both sides | B 3x noisier |")
    print("|---|---|---|")
    for k, replicas in enumerate(REPLICAS):
        same = rejection_rate(100 + k, n, replicas, 0.0)
        noisier = rejection_rate(200 + k, n, replicas, 0.0, noise_b=Noise(run_sd=3.0, step_sd=3.0))
        print(f"| {replicas} | {same:.3f} | {noisier:.3f} |")
    print(
        f"\nper-step interval with one run a side (no replicas), no effect: "
        f"{per_step_false_positives(300, min(n, 2000), Noise()):.3f} judged different"
    )
    print(f"\npower ({n // 4} experiments each; effect in SDs of one run's mean):")
    print("| replicas a side | " + " | ".join(f"{e:g} SD" for e in EFFECTS) + " |")
    print("|---|" + "---|" * len(EFFECTS))
    for k, replicas in enumerate(REPLICAS):
        rates = [rejection_rate(400 + 10 * k + j, n // 4, replicas, e) for j, e in enumerate(EFFECTS)]
        print(f"| {replicas} | " + " | ".join(f"{r:.2f}" for r in rates) + " |")
    print("\nfor comparison, Student's pooled t on the same kind of experiments:")
    print("| replicas a side | false positives, same noise | B 3x noisier | power at 3 SD |")
    print("|---|---|---|---|")
    for k, replicas in enumerate(REPLICAS):
        same = pooled_rate(500 + k, n, replicas, 0.0)
        noisier = pooled_rate(510 + k, n, replicas, 0.0, Noise(run_sd=3.0, step_sd=3.0))
        print(f"| {replicas} | {same:.3f} | {noisier:.3f} | {pooled_rate(520 + k, n // 4, replicas, 3.0):.2f} |")


if __name__ == "__main__":
    main()
