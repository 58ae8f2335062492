#!/usr/bin/env bash
# Debian/Ubuntu packages the local fleet and the tests need (root). Skips apt when
# everything is installed already.
set -euo pipefail
# the shellcheck package too: without it ansible-test sanity skips its shellcheck test
PACKAGES=(debootstrap lxc openssh-server openssh-client netcat-openbsd iproute2 psmisc git make python3-venv shellcheck)
missing=()
for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
fi
