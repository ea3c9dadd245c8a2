"""Keeping secrets out of the ledger, bottom to top (each module imports only those above it):

- `names`: which names hold secrets, the mask, `Redactions` (what was hidden where; never values).
- `re2`: gitleaks' Go RE2 regexes in Python's spelling; `gitleaks`: gitleaks' default rules, as data.
- `catalogue`: provider token shapes from detect-secrets' plugins and gitleaks' rules, used as data.
- `rx` (a regex compiled on first use), `spans` (merge and mask spans), `view` (a line without
  terminal escapes and NUL bytes).
- `rules` (the rules on bytes), `blocks` (PEM blocks and YAML block scalars over several lines)
  and `variants` (the printed and the wrapped forms of a known value).
- `triggers` (what every secret the rules hide matches) and `engine` (where they match: Hyperscan,
  or Python's re).
- `scanner`: the one `Redactor` (trigger scan, line state, long lines, known values).
- `apply`: redact one text, log line, argv or environment.
- `values` (the secret values a run was started with), `lines` (flagged lines of a body),
  `runscrub` (the last scrub of a run folder, the same for run and recover) and `filescan` (the
  data files tracked with DVC, scanned as bytes).
"""
