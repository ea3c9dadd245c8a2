"""A Ray driver in the shape of a Miles job (miles-facts.md, "Log lines"): actors named as Miles
names them print Miles-format lines; two trainer cells print per-step lines that differ only in
numbers (what Ray's de-duplication would swallow). Exit code from argv (`--exit N`)."""

import os
import sys
import time

import ray

STEPS = 3


class Seen:
    """The driver's stdout, keeping what passed through it: Ray's log monitor forwards the
    actors' lines to the driver, which prints them to `sys.stdout`."""

    def __init__(self, out) -> None:
        self.out, self.text = out, []

    def write(self, text: str) -> int:
        self.text.append(text)
        return self.out.write(text)

    def __getattr__(self, name: str):
        return getattr(self.out, name)

    def count(self, marker: str) -> int:
        return "".join(self.text).count(marker)


def wait_for_lines(seen: Seen, expected: dict, seconds: float = 60) -> None:
    """Until the driver has printed each marker as many times as expected (at most `seconds`: a
    line lost, say to Ray's de-duplication, fails the test on the record, not here)."""
    deadline = time.monotonic() + seconds
    while any(seen.count(m) < n for m, n in expected.items()) and time.monotonic() < deadline:
        time.sleep(0.05)


@ray.remote(num_cpus=0)
class SGLangEngine:
    def run(self, step: int) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        print(f"[{stamp} TP0] Decode batch. #running-req: 4, gen throughput (token/s): {100 + step}.5", flush=True)


@ray.remote(num_cpus=0)
class RolloutManager:
    def run(self, step: int) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        print(f"[{stamp}] rollout.py:1 - perf {step}: {{'perf/rollout_time': {2.0 + step}}}", flush=True)


@ray.remote(num_cpus=0)
class MegatronTrainRayActor:
    def __init__(self, cell: int) -> None:
        self.cell = cell
        # the run's id reaches an actor only through the job's runtime env (a job on a cluster
        # gets the cluster's environment, not the submitter's)
        print(f"actor LEDGER_RUN_ID={os.environ.get('LEDGER_RUN_ID')}", flush=True)

    def run(self, step: int) -> None:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
        print(f"[{stamp}] model.py:1 - step {step}: {{'train/loss': {0.5 + step + self.cell / 10}}}", flush=True)


def main() -> int:
    # what decides whether Ray's log monitor swallows the second cell's lines (ledger sets it to 0)
    print(f"driver RAY_DEDUP_LOGS={os.environ.get('RAY_DEDUP_LOGS')}", flush=True)
    seen = Seen(sys.stdout)
    sys.stdout = seen  # Ray prints the actors' forwarded lines to sys.stdout (looked up per batch)
    ray.init()
    engine, manager = SGLangEngine.remote(), RolloutManager.remote()
    cells = [MegatronTrainRayActor.remote(c) for c in range(2)]
    for step in range(STEPS):
        ray.get([engine.run.remote(step), manager.run.remote(step)])
        ray.get([c.run.remote(step) for c in cells])
    # Ray's log monitor forwards the actors' lines to this driver a little later (it polls their
    # log files): the driver ends once it has printed every one of them (a condition, not a time)
    wait_for_lines(seen, {"Decode batch": STEPS, "perf/rollout_time": STEPS, "train/loss": 2 * STEPS, "actor LEDGER_RUN_ID": 2})
    print("driver done", flush=True)
    return int(sys.argv[sys.argv.index("--exit") + 1]) if "--exit" in sys.argv else 0


if __name__ == "__main__":
    sys.exit(main())
