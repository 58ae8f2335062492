# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""``python -m eagle3_extraction_job run --config FILE``."""
import sys

from eagle3_extraction_job.cli import main

sys.exit(main())
