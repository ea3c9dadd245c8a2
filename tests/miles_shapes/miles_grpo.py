"""A stand-in Miles trainer: records the argv it received, writes debug data and metric lines."""

import json
import os
import sys
import time


def value(flag):
    args = sys.argv[1:]
    found = None
    for i, token in enumerate(args):
        if token == flag and i + 1 < len(args):
            found = args[i + 1]
        elif token.startswith(flag + "="):
            found = token.split("=", 1)[1]
    return found


with open("seen-argv.json", "w") as f:
    json.dump({"argv": sys.argv, "env": {k: v for k, v in os.environ.items() if k.startswith("NCCL_")}}, f)
rollout = value("--save-debug-rollout-data")
events = value("--save-debug-event-data")
loaded = value("--load-debug-rollout-data")
stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
for rid in range(int(value("--num-rollout") or 2)):
    if loaded:
        assert os.path.exists(loaded.format(rollout_id=rid)), loaded
    if rollout:
        path = rollout.format(rollout_id=rid)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(b"rollout %d" % rid)
    if events:
        os.makedirs(events, exist_ok=True)
        with open(os.path.join(events, "main.jsonl"), "a") as f:
            f.write(json.dumps({"type": "metric", "rollout_id": rid, "metrics": {"perf/step_time": 1.0 + rid}}) + "\n")
    print(f"(RolloutManager pid=11) [{stamp}] rollout.py:1 - perf {rid}: {{'perf/rollout_time': {2.0 + rid}}}", flush=True)
    print(f"(SGLangEngine pid=12) [{stamp} TP0] Decode batch. #running-req: 4, gen throughput (token/s): 12.5", flush=True)
    print(f"(MegatronTrainRayActor pid=13) [{stamp}] model.py:1 - step {rid}: {{'train/loss': 0.5, 'train/grad_norm': 1.0}}", flush=True)
