"""Finding the image a job runs in from its command line (`docker run [options] IMAGE ...`)."""

from __future__ import annotations

import os
import re
from collections.abc import Sequence

_DOCKER_BINARIES = {"docker", "nvidia-docker", "podman"}
# Options of `docker run` / `docker create` that take a value as the next word (when not
# written `--opt=value`). Switches (`--rm`, `-d`, `--init`, `--privileged`, ...) are absent.
_VALUE_OPTIONS_TEXT = """
    -a --attach --add-host --annotation --blkio-weight --blkio-weight-device -c --cpu-shares
    --cap-add --cap-drop --cgroup-parent --cgroupns --cidfile --cpu-count --cpu-percent
    --cpu-period --cpu-quota --cpu-rt-period --cpu-rt-runtime --cpus --cpuset-cpus --cpuset-mems
    --detach-keys --device --device-cgroup-rule --device-read-bps --device-read-iops
    --device-write-bps --device-write-iops --dns --dns-opt --dns-option --dns-search --domainname
    -e --env --entrypoint --env-file --expose --gpus --group-add --health-cmd
    --health-interval --health-retries --health-start-interval --health-start-period
    --health-timeout -h --hostname --io-maxbandwidth --io-maxiops --ip --ip6 --ipc --isolation
    --kernel-memory -l --label --label-file --link --link-local-ip --log-driver --log-opt
    --mac-address -m --memory --memory-reservation --memory-swap --memory-swappiness --mount
    --name --net --network --net-alias --network-alias --oom-score-adj --pid --pids-limit
    --platform -p --publish --pull --restart --runtime --security-opt --shm-size --stop-signal
    --stop-timeout --storage-opt --sysctl --tmpfs --ulimit -u --user --userns --uts -v --volume
    --volume-driver --volumes-from -w --workdir
"""
_VALUE_OPTIONS = frozenset(_VALUE_OPTIONS_TEXT.split())
# Short options that take a value, for bundles such as `-itv /a:/b` or `-eK=V`.
_SHORT_VALUE_LETTERS = {opt[1] for opt in _VALUE_OPTIONS if len(opt) == 2}
_SUDO_VALUE_OPTIONS = {
    "-u",
    "--user",
    "-g",
    "--group",
    "-C",
    "-h",
    "--host",
    "-p",
    "-D",
}


def detect_image_in_argv(argv: Sequence[str]) -> str | None:
    """Return IMAGE from `[sudo] docker [container] run [OPTIONS] IMAGE [CMD...]`, else None.

    Also understands `nvidia-docker run`, `docker create`, and `sudo` with its own options.
    Options with values (`-v x`, `--gpus all`, `--shm-size=16g`, `-e K=V`) are skipped.
    """
    words = list(argv)
    i = _skip_sudo_and_env(words)
    if i >= len(words) or os.path.basename(words[i]) not in _DOCKER_BINARIES:
        return None
    i += 1
    # Global options of the docker client itself (`docker --context x run ...`).
    while i < len(words) and words[i].startswith("-"):
        opt = words[i]
        i += 1 if "=" in opt or opt in ("-D", "--debug", "--tls", "--tlsverify") else 2
    if i < len(words) and words[i] == "container":
        i += 1
    if i >= len(words) or words[i] not in ("run", "create"):
        return None
    i += 1
    while i < len(words):
        word = words[i]
        if word == "--":
            return words[i + 1] if i + 1 < len(words) else None
        if not word.startswith("-") or word == "-":
            return word
        if word.startswith("--"):
            i += 2 if ("=" not in word and word in _VALUE_OPTIONS) else 1
            continue
        # A bundle of short switches, possibly ending in one that takes a value (`-itv x`).
        letters = word[1:]
        takes_next = False
        for pos, letter in enumerate(letters):
            if letter in _SHORT_VALUE_LETTERS:
                takes_next = pos == len(letters) - 1  # otherwise the value is attached
                break
        i += 2 if takes_next else 1
    return None


def _skip_sudo_and_env(words: list[str]) -> int:
    """Index of the first word after `sudo [opts]`, `env [K=V...]` and leading `K=V` words."""
    i = 0
    while i < len(words):
        word = words[i]
        base = os.path.basename(word)
        if base in ("sudo", "env"):
            i += 1
            while i < len(words) and (words[i].startswith("-") or "=" in words[i]):
                i += 2 if words[i] in _SUDO_VALUE_OPTIONS else 1
            continue
        if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=.*", word):
            i += 1
            continue
        return i
    return i
