"""Stand-in for Miles' model-args helper: loads scripts/models/<NAME>.py in-process and collapses
its model_args() to one line; run as a script it prints them, for a bash launcher's `read -ra`."""

import importlib.util
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[3]


def load_model_args(model_type: str, model_dir: Path | None = None, **kwargs: object) -> str:
    path = (model_dir or REPO_ROOT / "scripts" / "models") / f"{model_type}.py"
    sys.modules.setdefault("model_args_utils", sys.modules[__name__])
    spec = importlib.util.spec_from_file_location(f"model_{path.stem.replace('-', '_')}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return " ".join(module.model_args(**kwargs).split())


def load_sibling_model_args(model_script: str, model_type: str, **kwargs: object) -> str:
    return load_model_args(model_type, Path(model_script).resolve().parent, **kwargs)


if __name__ == "__main__":
    print(load_model_args(sys.argv[1]))
