"""A Ray driver in the shape of a Miles job (miles-facts.md, "Log lines"): actors named as Miles
names them print Miles-format lines; two trainer cells print per-step lines that differ only in
numbers (what Ray's de-duplication would swallow). Exit code from argv (`--exit N`)."""

import os
import sys
import time

import ray

STEPS = 3


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
    ray.init()
    engine, manager = SGLangEngine.remote(), RolloutManager.remote()
    cells = [MegatronTrainRayActor.remote(c) for c in range(2)]
    for step in range(STEPS):
        ray.get([engine.run.remote(step), manager.run.remote(step)])
        ray.get([c.run.remote(step) for c in cells])
    # let Ray's log monitor forward the actors' lines before the driver exits (it polls their log
    # files; 1.5 s was once too short on a loaded 2-core machine)
    time.sleep(3)
    print("driver done", flush=True)
    return int(sys.argv[sys.argv.index("--exit") + 1]) if "--exit" in sys.argv else 0


if __name__ == "__main__":
    sys.exit(main())
