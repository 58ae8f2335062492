# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The EAGLE-3 extraction job that runs next to one SGLang capture server.

It reads the dataset, keeps the samples of this host's shard, sends each one to
the local server (``max_new_tokens: 1``, rid ``<job>-<sample id>``), and drains
the dumps the capture writes into ``/dev/shm`` into SpecForge ``.ckpt`` files on
durable storage, recording each in a SQLite manifest before the dump is deleted.
A sample is done only when its file is durable and in the manifest.

Modules: ``names`` (ids, rids, file names), ``config`` (the job's JSON config),
``dataset`` (reading and sharding), ``chat`` (conversations through a chat
template), ``manifest`` (SQLite), ``drain`` (dump -> .ckpt), ``ckpt_file`` (the
.ckpt's bytes to the disk: hash, writeback, fsync), ``space`` (disk
estimates and watermarks), ``sender`` (HTTP), ``status`` (progress file and
dataset card), ``job`` (the whole run), ``cli`` (``python -m eagle3_extraction_job``).

The online mode's capture gateway (``gateway``: SpecForge's server-capture contract in
front of the same server) reuses them: ``capture_request`` (the request, checked),
``capture_store`` (a dump into the store, with the drain's checks), ``mooncake_writer``
(the Mooncake client), ``gateway_config``; ``online_reader`` reads SpecForge's ref channel on the
trainer's side without training (a CPU host, a test).
"""

# the wheel's version (pyproject.toml reads it): raise it with each release
__version__ = "0.4.0"
