# Run by extract.yml with `python3 -c` on a container. It fingerprints what a successful
# run left there, so that the next run can tell a converged host (same inputs, same files,
# server healthy) from one that needs its roles again.
#
#   measure --unit U --url URL [--file F]... [--glob G]... [--names G]... [--tree D]...
#       prints the stamp body: {"watch": {what is watched}, "state": sha256 of it}
#   check --stamp PATH
#       prints {"stamp": the stamp or null, "state": sha256 of the same things now,
#               "active": the unit's ActiveState, "health": /health's HTTP status or null}
#
# Watched: --file and --glob (recursive **) by content, --names by the names that match
# (installed packages: *.dist-info), --tree by the names and sizes of its files (weights).
import argparse
import glob
import hashlib
import json
import os
import subprocess
import urllib.error
import urllib.request


def digest(path):
    sha = hashlib.sha256()
    try:
        with open(path, 'rb') as handle:
            for block in iter(lambda: handle.read(1 << 20), b''):
                sha.update(block)
    except OSError:
        return None
    return sha.hexdigest()


def tree(directory):
    found = []
    for root, dummy, files in os.walk(directory):
        for name in files:
            path = os.path.join(root, name)
            try:
                found.append([os.path.relpath(path, directory), os.path.getsize(path)])
            except OSError:
                continue
    return sorted(found)


def fingerprint(watch):
    """sha256 of everything watch names, as it is now."""
    seen = {
        'files': {path: digest(path) for path in watch['files']},
        'globs': {pattern: {path: digest(path) for path in sorted(glob.glob(pattern, recursive=True))}
                  for pattern in watch['globs']},
        'names': {pattern: sorted(os.path.basename(path) for path in glob.glob(pattern))
                  for pattern in watch['names']},
        'trees': {directory: tree(directory) for directory in watch['trees']},
    }
    return hashlib.sha256(json.dumps(seen, sort_keys=True).encode()).hexdigest()


def active_state(unit):
    return subprocess.run(['systemctl', 'show', '--property=ActiveState', '--value', unit],
                          capture_output=True, text=True, check=False).stdout.strip()


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
    sub = parser.add_subparsers(dest='mode', required=True)
    measure = sub.add_parser('measure')
    measure.add_argument('--unit', required=True)
    measure.add_argument('--url', required=True)
    for option in ('file', 'glob', 'names', 'tree'):
        measure.add_argument('--' + option, action='append', default=[])
    check = sub.add_parser('check')
    check.add_argument('--stamp', required=True)
    args = parser.parse_args()

    if args.mode == 'measure':
        watch = {'unit': args.unit, 'url': args.url, 'files': args.file, 'globs': args.glob,
                 'names': args.names, 'trees': args.tree}
        print(json.dumps({'watch': watch, 'state': fingerprint(watch)}, sort_keys=True))
        return
    try:
        with open(args.stamp) as handle:
            stamp = json.load(handle)
        watch = stamp['watch']
    except (OSError, ValueError, KeyError, TypeError):
        print(json.dumps({'stamp': None}))
        return
    print(json.dumps({'stamp': stamp, 'state': fingerprint(watch), 'active': active_state(watch['unit']),
                      'health': health(watch['url'])}))


main()
