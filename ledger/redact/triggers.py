"""The trigger patterns: every secret the rules would hide also matches one of these (tested on
the corpus in tests/test_secret_corpus.py), so a block of lines where none matches is clean and
only the lines they hit run the Python rules (`ledger.redact.scanner`).

`%s` in a pattern is where the configured secret-name words go (`trigger_patterns`).
"""

from __future__ import annotations

_W = rb"(?:key|token|auth|pat|pass|pwd|secrets?|passwords?|passwd|passphrase|credentials?|private|apikey"
_N = rb"[\w.-]*"
# (pattern, caseless)
TRIGGERS: tuple[tuple[bytes, bool], ...] = (
    # one pattern for the named forms: fewer engines woken by the common word "token"
    (
        _W + b"%s)" + _N + rb"(?:\\?[\"']\s{0,8}[:,]"  # "name": v   ['--name', v]
        rb"|[ \t]*[:=][ \t]*(?:[\"'\\]|\d{0,9}[^\d\s,;'\"\\})\]]|\d{10})"  # name=v, name: v (not a count)
        rb"| \.\.\.)",
        True,
    ),  # Megatron's argument dump
    (rb"-" + _N + _W + b"%s)" + _N + rb"(?:[ \t]|\\\n){1,8}[^\s-]", True),  # --name value
    (rb"\bhf_[A-Za-z0-9]{30}", False),
    (rb"\b(?:gh[pousr]_[A-Za-z0-9]{20}|github_pat_[A-Za-z0-9_]{20})", False),
    (rb"\bglpat-[A-Za-z0-9_-]{20}", False),
    (rb"\bsk-[A-Za-z0-9_-]{20}", False),
    (rb"\b(?:AKIA|ASIA)[A-Z0-9]{16}", False),
    (rb"\bxox[abposr]-[A-Za-z0-9-]{10}", False),
    (rb"\bAIza[A-Za-z0-9_-]{35}", False),
    (rb"\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8}", False),
    (rb"\b(?:bearer\s+[A-Za-z0-9._~+/=-]{8}|basic\s+[A-Za-z0-9+/]{6})", True),
    (rb"://[^/\s:@'\"]{0,256}:[^/\s@'\"]{1,256}@", False),
    (rb"\bhttps?://[A-Za-z0-9_.~-]{16,256}@", False),
    (rb"-----(?:BEGIN|END) [A-Z0-9 ]{0,40}PRIVATE KEY", False),
    # name => v, name := v, name -> v; <password>v</password>; password%3Dv; netrc; commands
    (_W + b"%s)" + _N + rb"\\?[\"']?[ \t]*(?:=>|:=|->)", True),
    (_W + b"%s)" + rb"[\w.-]*(?:\s[^<>\n]*)?>[^<\n]", True),
    (_W + b"%s)" + _N + rb"%3D[^&\s]", True),
    (rb"%3A%2F%2F[^%\s/@]{0,256}%3A", True),
    (rb"password[ \t]+[^\s]", False),
    (rb"\b(?:docker|podman|nerdctl|sshpass|mysql|mysqldump|mysqladmin|mariadb)\b[^\n]*[ \t]-p", False),
    (rb"\b(?:curl|wget)\b[^\n]*[ \t](?:-u|--user|--proxy-user)", False),
    (rb"cookie\\?[\"']?[ \t]*[:=]", True),
)
