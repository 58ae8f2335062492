# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What processes wrote to storage during a run, from /proc/<pid>/io's write_bytes (a tmpfs such as /dev/shm
does not count there): the online proofs' measure that no process holding hidden states writes them to a disk.
The fleet test samples its containers through a shell, the GPU proof its own /proc; both count here."""


def add_sample(counters, host, sample, baseline=False):
    """Fold one sample, ``[(group, pid, write_bytes)]``, into ``counters``: {(host, pid, group): [first, last]}.
    A process first seen counts from 0 (it may have begun writing before it was seen), or, with ``baseline``,
    from what it had written then (the processes seen before the run began)."""
    for group, pid, written in sample:
        key = (host, str(pid), group)
        if key not in counters:
            counters[key] = [written if baseline else 0, written]
        counters[key][1] = written
    return counters


def by_group(counters, groups=None):
    """{group: bytes written during the run} (of ``groups`` alone where given)."""
    found = {}
    for (_host, _pid, group), (first, last) in counters.items():
        if groups is None or group in groups:
            found[group] = found.get(group, 0) + last - first
    return found
