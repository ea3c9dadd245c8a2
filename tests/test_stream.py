"""OutputCapture and the split: live terminal copy, engine/trainer split, redaction, odd inputs.

The output goes the way `ledger run` sends it: through a real pipe into an `OutputCapture` (the
terminal copy and the raw file), then through a `LineSplitter` (`split_output`) into the logs."""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

import pytest
from logsplit import split_output

from ledger.capture.stream import LineSplitter, OutputCapture
from ledger.config import DEFAULT_ENGINE_PATTERNS

ENGINE = [
    b"(SGLangEngine pid=123) [2026-04-15 07:57:53 TP0] Decode batch. #token: 5, token usage: 0.1\n",
    b'(SGLangEngine pid=4567, ip=10.0.0.2) INFO:     127.0.0.1:5 - "POST /generate HTTP/1.1" 200\n',
]
TRAINER = [
    b"(MegatronTrainRayActor pid=9) [2026-04-15 07:57:53.1 actor] model.py:1 - step 0: {'train/loss': 1.0}\n",
    b"(RolloutManager pid=1805485) [2026-04-15 07:57:53] rollout.py:1193 - perf 0: {'perf/rollout_time': 3.1}\n",
    b"[2026-04-15 07:57:53.123 main] train.py:88 - Timer train end (elapsed: 3.1s)\n",
    b"(SGLangEngine) not an engine line: no pid\n",
    b"  (SGLangEngine pid=1) indented, so not at line start\n",
]


def sample(n: int = 400, seed: int = 0) -> tuple[bytes, bytes, bytes]:
    """(stream, expected trainer bytes, expected engine bytes)."""
    rng = random.Random(seed)
    stream, trainer, engine = [], [], []
    for _ in range(n):
        if rng.random() < 0.3:
            line = rng.choice(ENGINE)
            engine.append(line)
        else:
            line = rng.choice(TRAINER)
            trainer.append(line)
        stream.append(line)
    return b"".join(stream), b"".join(trainer), b"".join(engine)


@dataclass
class Captured:
    """What a capture and the split of its raw file gave."""

    terminal_seen: bytes
    bytes_in: int
    error: BaseException | None
    redacted: list[str]
    command_lines: list[str]


def split_raw(tmp_path: Path, cap: OutputCapture, engine_patterns: list[str] | None = None) -> LineSplitter:
    """The raw file the capture wrote, split into trainer.log and engine.log beside it."""
    patterns = engine_patterns or list(DEFAULT_ENGINE_PATTERNS)
    return split_output(tmp_path / "output.raw", tmp_path / "trainer.log", tmp_path / "engine.log", patterns)


def capture_bytes(tmp_path: Path, chunks: list[bytes], engine_patterns: list[str] | None = None) -> Captured:
    """Feed `chunks` through a real pipe (one write each, drained between writes) to a capture,
    then split what it saved."""
    read_fd, write_fd = os.pipe()
    term_r, term_w = os.pipe()
    seen: list[bytes] = []
    reader = threading.Thread(target=lambda: seen.extend(iter(lambda: os.read(term_r, 65536), b"")))
    reader.start()
    cap = OutputCapture(read_fd, term_w, tmp_path / "output.raw")
    cap.start()
    for chunk in chunks:
        os.write(write_fd, chunk)
    os.close(write_fd)
    assert cap.join(timeout=30)
    os.close(term_w)
    reader.join()
    splitter = split_raw(tmp_path, cap, engine_patterns)
    return Captured(b"".join(seen), cap.bytes_in, cap.error, splitter.redacted, splitter.command_lines)


def files(tmp_path: Path) -> tuple[bytes, bytes]:
    return (tmp_path / "trainer.log").read_bytes(), (tmp_path / "engine.log").read_bytes()


def test_split_with_ray_prefixes(tmp_path: Path) -> None:
    data, trainer, engine = sample()
    cap = capture_bytes(tmp_path, [data])
    assert files(tmp_path) == (trainer, engine)
    assert cap.terminal_seen == data
    assert cap.bytes_in == len(data)
    assert cap.error is None and cap.redacted == []


def split_by_splitter(tmp_path: Path, data: bytes, sizes: list[int], max_line: int = 1 << 23) -> tuple[bytes, bytes]:
    out = Path(tempfile.mkdtemp(dir=tmp_path))
    splitter = LineSplitter(out / "t", out / "e", max_line=max_line)
    pos = 0
    for size in sizes:
        splitter.feed(data[pos : pos + size])
        pos += size
    if pos < len(data):
        splitter.feed(data[pos:])
    splitter.finish()
    return (out / "t").read_bytes(), (out / "e").read_bytes()


def test_chunk_boundaries_give_identical_files(tmp_path: Path) -> None:
    data, trainer, engine = sample(150, seed=3)
    dump = b"(MegatronTrainRayActor pid=2)   hub_token " + b"." * 39 + b" k9\n"
    data += b"EXEC: python3 train.py --wandb-key 'k123'\n" + ENGINE[1] + dump + ENGINE[0]
    whole = split_by_splitter(tmp_path, data, [len(data)])
    assert whole[1] == engine + ENGINE[1] + ENGINE[0]
    assert whole[0] == trainer + b"EXEC: python3 train.py --wandb-key '***'\n" + dump.replace(b"k9", b"***")
    assert split_by_splitter(tmp_path, data, [1] * len(data)) == whole
    rng = random.Random(5)
    assert split_by_splitter(tmp_path, data, [rng.randint(1, 300) for _ in range(len(data))]) == whole


def test_one_byte_writes_through_a_real_pipe(tmp_path: Path) -> None:
    data, trainer, engine = sample(40, seed=9)
    cap = capture_bytes(tmp_path, [data[i : i + 1] for i in range(len(data))])
    assert files(tmp_path) == (trainer, engine)
    assert cap.terminal_seen == data


def test_final_line_without_newline(tmp_path: Path) -> None:
    capture_bytes(tmp_path, [TRAINER[0] + b"(SGLangEngine pid=7) last words"])
    assert files(tmp_path) == (TRAINER[0], b"(SGLangEngine pid=7) last words")
    other = tmp_path / "b"
    other.mkdir()
    capture_bytes(other, [ENGINE[0] + b"trainer tail"])
    assert files(other) == (b"trainer tail", ENGINE[0])


def test_very_long_lines_go_to_the_file_of_their_start(tmp_path: Path) -> None:
    long_engine = b"(SGLangEngine pid=1) " + b"x" * 5000 + b"\n"
    long_trainer = b"y" * 7000 + b"\n"
    data = TRAINER[0] + long_engine + long_trainer + ENGINE[0]
    expected = (TRAINER[0] + long_trainer, long_engine + ENGINE[0])
    assert split_by_splitter(tmp_path, data, [777] * 30, max_line=1024) == expected
    assert split_by_splitter(tmp_path, data, [len(data)], max_line=1024) == expected


def test_invalid_utf8_passes_unchanged(tmp_path: Path) -> None:
    bad = b"\xff\xfe\x80 broken \xc3(\n"
    engine_bad = b"(SGLangEngine pid=3) \xe2\x28\xa1\n"
    capture_bytes(tmp_path, [bad + engine_bad + b"tail \xff"])
    assert files(tmp_path) == (bad + b"tail \xff", engine_bad)


def test_scan_all_redacts_secrets_in_files_not_on_terminal(tmp_path: Path) -> None:
    hf = "hf_" + "Q" * 34
    lines = [
        b"+ python3 train.py --wandb-key 0123abcd --seed 1\n",
        b"++ export HF_TOKEN=tok1\n",
        b'EXEC: ray job submit --runtime-env-json=\'{"env_vars": {"HF_TOKEN": "tok2"}}\' -- x\n',
        b'(MegatronTrainRayActor pid=2) ENV_REPORT_JSON={"git": "https://u:pw@h/r.git"}\n',
        b"(SGLangEngine pid=5) loaded with token " + hf.encode() + b"\n",
        b"wandb: WANDB_API_KEY=abc set\n",
        b"  wandb_key ......................... 0123abc\n",
    ]
    data = b"".join(lines) + b"".join(TRAINER)
    cap = capture_bytes(tmp_path, [data])
    trainer, engine = files(tmp_path)
    for secret in (
        b"0123abcd",
        b"tok1",
        b"tok2",
        b"pw@",
        hf.encode(),
        b"abc set",
        b"0123abc",
    ):
        assert secret not in trainer + engine
    assert engine == b"(SGLangEngine pid=5) loaded with token ***\n"
    assert trainer.startswith(b"+ python3 train.py --wandb-key *** --seed 1\n++ export HF_TOKEN=***\n")
    assert trainer.endswith(b"".join(TRAINER))
    assert cap.terminal_seen == data
    assert cap.command_lines == [
        "+ python3 train.py --wandb-key *** --seed 1",
        "++ export HF_TOKEN=***",
        'EXEC: ray job submit --runtime-env-json=\'{"env_vars": {"HF_TOKEN": "***"}}\' -- x',
        '(MegatronTrainRayActor pid=2) ENV_REPORT_JSON={"git": "https://u:***@h/r.git"}',
    ]
    assert cap.redacted == ["trainer.log: HF_TOKEN", "trainer.log: WANDB_API_KEY", "trainer.log: wandb-key",
                            "trainer.log: wandb_key", "trainer.log: pattern:url-credentials",
                            "engine.log: pattern:hf-token"]  # fmt: skip


def test_default_scan_redacts_commands_env_reports_and_argument_dump(tmp_path: Path) -> None:
    dots = b"." * 39
    secret_lines = [
        b"+ train.py --hub-token abc\n",
        b"++ export WANDB_API_KEY=k1\n",
        b"EXEC: python3 train.py --wandb-key 'k2' --seed 1\n",
        b'(SGLangEngine pid=5) ENV_REPORT_JSON={"HF_TOKEN": "k3"}\n',
        b"  wandb_key " + dots + b" k4\n",
        b"(MegatronTrainRayActor pid=2)   wandb_key " + dots + b" k5\n",
    ]
    kept = [
        b"  seed " + b"." * 44 + b" 1234\n",  # an argument dump line without a secret name
        b"a + b EXEC: ENV_REPORT_JSON (not at a line start / no '=')\n",
    ]
    data, trainer, engine = sample(60, seed=4)
    # the last line is not a command line: redacted all the same
    stream = b"".join(secret_lines) + data + b"".join(kept) + b"plain HF_TOKEN=hidden-too\n"
    cap = capture_bytes(tmp_path, [stream])
    got_trainer, got_engine = files(tmp_path)
    for secret in (b"abc", b"k1", b"k2", b"k3", b"k4", b"k5", b"hidden-too"):
        assert secret not in got_trainer + got_engine
    assert got_trainer == (
        b"+ train.py --hub-token ***\n++ export WANDB_API_KEY=***\n"
        b"EXEC: python3 train.py --wandb-key '***' --seed 1\n"
        b"  wandb_key " + dots + b" ***\n"
        b"(MegatronTrainRayActor pid=2)   wandb_key " + dots + b" ***\n" + trainer + b"".join(kept) + b"plain HF_TOKEN=***\n"
    )
    assert got_engine == b'(SGLangEngine pid=5) ENV_REPORT_JSON={"HF_TOKEN": "***"}\n' + engine
    assert cap.terminal_seen == stream
    assert cap.redacted == [
        "trainer.log: HF_TOKEN",
        "trainer.log: WANDB_API_KEY",
        "trainer.log: hub-token",
        "trainer.log: wandb-key",
        "trainer.log: wandb_key",
        "engine.log: HF_TOKEN",
    ]
    assert cap.command_lines == [
        "+ train.py --hub-token ***",
        "++ export WANDB_API_KEY=***",
        "EXEC: python3 train.py --wandb-key '***' --seed 1",
        '(SGLangEngine pid=5) ENV_REPORT_JSON={"HF_TOKEN": "***"}',
    ]


@pytest.mark.parametrize(
    "patterns",
    [None, [r"\(SGLangEngine pid=\d+(?:, ip=[^)]*)?\)"]],  # the module's default, ledger.config's
)
def test_engine_prefix_alone_is_not_enough(tmp_path: Path, patterns: list[str] | None) -> None:
    fake = b"(SGLangEngine pid=abc) the rest of the default pattern does not match\n"
    unclosed = b"(SGLangEngine pid=12, ip=10.0.0.1 no closing parenthesis on this line\n"
    data = ENGINE[0] + fake + unclosed + ENGINE[1] + TRAINER[0]
    capture_bytes(tmp_path, [data], engine_patterns=patterns)
    assert files(tmp_path) == (fake + unclosed + TRAINER[0], ENGINE[0] + ENGINE[1])


def test_custom_pattern_never_matches_across_a_line_end(tmp_path: Path) -> None:
    data = b"(X pid=1 unclosed\n(X pid=2) engine\nplain\n[e] engine too\n"
    expected = (b"(X pid=1 unclosed\nplain\n", b"(X pid=2) engine\n[e] engine too\n")
    capture_bytes(tmp_path, [data], engine_patterns=[r"\(X pid=[^)]*\)", r"\[e\]"])
    assert files(tmp_path) == expected
    other = tmp_path / "b"
    other.mkdir()
    capture_bytes(other, [data], engine_patterns=[r"\(X pid=[^)]*\)|\[e\]"])
    assert files(other) == expected


def test_custom_engine_patterns(tmp_path: Path) -> None:
    data = b"(VLLMEngine pid=1) a\n(SGLangEngine pid=2) b\n[engine] c\nd\n"
    capture_bytes(tmp_path, [data], engine_patterns=[r"^\(VLLMEngine pid=\d+\)", r"\[engine\]"])
    assert files(tmp_path) == (
        b"(SGLangEngine pid=2) b\nd\n",
        b"(VLLMEngine pid=1) a\n[engine] c\n",
    )


def test_engine_patterns_with_groups_and_back_references(tmp_path: Path) -> None:
    # engine lines are found a run at a time; a pattern's own groups keep their numbers and names
    data = b"[w3] w3 says\n[w3] w4 says\n<a><a> ok\n<a><b> no\nplain\n[w7] w7 again\n"
    capture_bytes(tmp_path, [data], engine_patterns=[r"\[(w\d)\] \1 ", r"<(?P<tag>\w)><(?P=tag)>"])
    assert files(tmp_path) == (b"[w3] w4 says\n<a><b> no\nplain\n", b"[w3] w3 says\n<a><a> ok\n[w7] w7 again\n")


def test_split_matches_a_line_by_line_split(tmp_path: Path) -> None:
    # runs of engine lines of every length, cut into chunks at every kind of place
    rng = random.Random(7)
    lines = [rng.choice(ENGINE + TRAINER + [b"\n", b"(SGLangEngine pid=9)\n"]) for _ in range(3000)]
    data = b"".join(lines)
    chunks = []
    pos = 0
    while pos < len(data):
        step = rng.choice([1, 7, 90, 4096, 70000])
        chunks.append(data[pos : pos + step])
        pos += step
    splitter = LineSplitter(tmp_path / "trainer.log", tmp_path / "engine.log")
    for chunk in chunks:
        splitter.feed(chunk)
    splitter.finish()
    engine = re.compile(rb"\(SGLangEngine pid=\d+(?:, ip=[^)\n]*)?\)")
    expected_engine = b"".join(line for line in lines if engine.match(line))
    expected_trainer = b"".join(line for line in lines if not engine.match(line))
    assert files(tmp_path) == (expected_trainer, expected_engine)


def test_closed_terminal_does_not_stop_capture(tmp_path: Path) -> None:
    read_fd, write_fd = os.pipe()
    term_r, term_w = os.pipe()
    os.close(term_r)  # writes to term_w now fail with EPIPE
    cap = OutputCapture(read_fd, term_w, tmp_path / "output.raw")
    cap.start()
    data, trainer, engine = sample(50)
    os.write(write_fd, data)
    os.close(write_fd)
    assert cap.join(timeout=30)
    os.close(term_w)
    split_raw(tmp_path, cap)
    assert files(tmp_path) == (trainer, engine)
    assert cap.error is None


def test_job_closing_stdout_early_ends_capture(tmp_path: Path) -> None:
    code = (
        "import os, sys, time\n"
        "sys.stdout.write('(SGLangEngine pid=1) hello\\nbye\\n'); sys.stdout.flush()\n"
        "os.close(1); os.close(2)\n"
        "time.sleep(60)\n"
    )
    read_fd, write_fd = os.pipe()
    job = subprocess.Popen([sys.executable, "-c", code], stdout=write_fd, stderr=write_fd)
    os.close(write_fd)
    try:
        cap = OutputCapture(read_fd, None, tmp_path / "output.raw")
        cap.start()
        assert cap.join(timeout=30)
        assert job.poll() is None  # the job is still running
        split_raw(tmp_path, cap)
        assert files(tmp_path) == (b"bye\n", b"(SGLangEngine pid=1) hello\n")
    finally:
        job.kill()
        job.wait()


# Ray 2.60's real output shapes (miles-facts.md, "Real launchers and real Ray output"): prefixes
# coloured even into pipes, `ip=` from other nodes, de-duplication summaries.
RAY_COLOURED = [
    (b"\x1b[36m(SGLangEngine pid=22987)\x1b[0m [2026-12-01 06:49:10 TP1] Decode batch. #running-req: 3\n", "engine"),
    (b'\x1b[36m(SGLangEngine pid=22987, ip=10.0.0.2)\x1b[0m INFO:     127.0.0.1:5 - "POST /generate" 200\n', "engine"),
    (
        b"\x1b[33m(SGLangEngine pid=5)\x1b[0m Decode batch. gen throughput (token/s): 1.0\x1b[32m [repeated 8x across cluster]\x1b[0m\n",
        "engine",
    ),
    (
        b"\x1b[36m(MegatronTrainRayActor pid=9, ip=10.0.0.3)\x1b[0m [2026-12-01 06:49:10] model.py:1 - step 0: {'train/loss': 1.0}\n",
        "trainer",
    ),
    (b'\x1b[36m(RolloutManager pid=7)\x1b[0m ENV_REPORT_JSON={"role": "rollout"}\n', "trainer"),
]


@pytest.mark.parametrize(("line", "log"), RAY_COLOURED)
def test_classify_line_ignores_colour_codes(line: bytes, log: str, tmp_path: Path) -> None:
    (tmp_path / "output.raw").write_bytes(line)
    split_output(tmp_path / "output.raw", tmp_path / "trainer", tmp_path / "engine")
    assert (tmp_path / log).read_bytes() == line


def test_coloured_engine_lines_reach_engine_log_with_their_bytes(tmp_path: Path) -> None:
    stream = b"".join(line for line, _ in RAY_COLOURED) * 50 + b"plain trainer line\n" + ENGINE[0]
    splitter = LineSplitter(tmp_path / "t.log", tmp_path / "e.log")
    for i in range(0, len(stream), 777):  # odd chunk sizes: lines cut across chunks
        splitter.feed(stream[i : i + 777])
    splitter.finish()
    engine = b"".join(line for line, log in RAY_COLOURED if log == "engine") * 50 + ENGINE[0]
    trainer = b"".join(line for line, log in RAY_COLOURED if log == "trainer") * 50 + b"plain trainer line\n"
    assert (tmp_path / "e.log").read_bytes() == engine
    assert (tmp_path / "t.log").read_bytes() == trainer


@pytest.mark.parametrize(
    ("pattern", "local"),
    [
        (DEFAULT_ENGINE_PATTERNS[0], True),  # `[^)\n]`: a negated class that leaves the newline out
        (r"\[e\]", True),
        (r"(?i)vllm \w+ \d+:", True),
        (r"x[^\n]*", True),
        (r"\(X pid=[^)]*\)", False),  # `[^)]` holds a newline
        (r"foo\s", False),
        (r"(?s)foo.", False),
        (r"a(?s:.)b", False),
        (r"[\t-\r]", False),
        (r"\D", False),
        (r"(a)\1", False),  # a back-reference: not known
        ("x\n", False),
    ],
)
def test_line_local_patterns(pattern: str, local: bool) -> None:
    from ledger.redact.lines import line_local

    assert line_local(pattern) is local
