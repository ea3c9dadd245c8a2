"""Write ledger/redact/gitleaks_rules.json from gitleaks' default configuration (config/gitleaks.toml).

    git --git-dir=<gitleaks>/.git show HEAD:config/gitleaks.toml > /tmp/gitleaks.toml
    python3 tools/gitleaks_rules.py /tmp/gitleaks.toml --commit <gitleaks commit>

The rules are facts (regexes, keywords, entropy thresholds, allowlists), carried as data with
gitleaks' MIT licence named in the file's header and each rule's gitleaks id in its `source`; the
descriptions (gitleaks' prose) are left out. Regexes stay in Go RE2 syntax: ledger translates them
when it loads the catalogue (ledger/redact/re2.py). Needs Python 3.11+ (tomllib); ledger itself
only reads the JSON.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

import tomllib

OUT = Path(__file__).resolve().parent.parent / "ledger" / "redact" / "gitleaks_rules.json"
KEEP = ("regex", "keywords", "entropy", "secretGroup", "path", "allowlists")
HEADER = {
    "source": "gitleaks default configuration (config/gitleaks.toml), https://github.com/gitleaks/gitleaks",
    "licence": "MIT License, Copyright (c) 2019 Zachary Rice",
    "attribution": (
        "Rule regexes, keywords, entropy thresholds and allowlists are gitleaks' (MIT licence); each rule's "
        "`source` names its gitleaks rule id. Regexes are in Go RE2 syntax. Written by tools/gitleaks_rules.py."
    ),
}


def convert(config: dict[str, Any], commit: str) -> dict[str, Any]:
    """The data file's content from a parsed gitleaks.toml."""
    rules = []
    for rule in config["rules"]:
        entry: dict[str, Any] = {"id": rule["id"], "source": f"gitleaks default config, rule id {rule['id']}"}
        entry.update({k: rule[k] for k in KEEP if k in rule})
        rules.append(entry)
    glob = config.get("allowlist") or {}
    return {
        **HEADER,
        "commit": commit,
        "allowlist": {k: glob[k] for k in ("regexes", "stopwords") if k in glob},
        "rules": rules,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("toml", type=Path)
    parser.add_argument("--commit", required=True, help="the gitleaks commit the file was read from")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    data = convert(tomllib.loads(args.toml.read_text(encoding="utf-8")), args.commit)
    args.out.write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"{len(data['rules'])} rules -> {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
