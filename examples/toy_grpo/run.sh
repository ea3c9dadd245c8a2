#!/bin/bash
# Launch the toy GRPO trainer the way Miles' scripts/run-*.sh launch train.py: arguments in bash
# arrays, `set -ex` so the shell echoes the fully expanded command on stderr (`+ python3 ...`).
# Extra arguments are appended last, so they override the defaults (argparse: last one wins).
#   bash examples/toy_grpo/run.sh --num-rollout 16 --save-debug-event-data /tmp/events
set -ex

SCRIPT_DIR="$(cd -- "$(dirname -- "${BASH_SOURCE[0]}")" &>/dev/null && pwd)"
export PYTHONUNBUFFERED=1

ROLLOUT_ARGS=(
   --rollout-batch-size 8
   --n-samples-per-prompt 8
   --rollout-max-response-len 24
   --rollout-temperature 1.0
   --num-rollout 8
)

TRAIN_ARGS=(
   --lr 0.2
   --clip-grad 1.0
   --global-batch-size 64
)

PERF_ARGS=(
   --colocate
)

SGLANG_ARGS=(
   --sglang-mem-fraction-static 0.7
)

MISC_ARGS=(
   --seed 1234
   --rollout-seed 42
)

# As in Miles' launchers, the wandb key goes on the command line (and into the `set -x` echo).
WANDB_ARGS=()
if [ -n "${WANDB_API_KEY}" ]; then
   WANDB_ARGS=(--use-wandb --wandb-project toy-grpo --wandb-key "${WANDB_API_KEY}")
fi

python3 "$SCRIPT_DIR/train.py" \
   "${ROLLOUT_ARGS[@]}" \
   "${TRAIN_ARGS[@]}" \
   "${PERF_ARGS[@]}" \
   "${SGLANG_ARGS[@]}" \
   "${MISC_ARGS[@]}" \
   "${WANDB_ARGS[@]}" \
   "$@"
