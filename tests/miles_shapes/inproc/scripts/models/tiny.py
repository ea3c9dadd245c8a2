import os


def model_args(rotary_base: str | None = None) -> str:
    rotary_base = rotary_base if rotary_base is not None else os.environ.get("MODEL_ARGS_ROTARY_BASE") or "10000"
    return f"--num-layers 2 --hidden-size 64 --rotary-base {rotary_base} "
