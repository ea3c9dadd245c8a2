"""A Ray job in the shape of a Miles run (miles-facts.md): a driver that starts `SGLangEngine`,
`RolloutManager` and `MegatronTrainRayActor` actors, which print their environment and Miles'
log lines; the rollout manager writes one file per rollout to `--save-debug-rollout-data`, the
trainer trains on `--load-debug-rollout-data` files under `--debug-train-only`. Deterministic:
the loss of a step depends only on `--seed`, `--lr` and the rollout's samples.

Flags are parsed by argparse, so an unknown flag fails the job (`unrecognized arguments`).
`--step-sleep S` slows each step; `--exit N` ends the driver with N after the last step;
`--hold PATH` makes the driver wait before step `--hold-at` (2) until PATH exists (a test ends
ledger meanwhile, a condition, never a time).
"""

import argparse
import json
import os
import sys
import time

import ray

ENV_SEEN = ("NCCL_ALGO", "CUDA_DEVICE_MAX_CONNECTIONS", "PYTHONPATH", "LEDGER_REPLAY_MARK", "LEDGER_RUN_ID", "LEDGER_DATA_DIR")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="train.py")
    p.add_argument("--num-rollout", type=int, default=3)
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--lr", type=float, default=0.1)
    p.add_argument("--step-sleep", type=float, default=0.0)
    p.add_argument("--exit", type=int, default=0)
    p.add_argument("--hold", default=None)
    p.add_argument("--hold-at", type=int, default=2)
    p.add_argument("--save-debug-rollout-data", default=None)
    p.add_argument("--load-debug-rollout-data", default=None)
    p.add_argument("--debug-train-only", action="store_true")
    p.add_argument("--debug-rollout-only", action="store_true")
    p.add_argument("--save-debug-event-data", default=None)
    return p


class Seen:
    """The driver's stdout, keeping what passed through it: Ray's log monitor forwards the
    actors' lines to the driver, which prints them to `sys.stdout`. (This file is copied alone
    into a test repository as its train.py, so it shares nothing with tests/ray_shapes/train.py.)"""

    def __init__(self, out) -> None:
        self.out, self.text = out, []

    def write(self, text: str) -> int:
        self.text.append(text)
        return self.out.write(text)

    def __getattr__(self, name: str):
        return getattr(self.out, name)

    def count(self, marker: str) -> int:
        return "".join(self.text).count(marker)


def stamp() -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())


@ray.remote(num_cpus=0)
class SGLangEngine:
    def generate(self, seed: int, step: int) -> list[int]:
        print(f"[{stamp()} TP0] Decode batch. #running-req: 4, gen throughput (token/s): {100 + step}.5", flush=True)
        return [(seed * 31 + step * 7 + i) % 97 for i in range(4)]


@ray.remote(num_cpus=0)
class RolloutManager:
    def save(self, template: str | None, step: int, samples: list[int]) -> None:
        if template:
            path = template.format(rollout_id=step)
            os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            with open(path, "w") as f:
                json.dump({"rollout_id": step, "samples": samples}, f)
        print(f"[{stamp()}] rollout.py:1 - perf {step}: {{'perf/rollout_time': {0.5 + step}}}", flush=True)


@ray.remote(num_cpus=0)
class MegatronTrainRayActor:
    def __init__(self) -> None:
        self.weight = 1.0

    def report_env(self) -> None:
        print("ACTOR_ENV " + json.dumps({k: os.environ.get(k) for k in ENV_SEEN}, sort_keys=True), flush=True)

    def train(self, step: int, samples: list[int], lr: float) -> None:
        loss = sum(samples) / (len(samples) * 97.0) * self.weight
        self.weight -= lr * loss
        print(f"[{stamp()}] model.py:1 - step {step}: {{'train/loss': {loss!r}, 'train/grad_norm': {self.weight!r}}}", flush=True)


def main() -> int:
    args = parser().parse_args()
    seen = Seen(sys.stdout)
    sys.stdout = seen  # Ray prints the actors' forwarded lines to sys.stdout (looked up per batch)
    ray.init()
    engine, manager, trainer = SGLangEngine.remote(), RolloutManager.remote(), MegatronTrainRayActor.remote()
    ray.get(trainer.report_env.remote())
    for step in range(args.num_rollout):
        while args.hold and step == args.hold_at and not os.path.exists(args.hold):
            time.sleep(0.2)
        if args.debug_train_only:
            with open(args.load_debug_rollout_data.format(rollout_id=step)) as f:
                samples = json.load(f)["samples"]
        else:
            samples = ray.get(engine.generate.remote(args.seed, step))
            ray.get(manager.save.remote(args.save_debug_rollout_data, step, samples))
        ray.get(trainer.train.remote(step, samples, args.lr))
        time.sleep(args.step_sleep)
    # Ray's log monitor forwards the actors' lines to this driver a little later (it polls their
    # log files): the driver ends once it has printed every one of them (a condition, not a time)
    expected = {"ACTOR_ENV ": 1, "- step ": args.num_rollout}
    if not args.debug_train_only:
        expected.update({"Decode batch": args.num_rollout, "- perf ": args.num_rollout})
    deadline = time.monotonic() + 60  # a line lost fails the test on the record, not here
    while any(seen.count(m) < n for m, n in expected.items()) and time.monotonic() < deadline:
        time.sleep(0.05)
    print("driver done", flush=True)
    return args.exit


if __name__ == "__main__":
    sys.exit(main())
