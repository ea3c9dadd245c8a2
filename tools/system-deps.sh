#!/usr/bin/env bash
# Machine set-up the test suite needs beyond pip: run by `make system-deps`, which `make test`
# depends on. Tests never install anything themselves; where this script could not provide a
# part, the tests that need it skip and say why.
#
#   docker.io                     a real Docker engine (tests start a private dockerd)
#   chromium                      a real browser: tests open ledger's HTML pages headless
#   docker-registry, busybox-static  .deb files only (downloaded into $DEBS, never installed):
#                                 a loopback registry for real repo digests, a tiny image rootfs
#
# Tolerant by design: no root, no apt or no registry access leaves a warning, not a failure.
set -u
DEBS="${1:?usage: system-deps.sh DEB_FOLDER}"
mkdir -p "$DEBS"
warn() { echo "system-deps: $*; the tests that need it will skip" >&2; }

if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    warn "not root or no apt-get: nothing installed"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
updated=0
apt_update() { [ "$updated" = 1 ] || { apt-get update -qq >/dev/null 2>&1; updated=1; }; }

install() {  # install PACKAGE unless COMMAND is already on PATH
    command -v "$2" >/dev/null 2>&1 && return 0
    apt-get install -y -qq --no-install-recommends "$1" >/dev/null 2>&1 \
        || { apt_update; apt-get install -y -qq --no-install-recommends "$1" >/dev/null 2>&1; } \
        || warn "cannot install $1"
}

download() {  # a .deb into $DEBS, once
    ls "$DEBS/$1"_*.deb >/dev/null 2>&1 && return 0
    (cd "$DEBS" && { apt-get download -qq "$1" >/dev/null 2>&1 \
        || { apt_update; apt-get download -qq "$1" >/dev/null 2>&1; }; }) || warn "cannot download $1"
}

install docker.io dockerd
install chromium chromium
download docker-registry
download busybox-static
exit 0
