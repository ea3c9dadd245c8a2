"""Secret scan of a Miles-shaped log vs `grep -cE` with an equivalent pattern set, same file, same run.

`python3 bench/bench_redact.py --mib 64` (quick) / `--mib 1024` (`run_all.py --full`). The log is
`gen_log.py`'s (SGLang decode lines, rollout/train perf lines) with a secret-bearing line planted every
~5,000 lines. Measured (median of `--repeat`):
- grep: `LC_ALL=C grep -ciE -f PATTERNS LOG` (bytes, like ledger; a UTF-8 locale makes grep ~14x slower)
  with the patterns below, which find what ledger's triggers find. Its output goes to a pipe: with
  stdout on /dev/null GNU grep stops at the first match and looks 10x faster than it is;
- scan: ledger reading the log in blocks and redacting it (`Redactor.redact_lines`, nothing written):
  the work added to recording a run;
- redact_file: the same, writing the redacted copy (what recording does);
- the Python `re` fallback engine (used where the hyperscan wheel is missing), on the same file.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from ledger.redact import scanner  # noqa: E402
from ledger.redact.scanner import Redactor  # noqa: E402

W = "(key|token|auth|pat|pass|pwd|secrets?|passwords?|passwd|passphrase|credentials?|private|apikey)"
N = "[[:alnum:]_.-]{0,64}"
# ERE equivalents of ledger.redact.triggers.TRIGGERS (grep -i covers the caseless ones too)
GREP_PATTERNS = [
    W + N + "\\\\?[\"'][[:space:]]{0,8}[:,]",
    W + N + "[ \t]{0,8}[:=][ \t]{0,8}([\"'\\\\]|[0-9]{0,9}[^0-9[:space:],;'\"\\\\})]|[0-9]{10})",
    "-" + N + W + N + "[ \t]{1,8}[^[:space:]-]",
    W + N + " \\.\\.\\.",
    "\\bhf_[[:alnum:]]{30}",
    "\\b(gh[pousr]_[[:alnum:]]{20}|github_pat_[[:alnum:]_]{20})",
    "\\bglpat-[[:alnum:]_-]{20}",
    "\\bsk-[[:alnum:]_-]{20}",
    "\\b(AKIA|ASIA)[A-Z0-9]{16}",
    "\\bxox[abposr]-[[:alnum:]-]{10}",
    "\\bAIza[[:alnum:]_-]{35}",
    "\\beyJ[[:alnum:]_-]{8,}\\.[[:alnum:]_-]{8}",
    "\\b(bearer[[:space:]]+[[:alnum:]._~+/=-]{8}|basic[[:space:]]+[[:alnum:]+/]{6})",
    "://[^/[:space:]:@'\"]{0,256}:[^/[:space:]@'\"]{1,256}@",
    "\\bhttps?://[[:alnum:]_.~-]{16,256}@",
    "-----(BEGIN|END) [A-Z0-9 ]{0,40}PRIVATE KEY",
]


def ere(pattern: bytes) -> str:
    """A trigger regex (Python/Hyperscan syntax) as a POSIX ERE for `grep -E` (`-i` covers case)."""
    import re

    p = pattern.decode()
    p = re.sub(r"\(\?P<\w+>", "(", p)
    p = re.sub(r"\(\?[a-zA-Z-]*:", "(", p).replace("(?:", "(")  # (?i: (?-i: (?s: too: grep -i covers case
    p = re.sub(r"^\(\?[a-z]+\)", "", p).replace("\\x60", "`").replace("\\Z", "$").replace("\\z", "$")
    p = re.sub(r"([*+?}])\?", r"\1", p)  # lazy quantifiers: same lines match
    classes = {r"\d": "0-9", r"\s": "[:space:]", r"\w": "[:alnum:]_", r"\/": "/", r"\\": "\\\\", r"\.": "."}
    out, i, in_class, dash = [], 0, False, False
    while i < len(p):
        two = p[i : i + 2]
        if in_class and two == r"\-":  # a literal "-" inside a class must come last for ERE
            dash = True
            i += 2
            continue
        if in_class and two in classes:
            out.append(classes[two])
            i += 2
            continue
        if not in_class and two in (r"\d", r"\s", r"\w"):
            out.append("[" + classes[two] + "]")
            i += 2
            continue
        if p[i] == "[" and not in_class:
            in_class = True
        elif p[i] == "]" and in_class and out[-1] not in ("[", "[^"):
            in_class = False
            if dash:
                out.append("-")
                dash = False
        out.append(two if p[i] == "\\" else p[i])
        i += 2 if p[i] == "\\" else 1
    text = "".join(out)
    # a "-" inside a class must come last for ERE
    return re.sub(r"\[(\^?)([^\]]*?)-\]", r"[\1\2-]", text)


def catalogue_patterns() -> list[str]:
    """ERE equivalents of the triggers added in round two (own shapes, catalogue, syntaxes) and
    round three (gitleaks' rules: their keywords, or their regex)."""
    import re

    from ledger.redact.scanner import trigger_patterns
    from ledger.redact.triggers import TRIGGERS

    base = len(TRIGGERS)
    out = []
    for p, _ in trigger_patterns()[base - 8 :]:
        e = ere(p)
        probe = subprocess.run(["grep", "-cE", e, "/dev/null"], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if probe.returncode > 1 or probe.stderr:  # a class ERE cannot say as written: its literal start (a superset)
            e = re.escape(re.match(r"[A-Za-z0-9:/_.-]*", p.decode()).group()).replace("\\-", "-")  # type: ignore[union-attr]
        out.append(e)
    return out


PLANTED = [
    b"[2026-11-29 10:00:00] wandb: WANDB_API_KEY=0123456789abcdef0123456789abcdef\n",
    b"(MegatronTrainRayActor pid=2)   wandb_key ......................... abcdef0123456789\n",
    b"HTTPError 401 for https://bot:" + b"pw" * 8 + b"@git.example.invalid/r.git\n",
    b"loaded " + b"hf" + b"_" + b"Ab1" * 12 + b" from cache\n",
]


def make_log(path: Path, mib: int) -> None:
    steps = max(1, mib * (1 << 20) // 14800)
    with open(path, "wb") as out:
        gen = subprocess.Popen(
            [sys.executable, str(HERE / "gen_log.py"), "--steps", str(steps), "--engine-lines", "100"], stdout=subprocess.PIPE
        )
        assert gen.stdout is not None
        i = 0
        while block := gen.stdout.read(1 << 20):
            cut = block.rfind(b"\n") + 1
            out.write(block[:cut] + PLANTED[i % len(PLANTED)] + block[cut:])
            i += 1
        gen.wait()


def timed(fn: object, repeat: int, child: bool = False) -> tuple[float, float]:
    """Median (wall, CPU) seconds; CPU of the child processes (grep) or of this process (ledger).

    CPU time is the fair figure on a shared machine: wall time includes waiting for a core.
    """
    walls, cpus = [], []
    for _ in range(repeat):
        scanner._COMPILED.clear()  # every round pays for compiling the patterns, as a run does
        c0 = resource.getrusage(resource.RUSAGE_CHILDREN) if child else None
        p0 = time.process_time()
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        walls.append(time.perf_counter() - t)
        if c0 is not None:
            c1 = resource.getrusage(resource.RUSAGE_CHILDREN)
            cpus.append(c1.ru_utime - c0.ru_utime + c1.ru_stime - c0.ru_stime)
        else:
            cpus.append(time.process_time() - p0)
    return statistics.median(walls), statistics.median(cpus)


def scan(path: Path, make: type[Redactor] = Redactor) -> int:
    r = make()
    n = 0
    with open(path, "rb") as f:
        for data, kind in scanner._chunks(f):
            out = r.redact_lines(data) if kind == "lines" else r.redact_part(data, kind == "end")
            n += out is not data
    return n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-fallback", action="store_true", help="skip the slow Python re engine")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="ledger-bench-redact-") as tmp:
        log = Path(tmp) / "trainer.log"
        make_log(log, args.mib)
        size = log.stat().st_size
        pats = Path(tmp) / "patterns"
        pats.write_text("\n".join(GREP_PATTERNS + catalogue_patterns()) + "\n")
        env = {**os.environ, "LC_ALL": "C"}
        hits = subprocess.run(["grep", "-ciE", "-f", str(pats), str(log)], env=env, stdout=subprocess.PIPE, text=True).stdout.strip()
        grep = ["grep", "-ciE", "-f", str(pats), str(log)]
        w_grep, c_grep = timed(lambda: subprocess.run(grep, env=env, stdout=subprocess.PIPE), args.repeat, True)
        engine = Redactor().engine
        w_scan, c_scan = timed(lambda: scan(log), args.repeat)
        dest = Path(tmp) / "redacted.log"
        w_file, c_file = timed(lambda: Redactor().redact_file(log, dest), args.repeat)
        redacted = dest.read_bytes().count(b"***")
        rows = [
            ("log", f"{size / (1 << 20):.0f} MiB, {hits} lines hit by grep, {redacted} masks written"),
            ("grep -ciE (LC_ALL=C)", f"cpu {c_grep:.2f} s ({size / c_grep / 1e6:.0f} MB/s), wall {w_grep:.2f} s"),
            (
                f"ledger scan ({engine})",
                f"cpu {c_scan:.2f} s, wall {w_scan:.2f} s: ratio {c_scan / c_grep:.2f}x grep cpu, "
                f"{w_scan / w_grep:.2f}x wall (target <= 2x)",
            ),
            (
                "ledger redact_file",
                f"cpu {c_file:.2f} s, wall {w_file:.2f} s: ratio {c_file / c_grep:.2f}x grep cpu (also writes the copy)",
            ),
        ]
        if not args.no_fallback:
            small = Path(tmp) / "small.log"
            with open(log, "rb") as f:
                small.write_bytes(f.read(16 << 20))
            _, c_small = timed(lambda: subprocess.run([*grep[:-1], str(small)], env=env, stdout=subprocess.PIPE), 1, True)
            real = scanner._Engine

            def re_only(patterns: list[tuple[bytes, bool]]) -> scanner._Engine:
                import re

                eng = real([])
                eng._re = re.compile(b"|".join((b"(?i:" if c else b"(?:") + p + b")" for p, c in patterns))
                eng.kind = "re"
                return eng

            scanner._Engine = re_only  # type: ignore[assignment,misc]
            try:
                _, c_re = timed(lambda: scan(small), 1)
            finally:
                scanner._Engine = real  # type: ignore[misc]
            rows.append(("ledger scan (re fallback)", f"first 16 MiB: cpu {c_re:.2f} s, ratio {c_re / c_small:.1f}x grep cpu"))
    print(f"\n## secret scan vs grep -cE, same file, same run (median of {args.repeat})")
    for k, v in rows:
        print(f"  {k.ljust(28)}  {v}")


if __name__ == "__main__":
    main()
