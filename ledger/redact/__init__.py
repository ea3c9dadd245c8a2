"""Keeping secrets out of the ledger, bottom to top (each module imports only those above it):

- `names`: which names hold secrets, the mask, `Redactions` (what was hidden where; never values).
- `re2`: gitleaks' Go RE2 regexes in Python's spelling; `gitleaks`: gitleaks' default rules, as data.
- `catalogue`: provider token shapes from detect-secrets' plugins and gitleaks' rules, used as data.
- `rules` (the rules on bytes) and `variants` (the printed forms of a known value).
- `scanner`: the one `Redactor` (trigger scan, PEM blocks, long lines, known values).
- `apply`: redact one text, log line, argv or environment.
- `values` (the secret values a run was started with), `lines` (flagged lines of a body),
  `runscrub` (the last scrub of a run folder, the same for run and recover) and `filescan` (the
  data files tracked with DVC, scanned as bytes).
"""
