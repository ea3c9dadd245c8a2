"""Image identity: which Docker image a job runs in, and what is inside it.

A job named with `docker run ... IMAGE ...` is pinned by the image's config id, its repo digest,
its labels, and the commits of Miles, SGLang and Megatron-LM read from a throwaway container.
Those answers are fixed for an image id, so they are cached by id as JSON.

The Docker SDK is imported lazily, inside functions, so `ledger --help` stays fast; this is the
only module that imports it. Nothing here raises for a missing engine, an unknown image or a
failing probe: every such problem lands in `ImageFacts.errors`.
"""

from __future__ import annotations

import contextlib
import hashlib
import re
import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import msgspec

from ledger.cache import LocalCache
from ledger.understand.dockerargv import detect_image_in_argv

__all__ = ["ImageFacts", "detect_image_in_argv", "probe_image"]

# ----------------------------------------------------------------------------------------------
# Probes run inside the image

# Reads a checkout's HEAD commit: git when the image has it, else .git/HEAD and the ref file or
# packed-refs with sh builtins only. $1 is the checkout folder.
_GIT_HEAD_SCRIPT = r"""d=$1
if command -v git >/dev/null 2>&1 && git -C "$d" rev-parse HEAD 2>/dev/null; then exit 0; fi
g=$d/.git
if [ -f "$g" ]; then
  read -r line < "$g"
  case $line in "gitdir: "*) g=${line#gitdir: }; case $g in /*) ;; *) g=$d/$g ;; esac ;; esac
fi
if [ ! -r "$g/HEAD" ]; then echo "$d: not a git checkout (no .git/HEAD)" >&2; exit 1; fi
read -r head < "$g/HEAD"
sha=
case $head in
  "ref: "*)
    ref=${head#ref: }
    if [ -r "$g/$ref" ]; then read -r sha < "$g/$ref"
    elif [ -r "$g/packed-refs" ]; then
      while read -r s r; do if [ "$r" = "$ref" ]; then sha=$s; break; fi; done < "$g/packed-refs"
    fi ;;
  *) sha=$head ;;
esac
if [ -z "$sha" ]; then echo "$d: cannot resolve HEAD ($head)" >&2; exit 1; fi
echo "$sha"
"""

# SGLang's version: import it when python3 can, else read __version__ from version.py.
_SGLANG_VERSION_SCRIPT = r"""f=/sgl-workspace/sglang/python/sglang/version.py
if command -v python3 >/dev/null 2>&1 &&
   python3 -c "import sglang; print(sglang.__version__)" 2>/dev/null; then exit 0; fi
if [ ! -r "$f" ]; then echo "sglang is not importable and $f is missing" >&2; exit 1; fi
while IFS= read -r line; do
  case $line in
    __version__*=*) v=${line#*[\"\']}; echo "${v%%[\"\']*}"; exit 0 ;;
  esac
done < "$f"
echo "no __version__ in $f" >&2; exit 1
"""


def _git_head(checkout: str) -> list[str]:
    return ["sh", "-c", _GIT_HEAD_SCRIPT, "git-head", checkout]


DEFAULT_PROBES: dict[str, list[str]] = {
    "miles_commit": _git_head("/root/miles"),
    "sglang_version": ["sh", "-c", _SGLANG_VERSION_SCRIPT],
    "sglang_commit": _git_head("/sgl-workspace/sglang"),
    "megatron_commit": _git_head("/root/Megatron-LM"),
}

ProbeSpec = str | Sequence[str]  # a shell string, or an argv
_PROBE_NAME = re.compile(r"[a-z][a-z0-9_]*")
_RESERVED_NAMES = {"ref", "id", "digest", "labels", "errors", "cached"}
_STDERR_MARK = "@@ledger-probe "
_LABEL_PREFIXES = ("miles.", "org.opencontainers.image.")
_CONTAINER_TIMEOUT_S = 120


class ImageFacts(msgspec.Struct):
    """What is known about one image: identity, labels, probe answers, and what went wrong."""

    ref: str
    id: str | None = None
    digest: str | None = None
    labels: dict[str, str] = msgspec.field(default_factory=dict)
    probes: dict[str, str | None] = msgspec.field(default_factory=dict)
    errors: list[str] = msgspec.field(default_factory=list)
    cached: bool = False

    def to_manifest(self) -> dict[str, Any]:
        """The manifest `image` section: identity, labels, one key per probe, errors."""
        out: dict[str, Any] = {
            "ref": self.ref,
            "id": self.id,
            "digest": self.digest,
            "labels": dict(sorted(self.labels.items())),
        }
        out.update(self.probes)
        out["errors"] = list(self.errors)
        return out


def build_probe_script(probes: Mapping[str, ProbeSpec]) -> str:
    """One `sh` script running every probe; stdout gets `ok:NAME=VALUE` or `fail:NAME=STATUS`.

    Before each probe a marker line goes to stderr so the probe's messages can be told apart.
    """
    lines = ["nl='", "'"]
    for name, spec in probes.items():
        command = spec if isinstance(spec, str) else shlex.join(list(spec))
        lines += [
            f"echo '{_STDERR_MARK}{name}' >&2",
            f"v=$( ( {command}\n) </dev/null ); rc=$?",
            'v=${v#"${v%%[![:space:]]*}"}; v=${v%%"$nl"*}',
            (f"if [ $rc -eq 0 ]; then printf 'ok:%s=%s\\n' {name} \"$v\"; else printf 'fail:%s=%s\\n' {name} \"$rc\"; fi"),
        ]
    return "\n".join(lines) + "\n"


def parse_probe_output(probes: Sequence[str], stdout: str, stderr: str) -> tuple[dict[str, str | None], list[str]]:
    """Turn the probe script's two streams into answers (None when failed) and error strings."""
    status: dict[str, tuple[bool, str]] = {}
    for line in stdout.splitlines():
        kind, _, rest = line.partition(":")
        name, sep, value = rest.partition("=")
        if kind in ("ok", "fail") and sep and name in probes:
            status[name] = (kind == "ok", value.strip())
    messages = _probe_messages(stderr)
    answers: dict[str, str | None] = {}
    errors: list[str] = []
    for name in probes:
        ok, value = status.get(name, (False, ""))
        answers[name] = value if ok and value else None
        if answers[name] is None:
            errors.append(f"probe {name} failed: {_probe_failure(name in status, ok, value, messages.get(name))}")
    return answers, errors


def _probe_messages(stderr: str) -> dict[str, list[str]]:
    """What each probe printed on stderr: the lines after its marker line, blank ones left out."""
    messages: dict[str, list[str]] = {}
    current: str | None = None
    for line in stderr.splitlines():
        if line.startswith(_STDERR_MARK):
            current = line[len(_STDERR_MARK) :].strip()
            messages[current] = []
        elif current is not None and line.strip():
            messages[current].append(line.strip())
    return messages


def _probe_failure(answered: bool, ok: bool, value: str, said: list[str] | None) -> str:
    """Why a probe has no answer: none came, it printed nothing, or its first line of stderr."""
    if not answered:
        return "gave no answer"
    if ok:
        return "printed nothing"
    return (said or [""])[0] or f"exit status {value}, no message"


def normalize_probes(
    probes: Mapping[str, Any] | None,
) -> tuple[dict[str, ProbeSpec], list[str]]:
    """Validate caller probes (`image_probes:` in `.ledger.yaml`); bad entries become errors."""
    if probes is None:
        return dict(DEFAULT_PROBES), []
    good: dict[str, ProbeSpec] = {}
    errors: list[str] = []
    for name, spec in probes.items():
        if not _PROBE_NAME.fullmatch(str(name)) or name in _RESERVED_NAMES:
            errors.append(f"probe {name!r} skipped: name must be lower_snake_case, not reserved")
        elif (taken := _probe_spec(spec)) is not None:
            good[name] = taken
        else:
            errors.append(f"probe {name} skipped: expected a shell string or a list of words")
    return good, errors


def _probe_spec(spec: Any) -> ProbeSpec | None:
    """A probe as given: a non-blank shell string, or a non-empty list of words (None: neither)."""
    if isinstance(spec, str):
        return spec if spec.strip() else None
    if isinstance(spec, (list, tuple)) and spec and all(type(w) is str for w in spec):
        return list(spec)
    return None


# ----------------------------------------------------------------------------------------------
# Talking to the engine


def probe_image(
    ref: str,
    probes: Mapping[str, Any] | None,
    cache_dir: Path,
    docker_client_factory: Callable[[], Any] | None = None,
) -> ImageFacts:
    """Record the identity of image `ref` and run the probes in one throwaway container.

    `probes` maps name -> shell string or argv (None: `DEFAULT_PROBES`). Probe answers are cached
    in `cache_dir` by image id and probe set, so a second call for the same image starts no
    container. `docker_client_factory` defaults to `docker.from_env` (honours DOCKER_HOST).
    Never raises for engine, image or probe problems: they are listed in `errors`.
    """
    import docker.errors  # type: ignore[import-untyped]
    import requests

    facts = ImageFacts(ref=ref)
    specs, facts.errors = normalize_probes(probes)
    engine_errors = (OSError, requests.RequestException, docker.errors.DockerException)
    try:
        client = (docker_client_factory or docker.from_env)()
        client.ping()
    except engine_errors as exc:
        facts.errors.append(f"docker engine unreachable: {_first_line(exc)}")
        return facts
    try:
        try:
            image = client.images.get(ref)
        except docker.errors.ImageNotFound:
            facts.errors.append(f"image not found: {ref} (pull it first: docker pull {ref})")
            return facts
        except engine_errors as exc:
            facts.errors.append(f"image not found: {ref}: {_first_line(exc)}")
            return facts
        _identify(facts, ref, image.id, image.attrs)
        if specs:
            _fill_probes(facts, client, image.id, specs, cache_dir, engine_errors)
    finally:
        _close(client)
    return facts


def _identify(facts: ImageFacts, ref: str, image_id: str, attrs: Mapping[str, Any]) -> None:
    """The image's id, the digest `ref` was pulled by, and its Miles and OCI labels."""
    facts.id = image_id
    facts.digest = _pick_repo_digest(ref, attrs.get("RepoDigests") or [])
    labels = (attrs.get("Config") or {}).get("Labels") or {}
    facts.labels = {k: v for k, v in labels.items() if k.startswith(_LABEL_PREFIXES)}


def _fill_probes(
    facts: ImageFacts,
    client: Any,
    image_id: str,
    specs: dict[str, ProbeSpec],
    cache_dir: Path,
    engine_errors: tuple[type[BaseException], ...],
) -> None:
    """Answer the probes from the cache, or from one container whose answers are then cached."""
    script = build_probe_script(specs)
    key = hashlib.sha256(script.encode()).hexdigest()[:16]
    cache = LocalCache.at(cache_dir)
    entry = f"{image_id.replace(':', '-')}-{key}"
    cached = _read_cache(cache.read_json(entry))
    if cached is not None:
        facts.probes, probe_errors = cached
        facts.errors += probe_errors
        facts.cached = True
        return
    try:
        stdout, stderr = _run_script(client, image_id, script)
    except engine_errors as exc:
        facts.probes = dict.fromkeys(specs)
        facts.errors.append(f"probe container failed: {_first_line(exc)}")
        return
    facts.probes, probe_errors = parse_probe_output(list(specs), stdout, stderr)
    facts.errors += probe_errors
    cache.write_json(entry, {"image_id": image_id, "probes": facts.probes, "errors": probe_errors})


def _run_script(client: Any, image_id: str, script: str) -> tuple[str, str]:
    """Run `sh -c script` in a new container without network; always remove the container."""
    container = client.containers.create(
        image_id,
        command=[script],
        entrypoint=["/bin/sh", "-c"],
        network_mode="none",
        labels={"ledger.probe": "1"},
    )
    try:
        container.start()
        result = container.wait(timeout=_CONTAINER_TIMEOUT_S)
        stdout = container.logs(stdout=True, stderr=False).decode("utf-8", "replace")
        stderr = container.logs(stdout=False, stderr=True).decode("utf-8", "replace")
        if result.get("StatusCode", 0) != 0 and not stdout:
            raise OSError(f"probe script exited {result.get('StatusCode')}: {stderr.strip()}")
        return stdout, stderr
    finally:
        # Best-effort cleanup: a failed removal must not hide the probe answers.
        with contextlib.suppress(Exception):
            container.remove(force=True)


def _pick_repo_digest(ref: str, repo_digests: Sequence[str]) -> str | None:
    """The repo digest for `ref`'s repository, else the first one, else None (local-only)."""
    if not repo_digests:
        return None
    wanted = _repository_of(ref)
    for entry in repo_digests:
        repo = entry.partition("@")[0]
        if _normalize_repo(repo) == wanted:
            return entry
    return repo_digests[0]


def _repository_of(ref: str) -> str:
    """`127.0.0.1:5000/a/b:tag@sha256:x` -> `127.0.0.1:5000/a/b` (docker.io names normalised)."""
    name = ref.partition("@")[0]
    slash = name.rfind("/")
    colon = name.rfind(":")
    if colon > slash:
        name = name[:colon]
    return _normalize_repo(name)


def _normalize_repo(repo: str) -> str:
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        repo = repo.removeprefix(prefix)
    return repo.removeprefix("library/")


def _read_cache(data: Any) -> tuple[dict[str, str | None], list[str]] | None:
    try:
        return dict(data["probes"]), list(data["errors"])
    except (KeyError, TypeError, ValueError):
        return None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


def _close(client: Any) -> None:
    close = getattr(client, "close", None)
    if callable(close):
        close()
