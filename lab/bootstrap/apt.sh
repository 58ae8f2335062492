#!/usr/bin/env bash
# Debian/Ubuntu packages the local fleet and the tests need (root). Skips apt when
# everything is installed already.
set -euo pipefail
# the shellcheck package too: without it ansible-test sanity skips its shellcheck test; prometheus for its promtool
# (the unit suite checks and tests the role monitoring's alert rules and dashboard queries with it)
PACKAGES=(debootstrap lxc openssh-server openssh-client netcat-openbsd iproute2 psmisc git make python3-venv shellcheck
  prometheus)
missing=()
for p in "${PACKAGES[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  apt-get update -q
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
  # the package starts a Prometheus on the controller: only promtool is wanted here
  if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
    systemctl disable --now prometheus.service prometheus-node-exporter.service >/dev/null 2>&1 || true
  fi
fi
