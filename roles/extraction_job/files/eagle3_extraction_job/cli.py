# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Command line: ``python -m eagle3_extraction_job run --config /etc/eagle3-extraction/job.json``
(``gateway --config FILE``: the online mode's capture gateway, :mod:`eagle3_extraction_job.gateway`;
``gateway-check --config FILE``: its config, key file and libraries, as the role checks them;
``reader --config run.yaml``: the online mode's consumer that trains nothing, :mod:`eagle3_extraction_job.online_reader`).

Exit status: 0 every sample of the shard is done; 1 some are not (systemd restarts
the unit, and the restart resumes); 2 refused to start (bad config, not enough
space, another job's output dir, a refused API key): a restart would not help; 3 stalled (no
sample settled for the stall window: systemd restarts it, stall.py counts); 4 stalled past the
bound (stall_restarts_max): not restarted.
"""
import argparse
import logging
import os
import sys

from eagle3_extraction_job import chat, config, dataset, job, space


def main(argv=None):
    parser = argparse.ArgumentParser(prog="eagle3_extraction_job")
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="extract this host's shard (resumes)")
    run.add_argument("--config", required=True, help="the job's JSON config")
    check = sub.add_parser("check", help="check the config, the key file and the libraries; send nothing")
    check.add_argument("--config", required=True, help="the job's JSON config")
    serve = sub.add_parser("gateway", help="serve SpecForge's server-capture requests (online mode)")
    serve.add_argument("--config", required=True, help="the gateway's JSON config")
    serve_check = sub.add_parser("gateway-check", help="check the gateway's config, key file and "
                                                       "libraries (Mooncake's client); serve nothing")
    serve_check.add_argument("--config", required=True, help="the gateway's JSON config")
    read = sub.add_parser("reader", help="consume SpecForge's online ref channel, recording each sample (no training)")
    read.add_argument("--config", required=True, help="SpecForge's run.yaml")
    args = parser.parse_args(argv)
    if args.command == "gateway":
        from eagle3_extraction_job import gateway  # pylint: disable=import-outside-toplevel
        return gateway.main(["--config", args.config])
    if args.command == "reader":
        from eagle3_extraction_job import online_reader  # pylint: disable=import-outside-toplevel
        return online_reader.main(["--config", args.config])
    logging.basicConfig(level=logging.INFO, stream=sys.stdout,
                        format="%(asctime)s %(levelname)s %(message)s")
    log = logging.getLogger("eagle3_extraction_job")
    if args.command == "gateway-check":
        return check_gateway(args.config, log)
    try:
        cfg = config.load(args.config)
        api_key = config.read_api_key(cfg.api_key_file)
    except (OSError, config.ConfigError) as exc:
        log.error("refused to start: %s", exc)
        return job.EXIT_REFUSED
    if args.command == "check":
        return check_environment(cfg, log)
    import torch  # pylint: disable=import-outside-toplevel
    return job.Job(cfg, torch, api_key=api_key).run()


def tokenizer_problems(cfg, tokenizer_factory):
    """The tokenizer loaded as the run loads it, when the dataset has a conversation: one that
    cannot load (a hub name on a host without the hub, a dir without one) is refused here,
    before any unit starts, not found by the run."""
    if not dataset.has_conversations(cfg.dataset, cfg.dataset_format):
        return []
    try:
        tokenizer_factory(cfg.tokenizer_path or cfg.model_path,
                          assistant_header=cfg.chat_assistant_header, end_of_turn=cfg.chat_end_of_turn,
                          system_prompt=cfg.chat_system_prompt, max_length=cfg.max_length,
                          ignore_tokens=cfg.chat_ignore_tokens)
    except Exception as exc:  # pylint: disable=broad-except
        return [job.tokenizer_refusal(cfg, exc, "the dataset's conversation lines")]
    return []


def check_environment(cfg, log, tokenizer_factory=chat.ConversationTokenizer.from_pretrained):
    """What the unit needs before it can run: libraries, the dataset (and its tokenizer), an output
    dir on durable storage, the model's hidden size."""
    import importlib  # pylint: disable=import-outside-toplevel
    problems = []
    wanted = ["torch", "aiohttp"] + (["transformers"] if cfg.dataset_format != "tokenized" else [])
    for name in wanted:
        try:
            importlib.import_module(name)
        except ImportError as exc:
            if name != "transformers":
                problems.append(f"cannot import {name}: {exc}")
            else:
                log.warning("transformers missing: only pre-tokenized datasets will work")
    if not os.path.isfile(cfg.dataset):
        problems.append(f"dataset={cfg.dataset!r} is not a file")
    else:
        problems.extend(tokenizer_problems(cfg, tokenizer_factory))
    try:
        space.check_durable(cfg.output_dir)
    except space.NotDurable as exc:
        problems.append(str(exc))
    if not cfg.hidden_size:
        try:
            space.hidden_size_from_model(cfg.model_path)
        except (OSError, ValueError) as exc:
            problems.append(f"hidden size unknown: hidden_size is 0 and {exc}")
    for problem in problems:
        log.error("%s", problem)
    return job.EXIT_REFUSED if problems else 0


def check_gateway(path, log):
    """What the gateway's unit needs before it can serve: its config, its key file, and torch,
    aiohttp and Mooncake's client imported as the gateway imports them."""
    import importlib  # pylint: disable=import-outside-toplevel
    from eagle3_extraction_job import gateway_config  # pylint: disable=import-outside-toplevel
    try:
        config.read_api_key(gateway_config.load(path).api_key_file)
    except (OSError, config.ConfigError) as exc:
        log.error("refused: %s", exc)
        return job.EXIT_REFUSED
    problems = []
    for name in ("torch", "aiohttp", "mooncake.store"):
        try:
            importlib.import_module(name)
        except ImportError as exc:
            problems.append(f"cannot import {name}: {exc}")
    for problem in problems:
        log.error("%s", problem)
    return job.EXIT_REFUSED if problems else 0
