"""The environment variables that shape a run, and their `env.<NAME>` settings."""

from __future__ import annotations

import fnmatch
import json
from collections.abc import Iterable, Mapping, Sequence

from ledger.config import DEFAULT_ENV_PATTERNS

ENV_PREFIX = "env."
# Set by Ray on every job's driver (`_get_driver_env_vars` in Ray's
# dashboard/modules/job/job_supervisor.py): the job's config, holding its random submission id,
# and the cluster's GCS address. They name the job and where it ran, not the experiment; seen by
# the python3 wrapper inside a job (a launcher that starts its own head), they would make two
# identical runs differ. The runtime env is recorded as `command.runtime_env`.
RAY_JOB_VARIABLES = frozenset({"RAY_JOB_CONFIG_JSON_ENV_VAR", "RAY_ADDRESS"})


def capture_env(environ: Mapping[str, str], patterns: Iterable[str] = DEFAULT_ENV_PATTERNS) -> dict[str, str]:
    """The variables of `environ` whose names match a glob of `patterns`, sorted by name.

    Matching is case-sensitive. Secrets are kept: redaction happens later, in one place.
    """
    globs = list(patterns)
    return {name: environ[name] for name in sorted(environ) if any(fnmatch.fnmatchcase(name, glob) for glob in globs)}


def runtime_env_from_ray_argv(ray_argv: Sequence[str]) -> dict[str, object] | None:
    """The parsed `--runtime-env-json` of a `ray job submit` argv.

    None when the flag is absent or its value is not a JSON object.
    """
    for index, token in enumerate(ray_argv):
        text: str | None = None
        if token.startswith("--runtime-env-json="):
            text = token.split("=", 1)[1]
        elif token == "--runtime-env-json" and index + 1 < len(ray_argv):
            text = ray_argv[index + 1]
        if text is not None:
            try:
                parsed = json.loads(text)
            except ValueError:
                return None
            return parsed if isinstance(parsed, dict) else None
    return None


def runtime_env_vars(runtime_env: Mapping[str, object] | None) -> dict[str, str]:
    """The `env_vars` of a Ray runtime environment as strings (empty when there are none)."""
    if not runtime_env:
        return {}
    env_vars = runtime_env.get("env_vars")
    if not isinstance(env_vars, Mapping):
        return {}
    return {str(name): "" if value is None else str(value) for name, value in env_vars.items()}


def env_settings(env: Mapping[str, str], runtime_env: Mapping[str, object] | None = None) -> dict[str, str]:
    """`env.<NAME>` settings from the captured process env and the Ray runtime environment.

    Every runtime-env variable is kept (the launcher chose it deliberately) and overrides the
    process value, as Ray does for the job's processes. Ray's own job variables
    (`RAY_JOB_VARIABLES`) are left out.
    """
    merged = dict(env)
    merged.update(runtime_env_vars(runtime_env))
    return {ENV_PREFIX + name: merged[name] for name in sorted(merged) if name not in RAY_JOB_VARIABLES}
