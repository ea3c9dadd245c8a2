#!/bin/bash

# stale processes from an earlier run (stubbed in tests)
pkill -9 sglang
ray stop --force
pkill -9 python

set -ex

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
source "${SCRIPT_DIR}/scripts/models/tiny.sh"

# keep events with --save-debug-event-data DIR when you need them (a comment, not a flag)
export NCCL_ALGO=Ring

ROLLOUT_ARGS=(
   --num-rollout 2
   --rollout-batch-size 4
   --eval-prompt-data aime /data/aime.jsonl
)

OPTIMIZER_ARGS=(
   --optimizer adam
   --lr 1e-6
)

SGLANG_ARGS=(
   --sglang-mem-fraction-static 0.7
   --sglang-cuda-graph-bs 1 2 $(seq 16 8 32)
)

MISC_ARGS=(
   --moe-token-dispatcher-type flex
   --note-text "it's a \"quoted\" value"
)

ray start --head --node-ip-address 127.0.0.1 --num-gpus 0 --disable-usage-stats

RUNTIME_ENV_JSON="{
  \"env_vars\": {
    \"PYTHONPATH\": \"/root/Megatron-LM/\",
    \"CUDA_DEVICE_MAX_CONNECTIONS\": \"1\"
  }
}"

ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json="${RUNTIME_ENV_JSON}" \
   -- python3 miles_grpo.py \
   --stop-text $'a\tb' \
   ${MODEL_ARGS[@]} \
   ${ROLLOUT_ARGS[@]} \
   ${OPTIMIZER_ARGS[@]} \
   ${SGLANG_ARGS[@]} \
   "${MISC_ARGS[@]}"
