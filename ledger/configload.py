"""Load `.ledger.yaml`: read the file, validate it (`ledger/configschema.py`), cache what validated.

Apart from `ledger/config.py` (the defaults and `Config`) so that the schema, which imports those,
is not imported by the module it imports from.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from ledger.config import CONFIG_NAME, Config
from ledger.errors import LedgerError


def parse_config(data: Any) -> Config:
    """Validate the parsed YAML of `.ledger.yaml` (None: an empty file) into a `Config`."""
    from ledger.configschema import parse_config as validate

    return validate(data)


def load_config(root: Path, common_dir: Path | None = None) -> Config:
    """Read and validate `<root>/.ledger.yaml` (absent means all defaults).

    With the repository's `common_dir`, a file validated before is taken from the cache there.
    """
    path = root / CONFIG_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Config()
    except OSError as exc:  # a folder of that name, no permission
        raise LedgerError(
            f"cannot read {CONFIG_NAME}: {exc.strerror or exc}", f"make {path} a readable file, or remove it for the defaults"
        ) from exc
    cache = None
    if common_dir is not None:
        from ledger.cache import LocalCache

        cache = LocalCache(common_dir, "config")
        key = hashlib.sha256(raw).hexdigest()
        cached = cache.read_pickle(key, Config)
        if cached is not None:
            return cached
    from ledger import yamlio  # lazily: ruamel costs ~30 ms of `ledger run`'s start-up

    cfg = parse_config(yamlio.loads(raw, CONFIG_NAME))
    if cache is not None:
        cache.write_pickle(key, cfg)
    return cfg
