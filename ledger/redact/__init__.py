"""Keeping secrets out of the ledger, bottom to top (each module imports only those above it):

- `names`: which names hold secrets, the mask, `Redactions` (what was hidden where; never values).
- `catalogue`: provider token shapes from detect-secrets' plugins, used as data.
- `rules` (the rules on bytes) and `variants` (the printed forms of a known value).
- `scanner`: the one `Redactor` (trigger scan, PEM blocks, long lines, known values).
- `apply`: redact one text, log line, argv or environment.
- `values` (the secret values a run was started with), `lines` (flagged lines of a body) and
  `runscrub` (the last scrub of a run folder, the same for run and recover).
- `doc`: docs/secrets.md, generated from what the modules above cover.
"""
