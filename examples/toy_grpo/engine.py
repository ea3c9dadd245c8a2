"""The toy "SGLang engine": samples answers from a linear softmax policy, in its own process.

train.py starts it as `python3 engine.py --reply-fd N`. It reads one JSON command per line on
stdin and answers each with one JSON line on file descriptor N. Its stdout is the job's stdout:
every line it prints there looks like SGLang's own log lines behind the Ray prefix
`(SGLangEngine pid=<pid>) `, as in a real Miles job.

Generation costs simulated time per generated token, so rollout time follows answer length.

The policy math (features, log-probabilities) and the log-line helpers live here as well: both
processes need them, and train.py imports this module.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

NUM_DIGITS = 10
EOS = NUM_DIGITS  # the end token; tokens 0..9 are the digits
VOCAB_SIZE = NUM_DIGITS + 1
BOS = VOCAB_SIZE  # the "previous token" at position 0
PROMPT_TOKENS = 6  # simulated length of a prompt, in tokens
TOKEN_SECONDS = 2.5e-4  # simulated decode cost per generated token
STEP_SECONDS = 5e-4  # simulated fixed cost per decode step
MOVE_SECONDS_PER_PARAM = 1e-4  # simulated cost of moving one parameter to or from the GPU
DECODE_LOG_INTERVAL = 4  # decode steps between "Decode batch" lines

# ---------------------------------------------------------------------------------------------
# Policy math, shared with the trainer.


def token_text(token: int) -> str:
    """The text of one token: a digit, or `<eos>`."""
    return "<eos>" if token == EOS else str(token)


def feature_count(max_len: int) -> int:
    """Rows of the weight matrix: prompt digit, previous token, position, bias."""
    return NUM_DIGITS + (VOCAB_SIZE + 1) + max_len + 1


def token_features(digits: np.ndarray, prev: np.ndarray, pos: np.ndarray, max_len: int) -> np.ndarray:
    """The four active feature indices of each decoding step, shape (T, 4)."""
    bias = np.full_like(digits, feature_count(max_len) - 1)
    return np.stack([digits, NUM_DIGITS + prev, NUM_DIGITS + VOCAB_SIZE + 1 + pos, bias], axis=1)


def token_log_probs(weights: np.ndarray, feats: np.ndarray, temperature: float = 1.0) -> np.ndarray:
    """Log-probabilities over the vocabulary for each step, shape (T, VOCAB_SIZE)."""
    logits = weights[feats].sum(axis=1) / temperature
    logits = logits - logits.max(axis=1, keepdims=True)
    result: np.ndarray = logits - np.log(np.exp(logits).sum(axis=1, keepdims=True))
    return result


# ---------------------------------------------------------------------------------------------
# Log lines.


def emit(line: str) -> None:
    """Write one whole line to stdout and flush it (the ledger reads stdout through a pipe)."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def ray_prefix(actor: str) -> str:
    """The prefix Ray puts before every line an actor prints."""
    return f"({actor} pid={os.getpid()}) "


class MilesLog:
    """Writes Miles-format lines `[YYYY-MM-DD HH:MM:SS.mmm <process>] file.py:LINE - msg` (UTC)."""

    def __init__(self, process: str, actor: str | None = None) -> None:
        self.process = process
        self.prefix = ray_prefix(actor) if actor else ""

    def __call__(self, message: str, depth: int = 1) -> None:
        """Log `message`, naming the file and line of the caller (`depth` frames up)."""
        frame = sys._getframe(depth)
        where = f"{os.path.basename(frame.f_code.co_filename)}:{frame.f_lineno}"
        stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        emit(f"{self.prefix}[{stamp} {self.process}] {where} - {message}")


def env_report(role: str, request: dict[str, Any]) -> dict[str, Any]:
    """What `--env-report` prints: interpreter, packages, and the git state of this example."""
    here = Path(__file__).resolve().parent
    packages = {dist.metadata["Name"]: dist.version for dist in importlib.metadata.distributions() if dist.metadata["Name"]}
    return {
        "role": role,
        "pid": os.getpid(),
        "python": sys.version.split()[0],
        "executable": sys.executable,
        "numpy": np.__version__,
        "editable": {"toy_grpo": {"path": str(here), **_git_state(here)}},
        "pip_list": dict(sorted(packages.items(), key=lambda kv: kv[0].lower())),
        "request": request,
    }


def _git_state(path: Path) -> dict[str, Any]:
    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(path), *args],
                check=False,
                capture_output=True,
                text=True,
                timeout=10,
            )
        except (OSError, subprocess.TimeoutExpired):
            return None
        return done.stdout if done.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    status = git("status", "--porcelain", "--", ".")
    return {
        "commit": commit.strip() if commit else None,
        "dirty": None if status is None else bool(status.strip()),
    }


# ---------------------------------------------------------------------------------------------
# The engine process.


def _sglang(message: str) -> None:
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
    emit(f"{ray_prefix('SGLangEngine')}[{stamp} TP0] {message}")


def rng_key(seed: int, rollout_id: int | str) -> list[int]:
    """The sampling seed of one rollout: engine seed, rollout number, and 1 for eval rollouts."""
    text = str(rollout_id)
    is_eval = text.startswith("eval_")
    number = int(text[len("eval_") :]) if is_eval else int(text)
    return [seed % 2**32, number, int(is_eval)]


class ToyEngine:
    """Holds the engine's copy of the weights and answers the driver's commands."""

    def __init__(self, init: dict[str, Any]) -> None:
        self.seed = int(init["seed"]) + int(init.get("engine_rank", 0))
        self.max_len = int(init["max_len"])
        self.offload = bool(init.get("offload_rollout", False))
        mem_fraction = float(init.get("mem_fraction_static", 0.8))
        # A larger KV-cache pool batches a little better.
        self.speed = 0.8 + 0.4 * mem_fraction
        self.weights = np.zeros((feature_count(self.max_len), VOCAB_SIZE))
        self.released = False
        self.port = 30000 + os.getpid() % 1000
        _sglang(
            f"server_args=ServerArgs(model_path='toy-grpo-linear', random_seed={self.seed}, "
            f"mem_fraction_static={mem_fraction}, context_length={PROMPT_TOKENS + self.max_len}, "
            f"tp_size=1, port={self.port}, enable_memory_saver={self.offload})"
        )
        _sglang("Load weight begin. avail mem=139.52 GB")
        _sglang(f"Load weight end. type=ToyLinearPolicy, dtype=torch.float64, params={self.weights.size}, avail mem=139.50 GB")
        _sglang(f"Memory pool end. avail mem={139.5 * (1 - mem_fraction):.2f} GB")
        if init.get("env_report") is not None:
            report = env_report("sglang_engine", init["env_report"])
            emit(ray_prefix("SGLangEngine") + "ENV_REPORT_JSON=" + json.dumps(report))
        _sglang("The server is fired up and ready to roll!")

    def move_cost(self) -> float:
        """Simulated seconds to move the weights on or off the GPU."""
        return self.weights.size * MOVE_SECONDS_PER_PARAM

    def update_weights(self, weights: list[list[float]]) -> dict[str, Any]:
        """Take new weights from the trainer, first resuming memory if it was released."""
        if self.released:
            time.sleep(self.move_cost())
            self.released = False
            _sglang("Resume memory occupation: weights, kv_cache")
        self.weights = np.asarray(weights, dtype=np.float64)
        _sglang(f"Update weights end. num_params={self.weights.size}")
        return {}

    def generate(self, rollout_id: int | str, digits: list[int], n: int, temperature: float) -> dict[str, Any]:
        """Sample `n` answers for each prompt digit; greedy when `temperature` is 0."""
        rng = np.random.default_rng(rng_key(self.seed, rollout_id))
        prompts = np.repeat(np.asarray(digits, dtype=np.int64), n)
        batch = prompts.size
        tokens = np.zeros((batch, self.max_len), dtype=np.int64)
        log_probs = np.zeros((batch, self.max_len))
        lengths = np.zeros(batch, dtype=np.int64)
        prev = np.full(batch, BOS, dtype=np.int64)
        running = np.ones(batch, dtype=bool)
        _sglang(
            f"Prefill batch. #new-seq: {batch}, #new-token: {batch * PROMPT_TOKENS}, "
            f"#cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0"
        )
        window_start, window_tokens = time.perf_counter(), 0
        for step in range(self.max_len):
            live = np.flatnonzero(running)
            if live.size == 0:
                break
            feats = token_features(prompts[live], prev[live], np.full(live.size, step), self.max_len)
            lp = token_log_probs(self.weights, feats, temperature if temperature > 0 else 1.0)
            if temperature > 0:
                cdf = np.cumsum(np.exp(lp), axis=1)
                draws = rng.random(live.size)
                choice = np.minimum((cdf < draws[:, None]).sum(axis=1), VOCAB_SIZE - 1)
            else:
                choice = lp.argmax(axis=1)
            tokens[live, step] = choice
            log_probs[live, step] = lp[np.arange(live.size), choice]
            lengths[live] += 1
            prev[live] = choice
            running[live[choice == EOS]] = False
            time.sleep(live.size * TOKEN_SECONDS / self.speed + STEP_SECONDS)
            window_tokens += live.size
            if (step + 1) % DECODE_LOG_INTERVAL == 0:
                elapsed = max(time.perf_counter() - window_start, 1e-9)
                in_cache = int(live.size * PROMPT_TOKENS + lengths[live].sum())
                _sglang(
                    f"Decode batch. #running-req: {live.size}, #token: {in_cache}, "
                    f"token usage: {in_cache / 65536:.2f}, "
                    f"gen throughput (token/s): {window_tokens / elapsed:.2f}, #queue-req: 0"
                )
                window_start, window_tokens = time.perf_counter(), 0
        results = []
        for i in range(batch):
            k = int(lengths[i])
            results.append(
                {
                    "prompt_digit": int(prompts[i]),
                    "tokens": tokens[i, :k].tolist(),
                    "log_probs": log_probs[i, :k].tolist(),
                    "finished": bool(not running[i]),
                }
            )
            emit(f'{ray_prefix("SGLangEngine")}INFO:     127.0.0.1:{40000 + i} - "POST /generate HTTP/1.1" 200 OK')
        if self.offload:
            self.released = True
            _sglang("Release memory occupation: weights, kv_cache")
        return {"samples": results, "tokens": int(lengths.sum())}

    def handle(self, command: dict[str, Any]) -> dict[str, Any]:
        """Run one command from the driver and return its reply payload."""
        op = command["op"]
        if op == "update_weights":
            return self.update_weights(command["weights"])
        if op == "generate":
            return self.generate(
                command["rollout_id"],
                command["digits"],
                int(command["n"]),
                float(command["temperature"]),
            )
        raise ValueError(f"unknown engine command {op!r}")


def main(argv: list[str] | None = None) -> int:
    """Serve the driver's commands until `shutdown` or the end of stdin."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--reply-fd", type=int, required=True)
    args = parser.parse_args(argv)
    engine: ToyEngine | None = None
    try:
        with os.fdopen(args.reply_fd, "w", buffering=1) as reply:
            for line in sys.stdin:
                command = json.loads(line)
                if command["op"] == "shutdown":
                    _sglang("Shutting down the server.")
                    reply.write(json.dumps({"ok": True}) + "\n")
                    break
                try:
                    if command["op"] == "init":
                        engine = ToyEngine(command)
                        payload: dict[str, Any] = {"params": engine.weights.size}
                        payload["move_seconds"] = engine.move_cost()
                    elif engine is None:
                        raise ValueError("the engine got a command before init")
                    else:
                        payload = engine.handle(command)
                except (KeyError, ValueError, TypeError) as exc:
                    reply.write(json.dumps({"ok": False, "error": f"{type(exc).__name__}: {exc}"}))
                    reply.write("\n")
                    continue
                reply.write(json.dumps({"ok": True, **payload}) + "\n")
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
