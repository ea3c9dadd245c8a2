"""Comparing runs: which settings changed, timing and learning over common steps, the noise
between replicas, and the text of `ledger diff`.

- `diffcore`: which settings changed, timing over common steps, warnings, `DiffReport`.
- `stats`: medians, confidence intervals, the t distribution, Welch, permutation tests.
- `noise`, `replicas`, `sides`, `flags`: the noise floor (docs/noise.md).
- `render`, `noisetext`: the human text of a `DiffReport`.

The per-step metrics they compare are `ledger.metrics`'.
"""
