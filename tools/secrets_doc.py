"""docs/secrets.md, generated from what the redaction code covers.

    .venv/bin/python tools/secrets_doc.py            # print the page
    .venv/bin/python tools/secrets_doc.py --write    # rewrite docs/secrets.md
    .venv/bin/python tools/secrets_doc.py --check    # exit 1 when docs/secrets.md is not current

The shapes are read from the rules themselves (`secretrules.SHAPES`, `OWN_SHAPES`, the loaded
catalogue); each syntax is listed with an example that `syntax_examples_hidden` proves is hidden
(tests/test_secret_corpus.py runs it and compares the page with the file).
"""

from __future__ import annotations

import sys
from pathlib import Path

from ledger.redact import filescan, gitleaks
from ledger.redact import rules as secretrules
from ledger.redact.catalogue import SKIPPED, catalogue_version
from ledger.redact.names import HIDDEN_LABEL, MAX_LABEL
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
    ("Authorization, any scheme", f"Authorization: SSWS 00{VALUE}"),
    ("Authorization with parameters (Digest, OAuth, AWS4)", f'Authorization: Digest username="u", nonce="n1", response="{VALUE}"'),
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
the ERE equivalents of every trigger, ours and the catalogue's, gitleaks' included (bench/bench_redact.py;
the few catalogue classes ERE cannot say are given to grep as their literal start): a 1 GiB Miles-shaped
log (1,025 planted secret lines, 1,025 masks written, nothing else touched) scans in
**BENCH_RATIO**. Compiling the rules' database is in each round (about 0.2 s on this machine: the
trigger set is compiled as chosen, once); deriving the catalogue from detect-secrets' plugins and
gitleaks' data (about 0.5 s) happens once per user, detect-secrets version and rules file (cached
under `~/.cache/ledger/catalogue/`), then it is read as data. A data file tracked with DVC is
scanned at about 150 MiB/s (one pass over a `.pt` file's bytes; its deflated members decompressed).
Memory on one 200 MB line stays bounded by the window (`WINDOW` + `OVERLAP`;
tests/test_streamed.py runs one through `ledger run`)."""
BENCH_RATIO = (
    "0.97x grep's CPU time (3.40 s vs 3.51 s; wall 0.97x), and 1.76x when also writing the redacted copy (`redact_file`); target <= 2x"
)
PATH = Path(__file__).resolve().parents[1] / "docs" / "secrets.md"


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
        "<!-- generated from the code by `make docs` (tools/secrets_doc.py); do not edit by hand -->",
        "",
        "Every byte bound for git or the DVC cache (argv, environment, launcher and its xtrace, dirty and",
        "index-new tracked files, job stdout/stderr, engine lines, extra logs, `--note`, Ray runtime-env, the",
        "manifest, its keys) goes through one `Redactor` (ledger/redact/scanner.py): a one-pass Hyperscan trigger",
        "scan finds the few lines that may hold a secret, and the rules below run on those only. A value",
        "is replaced by `***`; the manifest's `redacted` says what kind was hidden where, never the value.",
        "The data files a run's outputs hold are scanned instead, and one holding a secret is held back",
        "from DVC (below). A `--name` holding a secret is refused before the job (exit 125): names go raw",
        "into commit messages and the reflog.",
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
        "GitGuardian's service; gitleaks and trufflehog are Go programs, not installable from PyPI (gitleaks'",
        "rules are carried as data instead: next section).",
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
        *data_files_section(),
        "",
        *labels_section(),
        "",
        "## Kept on purpose",
        "",
        "Token counts (`--max-new-token 512`), None/empty/true/false, Miles' dataset-column and",
        "special-token flags (`--input-key`, `--pad-token`), a YAML flow mapping after a secret-ish name",
        "(`secrets: {names: [...]}`: its pairs are judged on their own). The terminal still shows the",
        "job's raw output.",
        "",
        *not_promised_section(),
        "",
        "## Speed",
        "",
        BENCH.replace("BENCH_RATIO", BENCH_RATIO),
        "",
    ]
    return "\n".join(out)


def data_files_section() -> list[str]:
    """What is promised for the data files ledger tracks with DVC."""
    return [
        "## Data files tracked with DVC",
        "",
        "The files a run's outputs hold (`--save-debug-rollout-data` `.pt` files, event data, `--data`",
        "paths) go to the DVC cache and remote byte for byte, so they are not redacted but scanned, and a",
        "file holding a secret is held back (ledger/redact/filescan.py, ledger/record/heldback.py). Each",
        f"file is read as bytes in windows of {filescan.CHUNK >> 20} MiB overlapping by {filescan.OVERLAP >> 10} KiB "
        "(memory stays bounded; a secret",
        f"up to {filescan.OVERLAP >> 10} KiB long is found across a boundary), as it is and without its NUL bytes (UTF-16/32 text), and",
        "inside a zip archive (a `.pt` file made by `torch.save`) member by member, decompressed, with the",
        "members' names. It is looked for: the run's known values in every form listed above, the token",
        "shapes (ours, detect-secrets', gitleaks'), credentials in URLs and Authorization headers, PEM",
        "private keys, and gitleaks' file-name rule (`*.p12`, `*.pfx`). A file with a hit never reaches",
        "the DVC cache: under the run's staging folder it is moved to `.ledger/untracked/<id>/held-back/<role>/`",
        "(the user's data is kept, raw, on this machine only) and the rest of the output is tracked; an",
        "output elsewhere is not tracked at all and nothing is moved. The output's `data` entry lists",
        "`held_back: [{file, rule}]` (`3.pt!archive/data.pkl`, `known-value`), never the value; a member",
        "that cannot be read (encrypted) holds its file back as `unreadable-zip-member`.",
    ]


def labels_section() -> list[str]:
    """What is promised for the names ledger writes."""
    return [
        "## Names, keys and the record of what was hidden",
        "",
        "What ledger writes about a secret is checked like the secret: a setting's name, every key of",
        "the manifest and each part of a `redacted` entry go through the rules (`Redactor.redact_label`),",
        f"and a text that cannot be a name (more than {MAX_LABEL} characters, a line break, a control character:",
        f"a PGP key block taken for a flag) is written as `{HIDDEN_LABEL}`. A value that only starts with dashes",
        "(`-----BEGIN PGP PRIVATE KEY BLOCK-----`) is a flag's value, not a flag. The manifest's `redacted`",
        'lists `"<where>: <name or pattern:kind>"` (`trainer.log: pattern:hf-token`, `code/config.yaml: api_key`,',
        "`engine.log: pattern:known-value`, `manifest: pattern:secret-in-a-name`), never a value. A `--name`",
        "or a tag holding a secret shape is refused: names and tags go raw into commit messages.",
    ]


def not_promised_section() -> list[str]:
    """What redaction does not promise."""
    return [
        "## Not promised",
        "",
        "- A secret the job transforms beyond the forms above: encrypted, compressed outside a zip",
        "  (gzip, tar), split into model token ids in a rollout, or spelled out in prose.",
        "- A shapeless secret under a name no rule reads as secret (`--db-conn hunter2`), unless it is a",
        "  known value (the value of a secret-named variable or flag).",
        "- In data files, secret-named syntaxes (`password: x` in a model response): only shapes and",
        "  known values are looked for there, so a rollout is not held back for a prompt about passwords.",
        "- gitleaks' findings exactly as gitleaks reports them: its keywords are looked for on the line",
        "  (in a log) or in the text (a file), not the whole repository; its path-limited rules run on",
        "  every text; its decoding of base64/hex segments is not done (ledger decodes only the run's",
        "  known values' forms); its entropy floors and allowlists let low-entropy or placeholder-looking",
        "  values through, as gitleaks does.",
        "- The raw output the terminal shows, the held-back files kept on this machine, and the names of",
        "  files in the run's code snapshot (a dirty file's path is the user's own).",
    ]


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
