#!/usr/bin/env bash
# Debian bookworm root filesystem with systemd as PID 1 and sshd, made with
# debootstrap from the machine's own apt mirror (no image registry involved).
# Cached: rebuilt only when the package list below changes.
#   -> $LAB/cache/rootfs-<hash>.tar  (the template `pct create` extracts)
set -euo pipefail
# shellcheck source=lab/fleet/lib.sh
. "$(dirname "$0")/lib.sh"

# libibverbs1, libnuma1 and libcurl4: what Mooncake's wheels link against (the online mode's ml_env_system_packages;
# the containers reach no apt index, so they are in the image, as on a site whose base image has them);
# prometheus and prometheus-node-exporter: the role monitoring's packages (Debian's), for the same reason
PACKAGES=systemd,systemd-sysv,dbus,python3,python3-venv,sudo,iproute2,procps,psmisc,openssh-server,ca-certificates,libibverbs1,libnuma1,libcurl4,prometheus,prometheus-node-exporter
# the name changes with the package list and with this script, so an edit rebuilds it
tar=$LAB/cache/rootfs-$(sha256sum < "$0" | cut -c1-12).tar
if [ -f "$tar" ]; then echo "$tar"; exit 0; fi

mirror=$(awk '/^URIs:/{print $2; exit}' /etc/apt/sources.list.d/*.sources 2>/dev/null || true)
[ -n "$mirror" ] || mirror=$(awk '/^deb /{print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
work=$LAB/cache/rootfs.build
# an interrupted debootstrap leaves /proc and /sys mounted inside: never rm -rf through them
{ grep -o " $work/[^ ]*" /proc/mounts || true; } | sort -r | xargs -r umount -l
rm -rf --one-file-system "$work"; mkdir -p "$work"
debootstrap --variant=minbase --include="$PACKAGES" bookworm "$work" "$mirror" >"$LAB/cache/debootstrap.log" 2>&1 \
  || { tail -20 "$LAB/cache/debootstrap.log" >&2; exit 1; }
# sshd host keys are made per container at first boot, not baked into the template
rm -f "$work"/etc/ssh/ssh_host_*
mkdir -p "$work/etc/systemd/system/ssh.service.d"
# (Proxmox makes them at `pct create`; this covers a template used without it)
printf '[Service]\nExecStartPre=\nExecStartPre=/usr/bin/ssh-keygen -A\nExecStartPre=/usr/sbin/sshd -t\n' \
  > "$work/etc/systemd/system/ssh.service.d/hostkeys.conf"
# a container has no console to log in on, and these only slow the boot
for u in getty@tty1.service console-getty.service systemd-networkd-wait-online.service; do
  ln -sf /dev/null "$work/etc/systemd/system/$u"
done
# installed, not running: only the role monitoring enables them (Prometheus on the monitoring host alone)
chroot "$work" systemctl disable prometheus.service prometheus-node-exporter.service >/dev/null 2>&1
apt_clean=("$work"/var/cache/apt/archives/*.deb); rm -f "${apt_clean[@]}"
tar -C "$work" --numeric-owner -cf "$tar.part" . && mv "$tar.part" "$tar"
find "$LAB/cache" -maxdepth 1 -name "rootfs-*.tar" ! -path "$tar" -delete   # older templates
rm -rf "$work"
echo "$tar"
