def model_args() -> str:
    return "--num-layers 4 "
