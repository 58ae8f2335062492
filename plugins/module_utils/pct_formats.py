# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""pve-common's formats of a container's values, as pct_container checks its options and the inventory
check's rules (the proxmox_container records) read them: a small file of its own, since the controller
compiles each file a worker imports from source."""

from __future__ import annotations

import re

# a storage id, a DNS name (the hostname), a template volume (<storage>:vztmpl/<file>) or an absolute path to a
# template archive, an OpenSSH public key line
STORAGE_RE = re.compile(r'[A-Za-z][A-Za-z0-9\-_.]*[A-Za-z0-9]')
HOSTNAME_RE = re.compile(r'(?=.{1,253}\Z)[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?'
                         r'(\.[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*')
OSTEMPLATE_RE = re.compile(r'([A-Za-z][A-Za-z0-9\-_.]*[A-Za-z0-9]:[^\s]+|/[^\s]+)')
SSH_KEY_RE = re.compile(r'(ssh-[a-z0-9]+|ecdsa-sha2-[a-z0-9]+|sk-[a-z0-9@.\-]+) [A-Za-z0-9+/]+=*( [^\s].*)?')
# a tmpfs size as mount takes it: a number with k, m, g, t or %
SHM_SIZE_RE = re.compile(r'[1-9]\d{0,14}[kKmMgGtT%]?')
