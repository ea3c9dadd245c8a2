"""Write a Miles-like log as fast as possible: N steps of perf lines padded with engine lines.

Used by the benchmarks: `python3 bench/gen_log.py --steps 10000 --engine-lines 100 [--scale 1.0]`.
`--stamp FILE` writes the seconds from the first write to the last flush there (the job's own
throughput, whatever reads its output). `--seconds S` spreads the steps over S seconds, as a
trainer does (the default writes as fast as it can).
"""

import argparse
import datetime
import sys
import time

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=10000)
ap.add_argument("--engine-lines", type=int, default=100)
ap.add_argument("--scale", type=float, default=1.0)
ap.add_argument("--stamp", default=None)
ap.add_argument("--seconds", type=float, default=0.0)
a = ap.parse_args()
out = sys.stdout.buffer
t0 = datetime.datetime(2026, 11, 29, 0, 0, 0)
engine = b"".join(
    b"(SGLangEngine pid=4242) [2026-11-29 00:00:00 TP0] Decode batch. #running-req: 32, #token: %05d, "
    b"gen throughput (token/s): 1234.5, #queue-req: 0\n" % i
    for i in range(a.engine_lines)
)
start = time.perf_counter()
for step in range(a.steps):
    ts = (t0 + datetime.timedelta(seconds=step)).strftime("%Y-%m-%d %H:%M:%S.000").encode()
    rt = a.scale * (20.0 - 10.0 * step / a.steps)
    out.write(engine)
    out.write(
        b"(RolloutManager pid=1) [%s RolloutManager] rollout.py:1193 - perf %d: {'perf/rollout_time': %.4f, "
        b"'rollout/response_len/mean': %.1f}\n" % (ts, step, rt, 2000.0 - step * 0.1)
    )
    out.write(
        b"[%s main] train.py:310 - perf %d: {'perf/train_time': %.4f, 'perf/step_time': %.4f, "
        b"'perf/update_weights_time': 0.5}\n" % (ts, step, 3.0 * a.scale, rt + 3.0 * a.scale)
    )
    if a.seconds and (ahead := start + a.seconds * (step + 1) / a.steps - time.perf_counter()) > 0.01:
        out.flush()
        time.sleep(ahead)
out.flush()
if a.stamp:
    with open(a.stamp, "w") as f:
        f.write(str(time.perf_counter() - start))
