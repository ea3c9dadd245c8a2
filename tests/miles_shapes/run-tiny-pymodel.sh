#!/bin/bash

# stale processes from an earlier run (stubbed in tests)
pkill -9 sglang
ray stop --force

set -ex

export PYTHONUNBUFFERED=1

MODEL_TYPE="tiny"
SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
MODEL_ARGS_LINE="$(python3 "${SCRIPT_DIR}/miles/utils/external_utils/model_args_utils.py" "${MODEL_TYPE}")" || exit 1
read -ra MODEL_ARGS <<< "${MODEL_ARGS_LINE}"

CKPT_ARGS=(
   --hf-checkpoint /root/tiny
   # --load /root/tiny_ckpt/
   --save /root/tiny_ckpt/
)

ROLLOUT_ARGS=(
   --num-rollout 2
   --rollout-batch-size 4

   --global-batch-size 8
)

WANDB_ARGS=(
   --use-wandb
   --wandb-key ${WANDB_KEY}
)

MISC_ARGS=(
   # the model file says alltoall
   --moe-token-dispatcher-type flex
   --lr 1e-6
)

ray start --head --node-ip-address 127.0.0.1 --num-gpus 0 --disable-usage-stats

ray job submit --address="http://127.0.0.1:8265" \
   --runtime-env-json='{
     "env_vars": {
        "PYTHONPATH": "/root/Megatron-LM",
        "CUBLAS_WORKSPACE_CONFIG": ":4096:8"
     }
   }' \
   -- python3 miles_grpo.py \
   --colocate \
   ${MODEL_ARGS[@]} \
   ${CKPT_ARGS[@]} \
   ${ROLLOUT_ARGS[@]} \
   ${WANDB_ARGS[@]} \
   ${MISC_ARGS[@]}
