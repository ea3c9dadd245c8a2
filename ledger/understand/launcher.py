"""Find the training command a launcher actually ran, from the job's output.

A Miles job is often a launcher (a bash script under `set -ex`, or a Python script) that starts
Ray and then runs `ray job submit ... -- python3 train.py ARGS`. The settings of the run are the
ARGS of that last command, and the launcher shows them in its output:

- bash xtrace lines, `+ cmd` (`++ cmd` when nested), quoted the way bash quotes: `'...'` with
  `'\\''` for a quote, `$'...'` for control characters;
- Python launcher lines `EXEC: <shell command>`, quoted with `shlex.quote` (may hold `&&`, `|`).

Both are read with one small shell-word tokenizer (shlex gets `$'...'` and operators wrong).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from ledger.config import DEFAULT_TRAINING_PATTERNS
from ledger.understand.envvars import runtime_env_from_ray_argv
from ledger.understand.settings import (
    is_interpreter,
    locate_training_command,
    split_training_command,
)

# lines one quoted argument may span in a command trace before it is read as it stands
MAX_CONTINUATION = 200
_XTRACE_RE = re.compile(r"^(\++) (.*)$")
_EXEC_RE = re.compile(r"^(?:.*?\s)?EXEC: (.*)$")
_ENV_REPORT_PREFIX = "ENV_REPORT_JSON="
_ASSIGNMENT_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*=")
_SHELLS = frozenset({"bash", "sh", "zsh", "dash", "ksh"})
_SHELL_OPTS_WITH_ARG = frozenset({"-o", "+o", "-O", "+O", "--rcfile", "--init-file"})
_CONTROL_OPS = frozenset({"&&", "||", ";", ";;", "|", "|&", "&", "(", ")"})
# longest first, so `&&` is not read as two `&`
_OPERATORS = ("&>>", "<<<", "&&", "||", ";;", "|&", ">>", ">&", ">|", "<<", "<&", "<>", "&>")
# `$'...'` escapes that stand for one character
_ANSI_SIMPLE = dict(zip("abeEfnrtv\\'\"?", "\a\b\x1b\x1b\f\n\r\t\v\\'\"?", strict=True))


class Operator(msgspec.Struct, frozen=True):
    """A shell operator (`&&`, `|`, `>`, ...) met outside quotes."""

    text: str


class TrainingCommand(msgspec.Struct):
    """The training command found for a job.

    `argv` runs from the interpreter onward (`python3 train.py --lr 1e-6 ...`), `script` is the
    script path or module name, `args` the arguments after it. `ray_argv` is the
    `ray job submit ...` part before `--` (None when not submitted through Ray) and
    `runtime_env` its parsed `--runtime-env-json`. `source` is `xtrace`, `exec` or `argv`.
    """

    argv: list[str]
    script: str
    args: list[str]
    ray_argv: list[str] | None
    runtime_env: dict[str, object] | None
    source: str


def _leading(pattern: str, text: str, start: int) -> str:
    """The text `pattern` matches at `start`, or ''."""
    match = re.compile(pattern).match(text, start)
    return match.group(0) if match else ""


def _ansi_c(text: str, i: int) -> tuple[str, int, bool]:
    """Decode a `$'...'` body starting at `i` (after the quote).

    Octal and `\\x` escapes are bytes (bash writes non-ASCII UTF-8 that way in the C locale),
    decoded as UTF-8 with surrogateescape, as Python decodes `sys.argv`.
    Returns (decoded text, index after the closing quote, whether the quote was closed).
    """
    out = bytearray()

    def put(chars: str) -> None:
        out.extend(chars.encode("utf-8", "surrogateescape"))

    closed = False
    while i < len(text):
        c = text[i]
        if c == "'":
            closed = True
            i += 1
            break
        if c != "\\" or i + 1 >= len(text):
            put(c)
            i += 1
            continue
        e = text[i + 1]
        i += 2
        if e in _ANSI_SIMPLE:
            put(_ANSI_SIMPLE[e])
        elif e in "01234567":
            digits = e + _leading(r"[0-7]{0,2}", text, i)
            out.append(int(digits, 8) & 0xFF)
            i += len(digits) - 1
        elif e in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[e]
            hexes = _leading(f"[0-9a-fA-F]{{1,{width}}}", text, i)
            if not hexes:
                put("\\" + e)
            elif e == "x":
                out.append(int(hexes, 16))
            else:
                put(chr(int(hexes, 16)))
            i += len(hexes)
        elif e == "c" and i < len(text):
            out.append(ord(text[i]) & 0x1F)
            i += 1
        else:
            put("\\" + e)
    return out.decode("utf-8", "surrogateescape"), i, closed


def shell_words(text: str) -> list[str | Operator]:
    """Split shell text into words and operators, removing quotes like the shell.

    Handles `'...'`, `$'...'`, `"..."` (backslash escapes only `$`, backquote, `"`, `\\`),
    backslashes outside quotes, `#` comments and operators including `2>&1`. Variables are not
    expanded. An unterminated quote runs to the end of the text rather than failing.
    """
    return _tokenize(text)[0]


def _tokenize(text: str) -> tuple[list[str | Operator], bool]:
    """(words, complete): complete is False when a quote is left open at the end."""
    words: list[str | Operator] = []
    complete = True
    buf: list[str] = []
    in_word = quoted = False
    i, n = 0, len(text)

    def flush() -> None:
        nonlocal in_word, quoted
        if in_word:
            words.append("".join(buf))
        buf.clear()
        in_word = quoted = False

    while i < n:
        c = text[i]
        if c in " \t\n":
            flush()
            i += 1
        elif c == "'":
            end = text.find("'", i + 1)
            if end < 0:
                end, complete = n, False
            buf.append(text[i + 1 : end])
            in_word = quoted = True
            i = end + 1
        elif c == "$" and text.startswith("'", i + 1):
            decoded, i, closed = _ansi_c(text, i + 2)
            complete = complete and closed
            buf.append(decoded)
            in_word = quoted = True
        elif c == '"':
            i += 1
            while i < n and text[i] != '"':
                if text[i] == "\\" and i + 1 < n and text[i + 1] in '$`"\\\n':
                    i += 1
                buf.append(text[i])
                i += 1
            complete = complete and i < n
            i += 1
            in_word = quoted = True
        elif c == "\\":
            if i + 1 < n and text[i + 1] != "\n":
                buf.append(text[i + 1])
                in_word = True
            i += 2
        elif c == "#" and not in_word:
            break
        elif c in "|&;()<>":
            fd = in_word and not quoted and "".join(buf).isdigit() and c in "<>"
            if fd:
                buf.clear()
                in_word = False
            flush()
            op = next((o for o in _OPERATORS if text.startswith(o, i)), c)
            words.append(Operator(op))
            i += len(op)
        else:
            buf.append(c)
            in_word = True
            i += 1
    flush()
    return words, complete


def simple_commands(words: Sequence[str | Operator]) -> list[list[str]]:
    """Split tokenized shell into simple commands, dropping redirections and their targets."""
    commands: list[list[str]] = [[]]
    skip_next = False
    for word in words:
        if isinstance(word, Operator):
            if word.text in _CONTROL_OPS:
                commands.append([])
            else:
                skip_next = True
            continue
        if skip_next:
            skip_next = False
            continue
        commands[-1].append(word)
    return [command for command in commands if command]


def without_comments(text: str) -> str:
    """Launcher text without `#` comments (bash and Python), so a flag only mentioned in a comment
    does not count as set (the bundled examples/run.sh names --save-debug-event-data in one)."""
    kept = []
    for line in text.splitlines():
        if line.lstrip().startswith("#"):
            continue
        kept.append(re.sub(r"(^|\s)#(?![{!]).*$", "", line))
    return "\n".join(kept)


def _matches(script: str, patterns: Sequence[str]) -> bool:
    return any(re.search(pattern, script) for pattern in patterns)


def training_command_from_argv(
    argv: Sequence[str],
    patterns: Sequence[str] = DEFAULT_TRAINING_PATTERNS,
    source: str = "argv",
) -> TrainingCommand | None:
    """The training command in one simple command's argv, or None when its script does not match.

    Understands `ray job submit [opts] -- python3 X.py ...` (any script: what Ray runs is the
    training command) as well as a direct command (its script must match `patterns`).
    """
    argv = list(argv)
    body, ray_argv = argv, None
    for index in range(len(argv) - 2):
        if os.path.basename(argv[index]) != "ray" or argv[index + 1 : index + 3] != [
            "job",
            "submit",
        ]:
            continue
        rest = argv[index + 3 :]
        if "--" in rest:
            cut, skip = index + 3 + rest.index("--"), 1
        else:  # no separator: the entrypoint starts at the interpreter
            located = locate_training_command(rest)
            if located is None:
                return None
            cut, skip = index + 3 + located[0], 0
        ray_argv, body = argv[index:cut], argv[cut + skip :]
        break
    located = locate_training_command(body)
    if located is None:
        return None
    prefix, script, args = split_training_command(body[located[0] :])
    # whatever `ray job submit ... --` runs is the training command, whatever its name;
    # the patterns only pick it out of launchers that do not go through Ray
    if script is None or (ray_argv is None and not _matches(script, patterns)):
        return None
    return TrainingCommand(
        argv=[*prefix, script, *args],
        script=script,
        args=args,
        ray_argv=ray_argv,
        runtime_env=runtime_env_from_ray_argv(ray_argv) if ray_argv is not None else None,
        source=source,
    )


def find_training_command(lines: Iterable[str], patterns: Sequence[str] = DEFAULT_TRAINING_PATTERNS) -> TrainingCommand | None:
    """The LAST training command shown in a job's output (xtrace or `EXEC:` lines), else None.

    A quoted argument holding a newline spans several output lines; they are joined until the
    quote closes (at most `MAX_CONTINUATION` lines, then the command is read as it stands).
    """
    found: TrainingCommand | None = None
    source, text, extra_lines = "", "", 0
    for raw in lines:
        line = raw.rstrip("\r\n")
        if source:
            text += "\n" + line
            extra_lines += 1
        else:
            xtrace = _XTRACE_RE.match(line)
            exec_line = None if xtrace else _EXEC_RE.match(line)
            if xtrace:
                source, text = "xtrace", xtrace.group(2)
            elif exec_line:
                source, text = "exec", exec_line.group(1)
            else:
                continue
            extra_lines = 0
        words, complete = _tokenize(text)
        if not complete and extra_lines < MAX_CONTINUATION:
            continue
        found = _last_match(words, patterns, source) or found
        source = ""
    if source:
        found = _last_match(_tokenize(text)[0], patterns, source) or found
    return found


def _last_match(words: Sequence[str | Operator], patterns: Sequence[str], source: str) -> TrainingCommand | None:
    found: TrainingCommand | None = None
    for command in simple_commands(words):
        found = training_command_from_argv(command, patterns, source) or found
    return found


def _strip_env_prefix(argv: Sequence[str]) -> list[str]:
    """Drop leading `env`, `nohup`, `exec` and `NAME=value` words."""
    words = list(argv)
    while words and (words[0] in ("env", "nohup", "exec") or _ASSIGNMENT_RE.match(words[0])):
        words.pop(0)
    return words


def _shell_script(words: Sequence[str]) -> str | None:
    i = 1
    while i < len(words):
        token = words[i]
        if token in _SHELL_OPTS_WITH_ARG:
            i += 2
        elif token.startswith(("-", "+")):
            if "c" in token.lstrip("-+") and not token.startswith("--"):
                return None  # `bash -c '...'`: inline code, no script file
            i += 1
        else:
            return token
    return None


def is_launcher(argv: Sequence[str], cwd: Path, patterns: Sequence[str] = DEFAULT_TRAINING_PATTERNS) -> Path | None:
    """The launcher script file the command runs, or None.

    Launchers: `bash run.sh`, `sh x.sh`, `./run.sh`, `python3 launch.py`, `python3 -m pkg.launch`
    (resolved under `cwd`). A command whose script matches the training patterns (a direct
    `python3 train.py`, or `ray job submit -- python3 train.py`) has no launcher.
    """
    if training_command_from_argv(argv, patterns) is not None:
        return None
    words = _strip_env_prefix(argv)
    if not words:
        return None
    script: str | None
    if os.path.basename(words[0]) in _SHELLS:
        script = _shell_script(words)
    elif is_interpreter(words[0]) or words[0].endswith(".py"):
        prefix, script, _ = split_training_command(words)
        if script is not None and prefix and prefix[-1] == "-m":
            base = cwd / script.replace(".", "/")
            module_file = base.with_suffix(".py")
            script = str(module_file if module_file.is_file() else base / "__main__.py")
    elif "/" in words[0]:
        script = words[0]
    else:
        script = None
    if script is None or _matches(script, patterns):
        return None
    path = Path(script) if os.path.isabs(script) else cwd / script
    return path if path.is_file() else None


def env_report(lines: Iterable[str]) -> list[dict[str, object]]:
    """Parse every `ENV_REPORT_JSON={...}` line (actor prefixes allowed, bad JSON skipped).

    Each report becomes `{"role", "rank", "packages": {name: {"commit", "dirty"}}}`, the
    packages taken from the report's `git_repos`.
    """
    decoder = json.JSONDecoder()
    reports: list[dict[str, object]] = []
    for line in lines:
        start = line.find(_ENV_REPORT_PREFIX)
        if start < 0:
            continue
        try:
            payload, _ = decoder.raw_decode(line, start + len(_ENV_REPORT_PREFIX))
        except ValueError:
            continue
        if not isinstance(payload, dict):
            continue
        packages: dict[str, dict[str, object]] = {}
        repos = payload.get("git_repos")
        for repo in repos if isinstance(repos, list) else []:
            if isinstance(repo, dict) and isinstance(repo.get("package_name"), str):
                packages[repo["package_name"]] = {
                    "commit": repo.get("commit"),
                    "dirty": bool(repo.get("dirty")),
                }
        reports.append({"role": payload.get("role"), "rank": payload.get("rank"), "packages": packages})
    return reports
