# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Job names, sample ids, request ids and the file names the capture gives them.

The capture names a dump after its rid, keeping ``A-Za-z0-9-_.`` and
percent-encoding the rest (and a leading dot). A job name without ``-`` and a
sample id that starts with neither ``.`` nor ``-`` and uses only those
characters therefore give exactly ``<job>-<id>.pt``, and the first ``-`` of a
dump's name separates the job from the id: no decoding, no ambiguity.
"""
import re

JOB_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.]{0,63}")
SAMPLE_ID_MAX = 128
SAMPLE_ID_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9._-]{0,%d}" % (SAMPLE_ID_MAX - 1))
DUMP_SUFFIX = ".pt"


def valid_job(name):
    return isinstance(name, str) and JOB_RE.fullmatch(name) is not None


def valid_sample_id(sample_id):
    return isinstance(sample_id, str) and SAMPLE_ID_RE.fullmatch(sample_id) is not None


def rid_for(job, sample_id):
    return f"{job}-{sample_id}"


def dump_name_for(job, sample_id):
    return rid_for(job, sample_id) + DUMP_SUFFIX


def sample_id_from_dump(job, name):
    """The sample id a complete dump of ``job`` holds, or ``None`` for any other file.

    Temporary files (``*.pt.<pid>.<tag>.tmp``), the capture's own files
    (``CAPTURE_STATS.json``, ``CAPTURE_ERROR.txt``), dot-files and other jobs'
    dumps all give ``None``.
    """
    if name.startswith(".") or not name.endswith(DUMP_SUFFIX):
        return None
    stem = name[: -len(DUMP_SUFFIX)]
    prefix = job + "-"
    if not stem.startswith(prefix):
        return None
    sample_id = stem[len(prefix):]
    return sample_id if valid_sample_id(sample_id) else None


def ckpt_relpath(idx):
    """SpecForge's layout: ``rows_<g>-<g+2000>/data_<idx>.ckpt``."""
    group = idx // 2000 * 2000
    return f"rows_{group}-{group + 2000}/data_{idx}.ckpt"
