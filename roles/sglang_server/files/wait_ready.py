# Run by the role with `python -c` on the target: polls a unit's /health for up to
# --seconds and prints one JSON object: state ready (200), starting (not yet) or died
# (the unit failed, stopped or restarted), with the newest log line, the last 50 lines
# and the recognised cause. The role calls it again while the state is "starting".
import argparse
import json
import subprocess
import time
import urllib.error
import urllib.request

CAUSES = [
    ('No module named', 'a Python module is missing from the venv (No module named ...)'),
    ('Address already in use', 'the port is already in use (Address already in use)'),
    ('address already in use', 'the port is already in use (Address already in use)'),
    ('CUDA out of memory', 'CUDA out of memory (GPU memory still held or mem-fraction-static too high)'),
    ('OutOfMemoryError', 'CUDA out of memory (GPU memory still held or mem-fraction-static too high)'),
    ('NCCL error', 'NCCL error (check the NCCL_* variables, /dev/shm and the interconnect)'),
    ('NCCL WARN', 'NCCL error (check the NCCL_* variables, /dev/shm and the interconnect)'),
]


def unit_state(unit):
    out = subprocess.run(['systemctl', 'show', '--property=ActiveState,SubState,NRestarts', unit],
                         capture_output=True, text=True, check=False).stdout
    return dict(line.split('=', 1) for line in out.splitlines() if '=' in line)


def tail(path, offset, count=50):
    try:
        with open(path, 'rb') as log:
            log.seek(0, 2)
            # only what this start wrote (the file is appended to across starts)
            log.seek(max(offset if offset <= log.tell() else 0, log.tell() - 256 * 1024))
            lines = log.read().decode('utf-8', 'replace').splitlines()
    except OSError as exc:
        return ['(cannot read %s: %s)' % (path, exc)]
    return lines[-count:]


def health(url):
    try:
        with urllib.request.urlopen(url, timeout=5) as answer:
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (OSError, ValueError):
        return None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument('--unit', required=True)
    parser.add_argument('--url', required=True)
    parser.add_argument('--log', required=True)
    parser.add_argument('--restarts', type=int, default=0)
    parser.add_argument('--log-offset', type=int, default=0)
    parser.add_argument('--seconds', type=float, default=60)
    args = parser.parse_args()
    deadline = time.monotonic() + args.seconds
    result = {'state': 'starting'}
    while True:
        unit = unit_state(args.unit)
        died = (unit.get('ActiveState') in ('failed', 'inactive', 'deactivating')
                or unit.get('SubState') == 'auto-restart'
                or int(unit.get('NRestarts') or 0) > args.restarts)
        code = None if died else health(args.url)
        if died or code == 200:
            result['state'] = 'died' if died else 'ready'
            break
        result['http'] = code
        if time.monotonic() >= deadline:
            break
        time.sleep(1)
    result['unit'] = '%s/%s, %s automatic restarts' % (
        unit.get('ActiveState'), unit.get('SubState'), unit.get('NRestarts'))
    lines = tail(args.log, args.log_offset)
    result['tail'] = lines
    result['newest'] = lines[-1] if lines else ''
    found = [why for text, why in CAUSES if any(text in line for line in lines)]
    result['cause'] = found[0] if found else ''
    print(json.dumps(result))


main()
