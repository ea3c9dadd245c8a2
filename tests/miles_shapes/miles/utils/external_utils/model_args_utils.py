"""Stand-in for Miles' model-args helper (shape of radixark/miles since August 2026): prints the
flags of scripts/models/<NAME>.py on one line, for a bash launcher's `read -ra`."""

import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

spec = importlib.util.spec_from_file_location("model_file", ROOT / "scripts" / "models" / f"{sys.argv[1]}.py")
assert spec is not None and spec.loader is not None
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
print(" ".join(module.model_args().split()))
