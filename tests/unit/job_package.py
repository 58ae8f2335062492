"""The extraction job's own modules for the unit tests of the controller side (verify, status,
repair), loaded from their source: the manifest's schema itself, not a copy of it. The job's
manifest module needs the standard library only, so the controller's venv loads it."""

from __future__ import annotations

import importlib.util
from pathlib import Path

JOB_PACKAGE = Path(__file__).resolve().parents[2] / 'roles' / 'extraction_job' / 'files' / 'eagle3_extraction_job'


def job_manifest():
    """The job's manifest module (eagle3_extraction_job/manifest.py)."""
    spec = importlib.util.spec_from_file_location('job_manifest', str(JOB_PACKAGE / 'manifest.py'))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
