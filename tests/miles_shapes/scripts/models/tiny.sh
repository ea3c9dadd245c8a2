# model flags, sourced by the launcher (shape of radixark/miles scripts/models/*.sh)
MODEL_ARGS=(
   --num-layers 2
   --hidden-size "${MODEL_ARGS_HIDDEN:-64}"
   --rotary-base "${MODEL_ARGS_ROTARY_BASE:-1000000}"
   --moe-token-dispatcher-type alltoall
)
