"""Model flags read by miles/utils/external_utils/model_args_utils.py (shape of Miles' scripts/models/*.py)."""


def model_args() -> str:
    return """
        --num-layers 2
        --hidden-size 64
        --moe-token-dispatcher-type alltoall
    """
