#!/bin/bash

# for rerun the task
pkill -9 sglang
ray stop --force

set -ex

export PYTHONUNBUFFERED=1

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
MODEL_ARGS_LINE="$(python3 "${SCRIPT_DIR}/../../miles/utils/external_utils/model_args_utils.py" "tiny-instruct")" || exit 1
read -ra MODEL_ARGS <<< "${MODEL_ARGS_LINE}"

OPTIMIZER_ARGS=(
   --optimizer adam
   --lr 1e-6
)

WANDB_ARGS=(
   # --use-wandb
   # --wandb-key ${WANDB_KEY}
)

export MASTER_ADDR=${MASTER_ADDR:-"127.0.0.1"}
ray start --head --node-ip-address ${MASTER_ADDR} --num-gpus 0 --disable-usage-stats --dashboard-port=8265

ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{"env_vars": {"CUDA_DEVICE_MAX_CONNECTIONS": "1"}}' \
   -- python3 "${SCRIPT_DIR}/../../train.py" \
   --colocate \
   ${MODEL_ARGS[@]} \
   ${OPTIMIZER_ARGS[@]} \
   ${WANDB_ARGS[@]}
