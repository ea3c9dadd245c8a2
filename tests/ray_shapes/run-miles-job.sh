#!/bin/bash
# A launcher in the shape of Miles' bash ones: set -ex, a multi-line runtime env, then
# `ray job submit` WITHOUT --no-wait (the Ray CLI tails the job until it ends), to the dashboard
# named by RAY_DASHBOARD_ADDR (as radixark/miles docs/advanced/mooncake-rollout-transfer.md does).
set -ex
RUNTIME_ENV_JSON="{
  \"env_vars\": {
    \"PYTHONPATH\": \"/root/Megatron-LM/\",
    \"CUDA_DEVICE_MAX_CONNECTIONS\": \"1\",
    \"NCCL_ALGO\": \"Ring\"
  }
}"
ray job submit --address="${RAY_DASHBOARD_ADDR}" --runtime-env-json="${RUNTIME_ENV_JSON}" \
   -- python3 "${SCRIPT:-$(pwd)/train.py}" --num-rollout "${STEPS:-3}" --lr 0.1 --step-sleep "${STEP_SLEEP:-0}" \
   --exit "${DRIVER_EXIT:-0}" ${HOLD:+--hold "$HOLD"}
