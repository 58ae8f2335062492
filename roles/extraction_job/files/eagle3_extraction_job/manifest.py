# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The SQLite manifest of one host's output directory.

``samples`` has one row per sample: ``writing`` from the moment its file index is
reserved (before any byte is written) and ``done`` once the file is durable. A
``writing`` row found at start is a write a crash interrupted: its file, if any,
is removed and the row dropped, so the sample is drained again from its dump
(which is only deleted after ``done`` is committed). ``meta`` pins what the
output is (job, shard, dataset sha256, the captured layers); ``failures`` keeps
the last error of each sample that has not succeeded.

Drain threads commit together (:meth:`Manifest.commit_grouped`): the statements
of every thread that arrives while a commit is under way go into the next
transaction, so a group of samples costs one WAL fsync and one fsync per output
directory instead of two commits and a directory fsync each. Each caller still
returns only after the transaction holding its own statement is durable, and
reads go through a second connection, which sees committed rows only: nothing
reads as ``done`` before it is.

``eagle3.extraction.extraction_verify`` reads the same tables (keep the column
names in step).
"""
import fcntl
import os
import sqlite3
import threading
import time

SCHEMA = """
CREATE TABLE IF NOT EXISTS samples (
    sample_id TEXT PRIMARY KEY,
    idx INTEGER NOT NULL UNIQUE,
    path TEXT NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('writing', 'done')),
    tokens INTEGER,
    bytes INTEGER,
    sha256 TEXT,
    done_at REAL
);
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS failures (
    sample_id TEXT PRIMARY KEY, attempts INTEGER NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL,
    line INTEGER
);
"""
# failures.line (the sample's line in the dataset, where the user fixes it) came after the
# table: a manifest made before gets the column, NULL for the failures it already had
FAILURES_LINE = "ALTER TABLE failures ADD COLUMN line INTEGER"


# the file in an output dir that the job holds locked (flock) for as long as it runs; the
# repair (``eagle3.extraction.extraction_repair``) moves a file only while it holds it
LOCK_NAME = "job.lock"


def lock_output_dir(output_dir, wait=True):
    """Hold ``<output_dir>/job.lock`` (flock, exclusive); returns its fd, to ``os.close``.

    ``wait``: block until it is free; else raise ``BlockingIOError`` when another process
    holds it. The lock goes with the process: a killed job holds nothing."""
    fd = os.open(os.path.join(output_dir, LOCK_NAME), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
    except BaseException:
        os.close(fd)
        raise
    return fd


class ManifestMismatch(RuntimeError):
    """The output dir belongs to another job, shard or dataset."""


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def makedirs_durable(path, mode=0o755):
    """``os.makedirs``, and each directory it made is fsync'ed into its parent.

    Returns once every new entry is on the disk: a file linked below ``path`` afterwards
    cannot be lost with a directory whose own entry never reached the disk."""
    path = os.path.abspath(path)
    missing = []
    while not os.path.isdir(path):
        missing.append(path)
        path = os.path.dirname(path)
    for directory in reversed(missing):
        try:
            os.mkdir(directory, mode)
        except FileExistsError:
            if not os.path.isdir(directory):
                raise
        fsync_dir(os.path.dirname(directory))


class _Ticket:
    """One caller's work in a group commit and, once ``finished`` is set, its outcome."""

    def __init__(self, work, sync_dirs):
        self.work = work
        self.sync_dirs = sync_dirs
        self.result = None
        self.error = None
        self.finished = threading.Event()

    def wait(self):
        """The work's result once its transaction is durable; its error, raised, if not."""
        self.finished.wait()
        if self.error is not None:
            raise self.error
        return self.result


class Manifest:  # pylint: disable=too-many-instance-attributes
    def __init__(self, path):
        self.path = path
        # one connection writes (and self._lock keeps a transaction whole on it); another
        # reads, under its own lock: a sqlite3 connection must not run two statements at
        # once (threads sharing one got "bad parameter or other API misuse"), and a reader
        # of the writing connection would see a group's rows before its COMMIT
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # every commit reaches the disk before the dump it records is deleted
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        if "line" not in {row[1] for row in self._db.execute("PRAGMA table_info(failures)")}:
            self._db.execute(FAILURES_LINE)
        row = self._db.execute("SELECT COALESCE(MAX(idx), -1) FROM samples").fetchone()
        self._next_idx = row[0] + 1
        self._read_lock = threading.Lock()
        self._reader = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._group = threading.Condition()
        self._queue = []
        self._committer = None   # the thread that commits groups, started on first use
        self._closing = False
        self.group_commits = 0   # transactions the group commit made (tests, benchmarks)

    def close(self):
        with self._group:
            self._closing = True
            self._group.notify_all()
        if self._committer is not None:
            self._committer.join()
        with self._lock, self._read_lock:
            self._reader.close()
            self._db.close()

    def _read(self, sql, params=()):
        with self._read_lock:
            return self._reader.execute(sql, params).fetchall()

    # -- identity ---------------------------------------------------------------

    def meta(self):
        return dict(self._read("SELECT key, value FROM meta"))

    def pin(self, **values):
        """Record identity values; raise if a recorded one differs."""
        with self._lock:  # the check and the insert in one hold: two pins cannot race
            have = dict(self._db.execute("SELECT key, value FROM meta"))
            for key, value in values.items():
                value = str(value)
                if key in have and have[key] != value:
                    raise ManifestMismatch(
                        f"{self.path} was made with {key}={have[key]!r}, this run has "
                        f"{key}={value!r}: use another output dir (or job name) for a "
                        "different dataset or shard")
            self._db.execute("BEGIN IMMEDIATE")
            self._db.executemany("INSERT OR IGNORE INTO meta (key, value) VALUES (?, ?)",
                                 [(k, str(v)) for k, v in values.items()])
            self._db.execute("COMMIT")

    # -- recovery ---------------------------------------------------------------

    def interrupted(self):
        """Rows a crash left in ``writing``: ``[(sample_id, path)]``."""
        return self._read("SELECT sample_id, path FROM samples WHERE state = 'writing'")

    def drop(self, sample_id):
        with self._lock:
            self._db.execute("DELETE FROM samples WHERE sample_id = ? AND state = 'writing'",
                             (sample_id,))

    def done_rows(self):
        """``[(sample_id, path)]`` of every ``done`` row."""
        return self._read("SELECT sample_id, path FROM samples WHERE state = 'done'")

    def undo_done(self, sample_id):
        """Forget a ``done`` row whose file is gone, so that its sample is extracted again."""
        with self._lock:
            self._db.execute("DELETE FROM samples WHERE sample_id = ? AND state = 'done'",
                             (sample_id,))

    # -- group commit -----------------------------------------------------------

    def submit(self, work, sync_dirs=()):
        """Queue ``work(db)`` for the next group transaction; returns a ticket to ``wait()`` on.

        One committer thread takes everything queued while it was busy and commits it
        in one transaction (one fsync of the WAL), after an fsync of each directory in
        the group's ``sync_dirs`` (one a directory a group, not one a file). Work runs
        in queue order, each in its own savepoint: one that raises is rolled back and
        raises in its own ``wait()`` only. If a directory fsync or the COMMIT fails,
        nothing of the group is committed and every ticket of it raises. A caller can
        do other work (load and check a dump) while its statement is being committed.
        """
        ticket = _Ticket(work, tuple(sync_dirs))
        with self._group:
            if self._closing:
                raise RuntimeError(f"{self.path} is closed")
            self._queue.append(ticket)
            if self._committer is None:
                self._committer = threading.Thread(target=self._commit_loop, daemon=True,
                                                   name="manifest-commit")
                self._committer.start()
            self._group.notify()
        return ticket

    def commit_grouped(self, work, sync_dirs=()):
        """``submit`` and wait: ``work``'s result once its transaction is durable."""
        return self.submit(work, sync_dirs).wait()

    def _commit_loop(self):
        while True:
            with self._group:
                while not self._queue and not self._closing:
                    self._group.wait()
                if not self._queue:
                    return
                batch, self._queue = self._queue, []
            self._commit_batch(batch)

    def _commit_batch(self, batch):
        try:
            for directory in sorted({d for t in batch for d in t.sync_dirs}):
                fsync_dir(directory)
            with self._lock:
                db = self._db
                db.execute("BEGIN IMMEDIATE")
                try:
                    for ticket in batch:
                        db.execute("SAVEPOINT one")
                        try:
                            ticket.result = ticket.work(db)
                        except Exception as exc:  # pylint: disable=broad-except
                            db.execute("ROLLBACK TO one")
                            ticket.error = exc
                        db.execute("RELEASE one")
                    db.execute("COMMIT")
                except BaseException:
                    if db.in_transaction:
                        db.execute("ROLLBACK")
                    raise
                self.group_commits += 1
        except BaseException as exc:  # pylint: disable=broad-except
            for ticket in batch:   # none of it is committed
                ticket.result = None
                if ticket.error is None:
                    ticket.error = exc
        finally:
            for ticket in batch:
                ticket.finished.set()

    # -- the write protocol -----------------------------------------------------

    def done_ids(self):
        return {r[0] for r in self._read("SELECT sample_id FROM samples WHERE state = 'done'")}

    def is_done(self, sample_id):
        rows = self._read("SELECT path FROM samples WHERE sample_id = ? AND state = 'done'",
                          (sample_id,))
        return rows[0][0] if rows else None

    def reserve(self, sample_id, relpath_for):
        """A new file index for a sample, committed as ``writing`` before any byte is written.

        Durable when this returns: a file or temporary file on disk always has a row
        that a resume finds (and an index is never given out twice)."""
        return self.reserve_async(sample_id, relpath_for).wait()

    def reserve_async(self, sample_id, relpath_for):
        """``reserve``, queued: ``.wait()`` gives ``(idx, relpath)`` once durable."""
        def insert(db):
            idx = self._next_idx   # only the committing thread runs this: no race
            relpath = relpath_for(idx)
            db.execute(
                "INSERT INTO samples (sample_id, idx, path, state) VALUES (?, ?, ?, 'writing')",
                (sample_id, idx, relpath))
            self._next_idx += 1
            return idx, relpath
        return self.submit(insert)

    def finish(self, sample_id, tokens, nbytes, sha256, sync_dir=None):
        """Mark a sample ``done``; durable when this returns.

        ``sync_dir``: the directory its file was linked into, fsync'ed before the
        commit (together with the other samples of the same group)."""
        def update(db):
            cur = db.execute(
                "UPDATE samples SET state = 'done', tokens = ?, bytes = ?, sha256 = ?, done_at = ? "
                "WHERE sample_id = ? AND state = 'writing'",
                (tokens, nbytes, sha256, time.time(), sample_id))
            if cur.rowcount != 1:
                raise RuntimeError(f"{sample_id} has no writing row to finish")
            db.execute("DELETE FROM failures WHERE sample_id = ?", (sample_id,))
        self.commit_grouped(update, (sync_dir,) if sync_dir else ())

    def record_failure(self, sample_id, reason, line=None):
        """``line``: the sample's line in the dataset (verify names the sample by it too)."""
        with self._lock:
            self._db.execute(
                "INSERT INTO failures (sample_id, attempts, reason, at, line) VALUES (?, 1, ?, ?, ?) "
                "ON CONFLICT(sample_id) DO UPDATE SET attempts = attempts + 1, "
                "reason = excluded.reason, at = excluded.at, line = excluded.line",
                (sample_id, reason, time.time(), line))

    def failures(self):
        return self._read("SELECT sample_id, attempts, reason, line FROM failures ORDER BY at")

    def failed_ids(self):
        return {row[0] for row in self._read("SELECT sample_id FROM failures")}

    def failed_count(self):
        """Samples not done whose last try failed (``finish`` removes a sample's failure)."""
        return self._read("SELECT COUNT(*) FROM failures")[0][0]

    def totals(self):
        row = self._read(
            "SELECT COUNT(*), COALESCE(SUM(tokens), 0), COALESCE(SUM(bytes), 0) "
            "FROM samples WHERE state = 'done'")[0]
        return {"samples": row[0], "tokens": row[1], "bytes": row[2]}


def open_manifest(output_dir):
    makedirs_durable(output_dir)
    return Manifest(os.path.join(output_dir, "manifest.sqlite"))
