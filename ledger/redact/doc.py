"""docs/secrets.md, generated from what the redaction code covers.

    python -m ledger.redact.doc            # print the page
    python -m ledger.redact.doc --write    # rewrite docs/secrets.md
    python -m ledger.redact.doc --check    # exit 1 when docs/secrets.md is not current

The shapes are read from the rules themselves (`secretrules.SHAPES`, `OWN_SHAPES`, the loaded
catalogue); each syntax is listed with an example that `syntax_examples_hidden` proves is hidden
(tests/test_secret_corpus.py runs it and compares the page with the file).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ledger.redact import gitleaks
from ledger.redact import rules as secretrules
from ledger.redact.catalogue import SKIPPED, catalogue_version
from ledger.redact.scanner import Redactor, catalogue_triggers

VALUE = "Xq7pL2vR9tK4wZ8m"  # stands for the secret in each example; never a real credential
SYNTAXES: tuple[tuple[str, str], ...] = (
    ("environment / shell assignment", f"export WANDB_API_KEY={VALUE}"),
    ("flag with a value", f"--hub-token {VALUE}"),
    ("flag with =", f"--wandb-key={VALUE}"),
    ("JSON / Python dict", f'{{"hf_token": "{VALUE}"}}'),
    ("key with spaces in a JSON name", f'{{"API Key": "{VALUE}"}}'),
    ("YAML / INI", f"db_password: {VALUE}"),
    ("YAML block scalar", f"password: |\n  {VALUE}"),
    ("XML element", f"<password>{VALUE}</password>"),
    ("=> (Ruby, PHP, Perl)", f'"api_key" => "{VALUE}"'),
    (":= (Go, Make)", f'dbPassword := "{VALUE}"'),
    ("->", f"secret -> {VALUE}"),
    ("printed argv list", f"['--openai-api-key', '{VALUE}']"),
    ("Megatron argument dump", f"  wandb_key ........ {VALUE}"),
    ("Namespace repr", f"Namespace(password='{VALUE}')"),
    ("name with a suffix", f"OPENAI_API_KEY_2={VALUE}"),
    ("qualifier suffix", f"STRIPE_KEY_LIVE={VALUE}"),
    ("quoted value holding a quote under set -x", f"+ train --password 'ab'\\''{VALUE}'"),
    ("netrc", f"machine api.example.invalid login user password {VALUE}"),
    ("docker login -p", f"docker login -u bot -p {VALUE} registry.invalid"),
    ("mysql -p", f"mysql -uroot -p{VALUE} db"),
    ("curl -u user:pw", f"curl -u trainer:{VALUE} https://127.0.0.1/"),
    ("sshpass -p", f"sshpass -p {VALUE} ssh node1"),
    ("Cookie header", f"Cookie: session={VALUE}"),
    ("Authorization header", f"Authorization: Bearer {VALUE}"),
    ("URL credentials", f"https://bot:{VALUE}@git.example.invalid/r.git"),
    ("URL-encoded assignment", f"next=%2Fa%3Fpassword%3D{VALUE}%26x%3D1"),
    ("URL-encoded URL credentials", f"https%3A%2F%2Fbot%3A{VALUE}%40host"),
    ("behind ANSI colour codes", f"\x1b[36mapi_key\x1b[0m={VALUE}"),
    ("W&B key in `wandb login`", f"wandb login {VALUE}{VALUE}{VALUE[:8]}"),
)
KNOWN_FORMS = (
    "raw",
    "repr-escaped",
    "JSON-escaped",
    "URL-encoded (3 ways)",
    "base64 and URL-safe base64, at any of the 3 byte alignments (so inside a base64'd JSON too)",
    "hex (lower and upper case)",
    "UTF-16/32 (the scan reads text without NUL bytes)",
    "each line of a multi-line value",
    "a value wrapped over lines in a text (every piece masked)",
)
BENCH = """Measured with `python3 bench/bench_redact.py --mib 1024 --repeat 3 --no-fallback` (part of
`make bench`) on the shared 2-core machine, the catalogue loaded, against `LC_ALL=C grep -ciE` over
the ERE equivalents of every trigger, ours and the catalogue's (bench/bench_redact.py; the few
catalogue classes ERE cannot say are given to grep as their literal start): a 1 GiB Miles-shaped
log (1,025 planted secret lines, 1,025 masks written, nothing else touched) scans in
**BENCH_RATIO**. Compiling the rules' database is in each round (about 1 s on this machine);
deriving the catalogue from detect-secrets' plugins (about 0.5 s) happens once per user and
detect-secrets version (cached under `~/.cache/ledger/catalogue/`), then it is read as data.
Memory on one 200 MB line stays bounded by the window (`WINDOW` + `OVERLAP`;
tests/test_streamed.py runs one through `ledger run`)."""
BENCH_RATIO = (
    "0.98x grep's CPU time (4.36 s vs 4.42 s; wall 0.96x), and 1.63x when also writing the redacted copy (`redact_file`); target <= 2x"
)
PATH = Path(__file__).resolve().parents[2] / "docs" / "secrets.md"


def syntax_examples_hidden() -> list[str]:
    """The syntax examples whose value is NOT hidden (empty: the page tells the truth)."""
    return [name for name, example in SYNTAXES if VALUE in Redactor().redact_text(example)]


def gitleaks_section() -> list[str]:
    """The gitleaks rules: where they come from, how each is found, and their ids."""
    paths: dict[str, list[str]] = {}
    for r, _, path in catalogue_triggers():
        if r.plugin == "gitleaks":
            paths.setdefault(path, []).append(r.provider)
    total = sum(len(v) for v in paths.values())
    named = [rid for rid, _ in gitleaks.file_name_rules()]
    return [
        "## Provider shapes from gitleaks",
        "",
        f"Every rule of gitleaks' default configuration ({total} regexes, and {len(named)} file-name rule: "
        f"{', '.join(f'`{n}`' for n in named)}),",
        f"carried as data in ledger/redact/gitleaks_rules.json (gitleaks commit `{gitleaks.data_commit()[:12]}`, MIT",
        "licence, each rule named by its gitleaks id; `tools/gitleaks_rules.py` writes the file from",
        "gitleaks' `config/gitleaks.toml`). Their Go RE2 regexes are translated for Python and Hyperscan",
        "(ledger/redact/re2.py). A rule runs on a text holding one of its keywords; its secret is the",
        "rule's group, of entropy above the rule's floor, and dropped where gitleaks' allowlists (global and",
        "the rule's) say it is no secret. A rule gitleaks limits to some paths (`*.tf`, `*.yaml`) runs on",
        "every text. A hidden value is recorded as `pattern:gitleaks:<rule id>`.",
        "",
        f"In the one-pass scan, {len(paths.get('keywords', []))} rules are found by their keywords (a literal "
        "scan: each keyword is distinctive) and",
        f"{len(paths.get('as-is', []))} by their own regex (a keyword too common in training logs, such as `token`, or too short).",
        "",
        "Rules: " + ", ".join(f"`{rid}`" for rid in sorted(rid for ids in paths.values() for rid in ids)) + ".",
    ]


def render() -> str:
    """The page."""
    out = [
        "# Secrets: what ledger hides before anything is stored",
        "",
        "<!-- generated from the code by `make docs` (ledger/redact/doc.py); do not edit by hand -->",
        "",
        "Every byte bound for git or the DVC cache (argv, environment, launcher and its xtrace, dirty and",
        "index-new tracked files, job stdout/stderr, engine lines, extra logs, `--note`, Ray runtime-env, the",
        "manifest) goes through one `Redactor` (ledger/redact/scanner.py): a one-pass Hyperscan trigger",
        "scan finds the few lines that may hold a secret, and the rules below run on those only. A value",
        "is replaced by `***`; the manifest's `redacted` says what kind was hidden where, never the value.",
        "A `--name` holding a secret is refused before the job (exit 125): names go raw into commit",
        "messages and the reflog.",
        "",
        "## Provider shapes from the catalogue",
        "",
        f"Taken at run time from Yelp's `detect-secrets` (installed: {catalogue_version()}), its",
        "`RegexBasedDetector` plugins used as data (ledger/redact/catalogue.py). Chosen because it",
        "is the maintained, installable catalogue with plain regexes per provider (no network, no service),",
        "and its plugins are discovered, so an upgrade brings new providers without a change here.",
        "Measured against the alternatives on PyPI (December 2026): `detect-secrets` 1.5.0 ships 22",
        "provider plugins (40 regexes, every one compiled into the Hyperscan scan, none firing on the",
        "bench's Miles-shaped log or the Miles fixtures); Bridgecrew's fork `bc-detect-secrets` 1.5.52 has",
        "19 (no GitLab, OpenAI, PyPI or Telegram) under the same module name; `ggshield` needs",
        "GitGuardian's service; gitleaks and trufflehog are Go programs, not installable as data.",
        "Each regex is a Hyperscan trigger as it is, or *translated* (its lookarounds, which Hyperscan",
        "lacks, dropped: a superset); a pattern neither compiles would be scanned by Python `re` per block",
        "(*fallback*).",
        "",
        "| provider | plugin | regexes | in the one-pass scan |",
        "|---|---|---|---|",
    ]
    seen: dict[tuple[str, str], list[str]] = {}
    for r, _, path in catalogue_triggers():
        if r.plugin != "gitleaks":
            seen.setdefault((r.provider, r.plugin), []).append(path)
    for (provider, plugin), paths in sorted(seen.items()):
        out.append(f"| {provider} | `{plugin}` | {len(paths)} | {', '.join(sorted(set(paths)))} |")
    out += [
        "",
        "Plugins not used: " + "; ".join(f"`{k}` ({v})" for k, v in sorted(SKIPPED.items())) + ".",
        "",
        *gitleaks_section(),
        "",
        "## Shapes of our own",
        "",
        "Kept because the catalogue lacks them, or is narrower (fixed lengths where the issuer allows",
        "longer tokens):",
        "",
    ]
    out += [f"- `{kind}`" for kind, _ in secretrules.SHAPES]
    out += [f"- `{kind}` (not in the catalogue)" for kind, _ in secretrules.OWN_SHAPES]
    out += [
        "- `aws-secret-access-key`: a 40-character token on the line of an AWS key id, or assigned on the",
        "  line before or after it (never across a file: git SHAs are 40 characters too)",
        "- `private-key`: PEM / OpenSSH private key blocks, masked line by line",
        "",
        "## Syntaxes (a secret-named value in each)",
        "",
        "A name is secret by `ledger.redact.names.is_secret_name` (words such as PASSWORD, SECRET,",
        "TOKEN, KEY, AUTH as its last part, trailing digits and qualifiers such as LIVE/TEST dropped).",
        "",
        "| syntax | example |",
        "|---|---|",
    ]
    for name, example in SYNTAXES:
        shown = example.replace("\x1b", "\\x1b").replace("\n", "\\n").replace("|", "\\|")
        out.append(f"| {name} | `{shown}` |")
    out += [
        "",
        "Colour and cursor sequences and NUL bytes are removed before the rules run and the mask is",
        "applied to the original bytes, so ANSI-coloured and UTF-16/32 output is covered (a mask in",
        "UTF-16 text is written in UTF-16). Dirty tracked files in UTF-16/32 are decoded and scanned; a",
        "changed binary file is stored only when no printable run of its bytes holds a secret shape or",
        "known value, else it is left out of the run's tree with a warning naming it.",
        "",
        "## Known values in other forms",
        "",
        "The values ledger hid from the argv, the launcher, secret-named variables and dirty files are",
        "removed again wherever the job prints them, as:",
        "",
    ]
    out += [f"- {form}" for form in KNOWN_FORMS]
    out += [
        "",
        "They are kept for `ledger recover` in the staging folder (`.ledger/staging/<id>/secrets.json`,",
        "mode 0600, never committed, removed with the run).",
        "",
        "## Kept on purpose",
        "",
        "Token counts (`--max-new-token 512`), None/empty/true/false, Miles' dataset-column and",
        "special-token flags (`--input-key`, `--pad-token`), a YAML flow mapping after a secret-ish name",
        "(`secrets: {names: [...]}`: its pairs are judged on their own). The terminal still shows the",
        "job's raw output. Not redacted: the debug data files a job writes (rollout `.pt` files are",
        'tracked byte for byte). The manifest\'s `redacted` lists `"<where>: <name or pattern:kind>"`',
        "(`trainer.log: pattern:hf-token`, `code/config.yaml: api_key`, `engine.log: pattern:known-value`).",
        "",
        "## Speed",
        "",
        BENCH.replace("BENCH_RATIO", BENCH_RATIO),
        "",
    ]
    return "\n".join(out)


def main(argv: list[str]) -> int:
    page = render()
    if "--write" in argv:
        PATH.write_text(page, encoding="utf-8")
        return 0
    if "--check" in argv:
        return 0 if PATH.is_file() and PATH.read_text(encoding="utf-8") == page else 1
    sys.stdout.write(page)
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
