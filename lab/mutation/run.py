# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The mutation check: proof that a change to the tests left nothing tested less (issue 46).

Each mutant of mutants.py (beside this file) is one realistic bug put into one source file of a
checkout; its tests are run against it, and the mutant is *killed* when they fail, *survived* when
they pass. Run it on a clone before a change and on a clone after it, then compare the two: every
mutant killed before must be killed after.

    python3 lab/mutation/run.py --repo DIR [--only ID ...] [--out results.json] [--timeout S]
    python3 lab/mutation/run.py --repo DIR --baseline   # each test selection once, unmutated: must pass
    python3 lab/mutation/run.py --repo DIR --check      # every mutant applies once and compiles; no tests
    python3 lab/mutation/run.py --list
    python3 lab/mutation/run.py --compare BEFORE.json AFTER.json

DIR is a checkout with its venvs made (lab/bootstrap/venv.sh: .venv, the ``controller`` mutants;
lab/bootstrap/torch-venv.sh: .venv-torch, the ``torch`` ones). For each mutant: its file must be
clean in git (else the mutant is refused), the find string must occur exactly once, the mutated file
must compile; its tests run with ``-x -q -p no:cacheprovider -m "not fleet"`` under a timeout, and
the file is always restored with ``git checkout`` (also on SIGINT/SIGTERM). Results:

- ``killed``: the tests failed; ``first_failure`` is the first failing test's node id.
- ``error``: the tests did not run to a verdict (a collection or setup error, a timeout): counted as
  killed, and said so in ``detail``.
- ``survived``: the tests passed with the bug in place.
- ``refused``: the mutant could not be applied (dirty file, find string not there once, no compile).
- ``invalid``: its test selection ran nothing (pytest exit 4 or 5: a path that is gone, nothing
  collected). Neither refused nor invalid counts as caught.

It prints a table and writes JSON (``--out``, written after each mutant). ``--compare A B`` prints
the mutants whose result differs and exits 1 when one caught in A (killed or error) is not caught in
B. Stdlib only; one pytest at a time.
"""
import argparse
import datetime
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
AREAS = ("job", "capture", "gateway", "reader", "plan", "reports")
VENVS = {
    "controller": [".venv/bin/pytest"],
    "torch": [".venv-torch/bin/python", "-m", "pytest"],
}
PYTEST_ARGS = ["-x", "-q", "-rfE", "-p", "no:cacheprovider", "-m", "not fleet"]
CAUGHT = ("killed", "error")
DEFAULT_TIMEOUT = 600
OUTPUT_TAIL = 4000


class Stop(BaseException):
    """SIGINT/SIGTERM: stop after restoring the file under mutation."""

    def __init__(self, signum):
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


_CRITICAL = False   # while a file is being restored: a signal waits for it
_PENDING = []


def _on_signal(signum, _frame):
    if _CRITICAL:
        _PENDING.append(signum)
        return
    raise Stop(signum)


def load_mutants(path=os.path.join(HERE, "mutants.py")):
    spec = importlib.util.spec_from_file_location("eagle3_mutants", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    mutants = module.MUTANTS
    seen = set()
    for m in mutants:
        missing = {"id", "area", "path", "find", "replace", "why", "venv", "tests"} - set(m)
        if missing:
            raise SystemExit(f"mutant {m.get('id', m)!r} lacks {sorted(missing)}")
        if m["id"] in seen:
            raise SystemExit(f"mutant id {m['id']!r} is given twice")
        seen.add(m["id"])
        if m["area"] not in AREAS:
            raise SystemExit(f"mutant {m['id']}: area {m['area']!r} is not one of {AREAS}")
        if m["venv"] not in VENVS:
            raise SystemExit(f"mutant {m['id']}: venv {m['venv']!r} is not one of {sorted(VENVS)}")
        if not m["tests"] or not all(isinstance(t, str) for t in m["tests"]):
            raise SystemExit(f"mutant {m['id']}: tests must be a non-empty list of pytest paths")
    return mutants


def git(repo, *args, check=True):
    return subprocess.run(["git", "-C", repo, *args], check=check, capture_output=True, text=True)


def is_clean(repo, path):
    if git(repo, "ls-files", "--error-unmatch", "--", path, check=False).returncode != 0:
        return False, "not tracked by git"
    if git(repo, "diff", "--quiet", "--", path, check=False).returncode != 0:
        return False, "has uncommitted changes (git diff)"
    if git(repo, "diff", "--cached", "--quiet", "--", path, check=False).returncode != 0:
        return False, "has staged changes (git diff --cached)"
    return True, ""


def restore(repo, path):
    git(repo, "checkout", "--", path)


def mutated_text(repo, mutant):
    """The file's text with the mutant in it; raises ValueError unless ``find`` occurs exactly once and the
    result compiles (a .py file)."""
    full = os.path.join(repo, mutant["path"])
    with open(full, encoding="utf-8") as f:
        text = f.read()
    count = text.count(mutant["find"])
    if count != 1:
        raise ValueError(f"find string occurs {count} times in {mutant['path']}, not once")
    new = text.replace(mutant["find"], mutant["replace"], 1)
    if new == text:
        raise ValueError("the replacement changes nothing")
    if full.endswith(".py"):
        try:
            compile(new, full, "exec")
        except SyntaxError as exc:
            raise ValueError(f"the mutated file does not compile: {exc}") from exc
    return new


def write_file(path, text):
    st = os.stat(path)
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)
    # a new mtime whatever the clock's resolution: no stale bytecode is taken for the mutant's source
    os.utime(path, ns=(st.st_atime_ns, max(time.time_ns(), st.st_mtime_ns + 2_000_000_000)))


def pytest_command(repo, venv, tests):
    base = VENVS[venv]
    exe = os.path.join(repo, base[0])
    if not os.path.exists(exe):
        raise FileNotFoundError(f"{exe} is missing: bootstrap the venvs of {repo} first "
                                "(lab/bootstrap/venv.sh, lab/bootstrap/torch-venv.sh)")
    return [exe, *base[1:], *PYTEST_ARGS, *tests]


_CHILD = None


def run_tests(repo, venv, tests, timeout):
    """(rc or None on timeout, output, seconds)."""
    global _CHILD  # pylint: disable=global-statement
    env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
    env.pop("PYTEST_ADDOPTS", None)
    started = time.monotonic()
    proc = subprocess.Popen(pytest_command(repo, venv, tests), cwd=repo, env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, errors="replace", start_new_session=True)
    _CHILD = proc
    try:
        out = proc.communicate(timeout=timeout)[0]
        rc = proc.returncode
    except subprocess.TimeoutExpired:
        kill_child()
        out = proc.communicate()[0]
        rc = None
    finally:
        if proc.poll() is None:
            kill_child()
            proc.wait()
        _CHILD = None
    return rc, out, time.monotonic() - started


def kill_child():
    proc = _CHILD
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


SUMMARY = re.compile(r"^(FAILED|ERROR) (\S+?\.py(?:::.*?)?)(?: - .*)?$")


def first_failure(output):
    """(kind, node id) of the first FAILED/ERROR line of pytest's short test summary, or (None, "").

    Only the summary's lines count: a captured log's ``ERROR    logger:file.py:12 ...`` is no test."""
    lines = output.splitlines()
    start = next((n for n, line in enumerate(lines) if "short test summary info" in line), None)
    for line in lines[start + 1:] if start is not None else lines:
        m = SUMMARY.match(line.rstrip())
        if m:
            node = m.group(2).strip()
            if node.count("[") > node.count("]"):   # a parameter holding " - ": up to its closing bracket
                rest, depth = line[len(m.group(1)) + 1:], 0
                for n, char in enumerate(rest):
                    depth += {"[": 1, "]": -1}.get(char, 0)
                    if char == "]" and depth == 0:
                        node = rest[:n + 1]
                        break
            return m.group(1), node
    return None, ""


def verdict(rc, output, timeout):
    """(result, detail, first failing test) of one run of a mutant's tests."""
    kind, node = first_failure(output)
    if rc is None:
        return "error", f"timeout after {timeout} s (counts as killed)", node
    if rc == 0:
        return "survived", "the tests passed with the bug in place", ""
    if rc == 1 and kind == "FAILED":
        return "killed", "", node
    if rc == 1 and kind == "ERROR":
        return "error", "a test errored in setup/teardown (counts as killed)", node
    if rc == 1:
        return "killed", "tests failed (no FAILED line in pytest's summary)", node
    if rc == 2:
        return "error", "collection error or interrupted (rc 2; counts as killed)", node
    if rc in (4, 5):
        # the selection itself is wrong (a path that is gone, nothing collected): proves nothing, caught or not
        why = "usage error, e.g. a test path that is gone" if rc == 4 else "no tests collected"
        return "invalid", f"pytest exited {rc} ({why}): fix the mutant's tests", node
    return "error", f"pytest exited {rc} (counts as killed)", node


def run_mutant(repo, mutant, timeout):
    result = {key: mutant[key] for key in ("id", "area", "path", "why", "venv", "tests")}
    result.update(result="refused", detail="", first_failure="", seconds=0.0, rc=None, output_tail="")
    clean, why = is_clean(repo, mutant["path"])
    if not clean:
        result["detail"] = f"{mutant['path']} {why}: refused (commit or stash it first)"
        return result
    try:
        new = mutated_text(repo, mutant)
    except (OSError, ValueError) as exc:
        result["detail"] = str(exc)
        return result
    full = os.path.join(repo, mutant["path"])
    try:
        write_file(full, new)
        rc, out, seconds = run_tests(repo, mutant["venv"], mutant["tests"], mutant.get("timeout", timeout))
        result["result"], result["detail"], result["first_failure"] = verdict(
            rc, out, mutant.get("timeout", timeout))
        result.update(seconds=round(seconds, 1), rc=rc, output_tail=out[-OUTPUT_TAIL:])
    finally:
        global _CRITICAL  # pylint: disable=global-statement
        _CRITICAL = True
        try:
            restore(repo, mutant["path"])
        finally:
            _CRITICAL = False
        if _PENDING:
            raise Stop(_PENDING[0])
    return result


def table(rows):
    head = ("ID", "AREA", "RESULT", "SECONDS", "FIRST FAILING TEST / DETAIL")
    lines = [head] + [(r["id"], r["area"], r["result"], "%.1f" % r["seconds"],
                       r["first_failure"] or r["detail"]) for r in rows]
    widths = [max(len(str(line[i])) for line in lines) for i in range(4)]
    return "\n".join("  ".join(str(c).ljust(w) for c, w in zip(line[:4], widths)) + "  " + str(line[4])
                     for line in lines)


def summary(rows):
    counts = {}
    for r in rows:
        counts[r["result"]] = counts.get(r["result"], 0) + 1
    caught = sum(1 for r in rows if r["result"] in CAUGHT)
    return (f"{len(rows)} mutants: {caught} caught (" +
            ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) + ")")


def write_json(path, doc):
    if not path:
        return
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def select(mutants, only):
    if not only:
        return mutants
    known = {m["id"] for m in mutants}
    unknown = [i for i in only if i not in known]
    if unknown:
        raise SystemExit(f"unknown mutant ids: {unknown} (--list shows them)")
    return [m for m in mutants if m["id"] in only]


def head_commit(repo):
    found = git(repo, "rev-parse", "HEAD", check=False)
    return found.stdout.strip() if found.returncode == 0 else ""


def cmd_run(args, mutants):
    repo = os.path.abspath(args.repo)
    for m in mutants:   # every mutant applies before any test runs (a stale list fails at once)
        clean, why = is_clean(repo, m["path"])
        if clean:
            mutated_text(repo, m)
        else:
            print(f"warning: {m['id']}: {m['path']} {why}: it will be refused", file=sys.stderr)
    doc = {"repo": repo, "commit": head_commit(repo), "started": now(), "finished": None,
           "timeout_s": args.timeout, "pytest_args": PYTEST_ARGS, "total_seconds": None, "results": []}
    started = time.monotonic()
    try:
        for n, m in enumerate(mutants, 1):
            print(f"[{n}/{len(mutants)}] {m['id']} ({m['area']}): {' '.join(m['tests'])}", flush=True)
            r = run_mutant(repo, m, args.timeout)
            print(f"    {r['result']} in {r['seconds']:.1f} s {r['first_failure'] or r['detail']}", flush=True)
            doc["results"].append(r)
            doc["total_seconds"] = round(time.monotonic() - started, 1)
            write_json(args.out, doc)
    except Stop as stop:
        doc["stopped"] = f"stopped by {stop}"
        doc["total_seconds"] = round(time.monotonic() - started, 1)
        write_json(args.out, doc)
        print(f"stopped by {stop}; the file under mutation was restored", file=sys.stderr)
        return 128 + stop.signum
    doc["finished"] = now()
    doc["total_seconds"] = round(time.monotonic() - started, 1)
    doc["summary"] = summary(doc["results"])
    write_json(args.out, doc)
    print()
    print(table(doc["results"]))
    print(doc["summary"] + f"; {doc['total_seconds']:.0f} s in all")
    return 1 if any(r["result"] in ("refused", "invalid") for r in doc["results"]) else 0


def cmd_baseline(args, mutants):
    """Each distinct test selection once, nothing mutated: every one must pass (else its mutants prove nothing)."""
    repo = os.path.abspath(args.repo)
    selections = []
    for m in mutants:
        key = (m["venv"], tuple(m["tests"]))
        if key not in selections:
            selections.append(key)
    failed = 0
    rows = []
    try:
        for venv, tests in selections:
            rc, out, seconds = run_tests(repo, venv, list(tests), args.timeout)
            kind, node = first_failure(out)
            ok = rc == 0
            failed += not ok
            last = out.strip().splitlines()[-1] if out.strip() else ""
            rows.append({"venv": venv, "tests": list(tests), "rc": rc, "seconds": round(seconds, 1),
                         "passed": ok, "first_failure": node, "last_line": last})
            print(f"{'ok  ' if ok else 'FAIL'} {seconds:6.1f} s  {venv:10s} {' '.join(tests)}  {last}"
                  + (f"  ({kind} {node})" if not ok else ""), flush=True)
    except Stop as stop:
        print(f"stopped by {stop}", file=sys.stderr)
        return 128 + stop.signum
    write_json(args.out, {"repo": repo, "commit": head_commit(repo), "baseline": rows})
    print(f"{len(selections) - failed} of {len(selections)} selections pass unmutated")
    return 1 if failed else 0


def cmd_check(args, mutants):
    repo = os.path.abspath(args.repo)
    bad = 0
    for m in mutants:
        try:
            mutated_text(repo, m)
            print(f"ok   {m['id']}")
        except (OSError, ValueError) as exc:
            bad += 1
            print(f"BAD  {m['id']}: {exc}")
    return 1 if bad else 0


def cmd_compare(a_path, b_path):
    with open(a_path, encoding="utf-8") as f:
        a = {r["id"]: r for r in json.load(f)["results"]}
    with open(b_path, encoding="utf-8") as f:
        b = {r["id"]: r for r in json.load(f)["results"]}
    lost = []
    print(f"{'ID':36s} {'A':9s} {'B':9s}")
    for mid in list(a) + [i for i in b if i not in a]:
        ra = a.get(mid, {}).get("result", "(absent)")
        rb = b.get(mid, {}).get("result", "(absent)")
        if ra != rb:
            print(f"{mid:36s} {ra:9s} {rb:9s}")
        if ra in CAUGHT and rb not in CAUGHT:
            lost.append(mid)
    same = sum(1 for mid in a if mid in b and a[mid]["result"] == b[mid]["result"])
    caught_a = sum(1 for r in a.values() if r["result"] in CAUGHT)
    caught_b = sum(1 for r in b.values() if r["result"] in CAUGHT)
    print(f"A: {caught_a} of {len(a)} caught; B: {caught_b} of {len(b)} caught; {same} results the same")
    if lost:
        print("caught in A, not in B (tested less): " + ", ".join(lost))
        return 1
    print("every mutant caught in A is caught in B")
    return 0


def now():
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--repo", help="the checkout to mutate (its venvs made)")
    parser.add_argument("--only", nargs="+", metavar="ID", help="these mutants alone")
    parser.add_argument("--mutants", default=os.path.join(HERE, "mutants.py"),
                        help="the mutants' file (default: mutants.py beside this script)")
    parser.add_argument("--out", help="results JSON (written after each mutant)")
    parser.add_argument("--timeout", type=int, default=DEFAULT_TIMEOUT, help="seconds a mutant's tests may take")
    parser.add_argument("--baseline", action="store_true", help="run each test selection unmutated; all must pass")
    parser.add_argument("--check", action="store_true", help="check that every mutant applies and compiles")
    parser.add_argument("--list", action="store_true", help="list the mutants")
    parser.add_argument("--compare", nargs=2, metavar=("A.json", "B.json"), help="compare two runs' results")
    args = parser.parse_args(argv)
    if args.compare:
        return cmd_compare(*args.compare)
    mutants = select(load_mutants(args.mutants), args.only)
    if args.list:
        for m in mutants:
            print(f"{m['id']:36s} {m['area']:8s} {m['venv']:10s} {m['path']}\n    {m['why']}")
        return 0
    if not args.repo:
        parser.error("--repo is needed")
    if not os.path.isdir(os.path.join(args.repo, ".git")):
        parser.error(f"{args.repo} is not a git checkout")
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    if args.check:
        return cmd_check(args, mutants)
    if args.baseline:
        return cmd_baseline(args, mutants)
    return cmd_run(args, mutants)


if __name__ == "__main__":
    sys.exit(main())
