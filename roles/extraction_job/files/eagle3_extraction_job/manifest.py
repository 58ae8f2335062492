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

``eagle3.extraction.extraction_verify`` reads the same tables (keep the column
names in step).
"""
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
    sample_id TEXT PRIMARY KEY, attempts INTEGER NOT NULL, reason TEXT NOT NULL, at REAL NOT NULL
);
"""


class ManifestMismatch(RuntimeError):
    """The output dir belongs to another job, shard or dataset."""


class Manifest:
    def __init__(self, path):
        self.path = path
        self._lock = threading.Lock()
        self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        self._db.execute("PRAGMA journal_mode=WAL")
        # every commit reaches the disk before the dump it records is deleted
        self._db.execute("PRAGMA synchronous=FULL")
        self._db.executescript(SCHEMA)
        row = self._db.execute("SELECT COALESCE(MAX(idx), -1) FROM samples").fetchone()
        self._next_idx = row[0] + 1

    def close(self):
        with self._lock:
            self._db.close()

    # -- identity ---------------------------------------------------------------

    def meta(self):
        return dict(self._db.execute("SELECT key, value FROM meta"))

    def pin(self, **values):
        """Record identity values; raise if a recorded one differs."""
        with self._lock:
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
        return list(self._db.execute(
            "SELECT sample_id, path FROM samples WHERE state = 'writing'"))

    def drop(self, sample_id):
        with self._lock:
            self._db.execute("DELETE FROM samples WHERE sample_id = ? AND state = 'writing'",
                             (sample_id,))

    # -- the write protocol -----------------------------------------------------

    def done_ids(self):
        return {r[0] for r in self._db.execute("SELECT sample_id FROM samples WHERE state = 'done'")}

    def is_done(self, sample_id):
        row = self._db.execute("SELECT path FROM samples WHERE sample_id = ? AND state = 'done'",
                               (sample_id,)).fetchone()
        return row[0] if row else None

    def reserve(self, sample_id, relpath_for):
        """A new file index for a sample, committed as ``writing`` before any byte is written."""
        with self._lock:
            idx = self._next_idx
            relpath = relpath_for(idx)
            self._db.execute(
                "INSERT INTO samples (sample_id, idx, path, state) VALUES (?, ?, ?, 'writing')",
                (sample_id, idx, relpath))
            self._next_idx += 1
            return idx, relpath

    def finish(self, sample_id, tokens, nbytes, sha256):
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            self._db.execute(
                "UPDATE samples SET state = 'done', tokens = ?, bytes = ?, sha256 = ?, done_at = ? "
                "WHERE sample_id = ? AND state = 'writing'",
                (tokens, nbytes, sha256, time.time(), sample_id))
            self._db.execute("DELETE FROM failures WHERE sample_id = ?", (sample_id,))
            self._db.execute("COMMIT")

    def record_failure(self, sample_id, reason):
        with self._lock:
            self._db.execute(
                "INSERT INTO failures (sample_id, attempts, reason, at) VALUES (?, 1, ?, ?) "
                "ON CONFLICT(sample_id) DO UPDATE SET attempts = attempts + 1, "
                "reason = excluded.reason, at = excluded.at",
                (sample_id, reason, time.time()))

    def failures(self):
        return list(self._db.execute("SELECT sample_id, attempts, reason FROM failures "
                                     "ORDER BY at"))

    def totals(self):
        row = self._db.execute(
            "SELECT COUNT(*), COALESCE(SUM(tokens), 0), COALESCE(SUM(bytes), 0) "
            "FROM samples WHERE state = 'done'").fetchone()
        return {"samples": row[0], "tokens": row[1], "bytes": row[2]}


def open_manifest(output_dir):
    os.makedirs(output_dir, mode=0o755, exist_ok=True)
    return Manifest(os.path.join(output_dir, "manifest.sqlite"))
