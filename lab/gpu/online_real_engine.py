"""Training while extracting on real SGLang (lab/gpu/online_real_engine.sh, issue 37). Subcommands:

  online    one online run against a running SGLang server with the capture on: a real Mooncake store
            (master and segment, tests/online/mooncake_processes.py), the capture gateway as its unit runs
            it (python -m eagle3_extraction_job gateway --config), SpecForge 0.2.0's producer and a consumer
            (SpecForge's own trainer, or the collection's reader), each its own process with the role's
            command (specforge train -c run.yaml --role producer|consumer). Timed from the producer's start
            to the consumer's exit; what the processes holding hidden states wrote to a disk
            (/proc/<pid>/io write_bytes: tmpfs is not counted there) and what the trainer wrote. One JSON line.
  vocab     SpecForge's vocabulary map of a conversations dataset for the draft config (lab/fixtures/online_fixture.py)
  dataset   the reader's records -> the files mode's dataset of the same token ids (r<index> ids)
  eval      SpecForge's own evaluator (Trainer.evaluate) on every checkpoint of some runs, one fixed eval
            set of files: a JSON line per checkpoint
  order     the files mode's features laid out (symlinks) so that SpecForge's offline trainer reads them in the
            order an online run's trainer read them: the two modes compared with the samples in one order
  steps     two trainings' step losses side by side: the same sample at each step shows as the same loss
  report    the tables (times, bytes, eval losses, their spreads) from the recorded JSON lines

Run with the kit's python; SpecForge's wheels, Mooncake's and the job's package on PYTHONPATH.
"""

import argparse
import gc
import glob
import json
import os
import re
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PACKAGE = os.path.join(ROOT, "roles", "extraction_job", "files")
# the store's processes, shared with the online tests (free ports, ended with the context)
sys.path[:0] = [os.path.join(ROOT, "tests", "online"), os.path.join(ROOT, "tests", "job")]
from process_writes import add_sample, by_group  # noqa: E402  pylint: disable=wrong-import-position
# the processes that hold hidden states (patterns on /proc/<pid>/cmdline): none may write them to a disk
HOLDERS = {"server": r"sglang\.launch_server|^sglang::", "gateway": r"eagle3_extraction_job gateway",
           "master": r"mooncake_master", "segment": r"mooncake_client"}
TRAINER = {"producer": r"--role producer", "consumer": r"--role consumer|eagle3_extraction_job reader"}
STEP_RE = re.compile(r"^step (\d+): ")


def emit(result, record=None):
    line = json.dumps(result)
    print(line, flush=True)
    if record:
        with open(record, "a", encoding="utf-8") as f:
            f.write(line + "\n")


def io_written(counters):
    """HOLDERS' and TRAINER's processes on this machine, sampled into ``counters`` (process_writes)."""
    groups = dict(HOLDERS, **TRAINER)
    sample = []
    for path in glob.glob("/proc/[0-9]*/cmdline"):
        pid = path.split("/")[2]
        try:
            with open(path, "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
            with open(f"/proc/{pid}/io", encoding="ascii") as f:
                written = next(int(line.split()[1]) for line in f if line.startswith("write_bytes"))
        except (OSError, StopIteration, ValueError):
            continue
        group = next((name for name, pattern in groups.items() if re.search(pattern, cmdline)), None)
        if group:
            sample.append((group, pid, written))
    return add_sample(counters, "local", sample, baseline=True)


GATEWAY_COUNTERS = ("prompts_served", "prompts_failed", "server_retries", "dumps_failed", "bytes_put")


def line_count(path):
    try:
        with open(path, encoding="utf-8") as f:
            return sum(1 for line in f if line.endswith("\n"))
    except FileNotFoundError:
        return 0


def dumps_in(path):
    """The dumps left in a dir (the capture's own files, its stats and its reserve, are not dumps)."""
    if not os.path.isdir(path):
        return []
    return [n for n in os.listdir(path) if not n.startswith(".") and not n.endswith(".json")]


def du(path):
    return sum(os.path.getsize(os.path.join(d, f)) for d, _s, fs in os.walk(path) for f in fs
               if not os.path.islink(os.path.join(d, f)))


def run_yaml(args, work, store):
    """SpecForge's run config as the online_training role writes it: its template (tests/online/run_config.py)
    with this run's paths, the watermarks from the role's own rule unless given, and the seed, which the role
    leaves to SpecForge (42) while the files mode's training here runs at ``--seed``: one key set on top."""
    sys.path.insert(0, os.path.join(ROOT, "plugins", "plugin_utils"))
    import online_training  # pylint: disable=import-outside-toplevel,import-error
    from run_config import render_run_yaml  # pylint: disable=import-outside-toplevel,import-error
    import yaml  # pylint: disable=import-outside-toplevel
    window = online_training.watermarks(args.segment_bytes, 0.5, args.max_length, args.hidden, args.layers,
                                        online_training.quantum(args.consumer, 1, [0]))
    attempt = os.path.join(work, "attempt-0001")
    text = render_run_yaml(
        {"aux_layer_ids": args.layers, "server_urls": [store["gateway_url"]],
         "master": {"metadata_server": store["metadata_server"],
                    "master_server_address": store["master_server_address"]},
         "environment": {"MOONCAKE_PROTOCOL": "tcp"}},
        work, {"high": args.high or window["high"], "low": args.low or window["low"]},
        {"control_dir": os.path.join(attempt, "control"),
         "consumer_state_dir": os.path.join(attempt, "consumer-state")},
        online_training_run_id=args.name, online_training_output_dir=os.path.join(work, "output"),
        online_training_target_model_path=args.model, online_training_draft_config=args.draft,
        online_training_vocab_mapping_path=args.vocab_mapping, online_training_dataset=args.dataset,
        online_training_max_length=args.max_length, online_training_chat_template="qwen",
        online_training_num_epochs=1, online_training_batch_size=1, online_training_learning_rate=args.lr,
        online_training_save_interval=args.save_interval, online_training_log_interval=1,
        online_training_attention_backend="sdpa", online_training_producer_lease=args.lease,
        online_training_gpus=[0])
    config = yaml.safe_load(text)
    config["training"]["seed"] = args.seed
    return config


def start_gateway(args, work, store):
    """The gateway as its unit runs it; returns (process, url) once /health answers."""
    from standin_process import free_port  # pylint: disable=import-outside-toplevel,import-error
    port = free_port()
    cfg = {"job": args.job, "server_url": args.server_url, "dump_dir": args.dump,
           "rejected_dir": os.path.join(work, "rejected"), "listen_host": "127.0.0.1", "listen_port": port,
           "layer_ids": args.layers, "hidden_size": args.hidden, "server_wait": args.server_wait,
           "api_key_file": args.api_key_file,
           "mooncake": {"local_hostname": "127.0.0.1", "metadata_server": store["metadata_server"],
                        "master_server_address": store["master_server_address"],
                        "local_buffer_size": args.buffer_bytes}}
    path = os.path.join(work, "gateway.json")
    with open(path, "w", encoding="utf-8") as f:
        json.dump(cfg, f)
    log = open(os.path.join(work, "gateway.log"), "w", encoding="utf-8")  # pylint: disable=consider-using-with
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([PACKAGE, os.environ.get("PYTHONPATH", "")]))
    proc = subprocess.Popen([sys.executable, "-m", "eagle3_extraction_job", "gateway", "--config", path],
                            env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    from online_stack import get_json  # pylint: disable=import-outside-toplevel,import-error
    deadline = time.time() + 120
    while time.time() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the gateway exited {proc.returncode}: see {log.name}")
        try:
            if get_json(url + "/health")[0] == 200:
                return proc, url
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the gateway never answered: see {log.name}")


def stop(proc, timeout=60):
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


def last_step(log):
    step = 0
    try:
        with open(log, encoding="utf-8", errors="replace") as f:
            for line in f:
                found = STEP_RE.match(line)
                step = int(found.group(1)) if found else step
    except FileNotFoundError:
        pass
    return step


def run_online(args):
    # pylint: disable=import-outside-toplevel,import-error
    import mooncake_processes
    from online_stack import get_json
    mooncake_processes.BIN = args.mooncake_bin
    mooncake_processes.SEGMENT = f"{args.segment_bytes >> 20} MB"
    mooncake_processes.SEGMENT_BYTES = args.segment_bytes
    work = os.path.abspath(args.work)
    os.makedirs(work, exist_ok=True)
    # unbuffered: a run cut short still leaves every line its processes printed (third lease: the producer's
    # log stopped 5 minutes before the call ended)
    env = dict(os.environ, PYTHONUNBUFFERED="1", MOONCAKE_LOCAL_HOSTNAME="127.0.0.1", MC_TCP_BIND_ADDRESS="127.0.0.1",
               MOONCAKE_PROTOCOL="tcp", MOONCAKE_GLOBAL_SEGMENT_SIZE="0",
               MOONCAKE_LOCAL_BUFFER_SIZE=str(args.buffer_bytes), NO_PROXY="127.0.0.1,localhost",
               PYTHONPATH=os.pathsep.join([PACKAGE, os.environ.get("PYTHONPATH", "")]))
    counters = {}
    with mooncake_processes.mooncake_store(work) as store:
        env.update(MOONCAKE_METADATA_SERVER=store["metadata_server"],
                   MOONCAKE_MASTER_SERVER_ADDR=store["master_server_address"])
        gateway, store["gateway_url"] = start_gateway(args, work, store)
        config = run_yaml(args, work, store)
        config_path = os.path.join(work, "run.yaml")
        with open(config_path, "w", encoding="utf-8") as f:
            json.dump(config, f, indent=1)   # JSON is YAML
        io_written(counters)
        python = args.trainer_python or sys.executable
        consumer_cmd = ([python, "-m", "eagle3_extraction_job", "reader", "--config", config_path]
                        if args.consumer == "reader" else
                        [python, "-m", "specforge.cli", "train", "-c", config_path, "--role", "consumer"])
        logs = {name: open(os.path.join(work, f"{name}.log"), "w", encoding="utf-8")  # pylint: disable=consider-using-with
                for name in ("producer", "consumer")}
        started = time.time()
        producer = subprocess.Popen([python, "-m", "specforge.cli", "train", "-c", config_path,
                                     "--role", "producer"], env=env, stdout=logs["producer"], stderr=subprocess.STDOUT)
        consumer = subprocess.Popen(consumer_cmd, env=env, stdout=logs["consumer"], stderr=subprocess.STDOUT)
        print(f"INFO online {args.name}: producer {producer.pid}, consumer {consumer.pid}, "
              f"logs in {work}", flush=True)
        deadline = started + args.timeout
        try:
            # a producer that failed ends the attempt (SpecForge never resumes one)
            while consumer.poll() is None and producer.poll() in (None, 0) and time.time() < deadline:
                io_written(counters)
                time.sleep(1)
            consumer_rc = consumer.poll()
            seconds = time.time() - started
            try:
                producer_rc = producer.wait(max(1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                producer_rc = None
            io_written(counters)
            gateway_status = get_json(store["gateway_url"] + "/status")[1]
        finally:
            stop(consumer)
            stop(producer)
            stop(gateway)
            for log in logs.values():
                log.close()
    control = config["deployment"]["disaggregated"]["control_dir"]
    result = {"online": {
        "name": args.name, "consumer": args.consumer, "consumer_rc": consumer_rc, "producer_rc": producer_rc,
        "seconds": round(seconds, 2), "steps": last_step(os.path.join(work, "consumer.log")),
        "done": os.path.exists(os.path.join(control, "refs.jsonl.consumer_done")),
        "failed": [m for m in (".failed", ".consumer_failed") if os.path.exists(os.path.join(control, "refs.jsonl" + m))],
        "refs": line_count(os.path.join(control, "refs.jsonl")),
        # the gateway's counters: prompts served and failed (a failed row: the producer leases it again), and its
        # tries of a prompt while its server was down (a restart)
        "gateway": {k: gateway_status.get(k) for k in GATEWAY_COUNTERS},
        "holders_write_bytes": by_group(counters, HOLDERS),
        "trainer_write_bytes": by_group(counters, TRAINER),
        "checkpoint_bytes": du(os.path.join(work, "output")),
        "dumps_left": len(dumps_in(args.dump)),
        "rejected": len(dumps_in(os.path.join(work, "rejected"))),
        "window": config["runtime"],
    }}
    emit(result, args.record)
    ok = consumer_rc == 0 and producer_rc == 0 and result["online"]["done"] and not result["online"]["failed"]
    return 0 if ok else 1


def run_dataset(args):
    """The files mode's dataset made of the token ids the reader consumed, one line a record."""
    with open(args.records, encoding="utf-8") as f:
        records = [json.loads(line) for line in f]
    with open(args.out, "w", encoding="utf-8") as out:
        for index, record in enumerate(records):
            ids = record["input_ids"]
            out.write(json.dumps({"id": "r%05d" % index, "input_ids": ids, "loss_mask": [1] * len(ids)}) + "\n")
    print(f"INFO dataset: {len(records)} records -> {args.out}")
    return 0


def run_vocab(args):
    sys.path.insert(0, os.path.join(ROOT, "lab", "fixtures"))
    from online_fixture import write_vocab_mapping  # pylint: disable=import-outside-toplevel,import-error
    with open(args.draft, encoding="utf-8") as f:
        draft = json.load(f)
    with open(args.dataset, encoding="utf-8") as f:
        chats = [json.loads(line)["conversations"] for line in f if line.strip()]
    write_vocab_mapping(args.model, chats, args.out, draft["draft_vocab_size"], draft["vocab_size"])
    print(f"INFO vocab: {len(chats)} conversations -> {args.out}")
    return 0


def checkpoints(run_dir, run_id):
    found = []
    for path in glob.glob(os.path.join(run_dir, f"{run_id}-step*")):
        step = re.fullmatch(re.escape(run_id) + r"-step(\d+)", os.path.basename(path))
        if step and os.path.isdir(path):
            found.append((int(step.group(1)), path))
    return sorted(found)


def run_eval(args):
    """Each run's checkpoints through SpecForge's own offline evaluator, on the same eval set, in one process.
    With --until, beside the trainings: a checkpoint is evaluated once complete (its training_state.pt is
    renamed into place last), until that file exists and none is left; with --delete, each is deleted once
    evaluated (a 7168-wide draft's checkpoint, optimizer state included, is about 10 GB: five of them a run
    would fill the GPU machine's disk)."""
    # pylint: disable=import-outside-toplevel
    import shutil
    import torch
    from specforge.application import build_application_run
    from specforge.cli import _bootstrap_single_process_env
    from specforge.config import load_config
    from specforge.distributed import destroy_distributed, init_distributed

    specs = [spec.split(":", 2) for spec in args.runs]
    done = set()

    def pending():
        return [(label, step, path) for label, run_dir, run_id in specs for step, path in checkpoints(run_dir, run_id)
                if (label, step) not in done and os.path.exists(os.path.join(path, "training_state.pt"))]

    _bootstrap_single_process_env()
    init_distributed(timeout=20, tp_size=1, sp_ulysses_size=1, sp_ring_size=1)
    rc = 0
    try:
        while True:
            todo = pending()
            if not todo:
                if not args.until or os.path.exists(args.until) and not pending():
                    break
                time.sleep(2)
                continue
            for label, step, path in todo:
                time.sleep(1)   # the latest link and the rotation follow the state file
                cfg = load_config(args.config, [f"model.draft_checkpoint_path={path}"])
                run = build_application_run(cfg)
                metrics = run.trainer.evaluate()
                loss = metrics.get("eval/avg_loss")
                emit({"eval": {"run": label, "step": step, "loss": float(loss) if loss is not None else None,
                               "acc": float(metrics.get("eval/avg_acc", float("nan")))}}, args.record)
                rc |= loss is None
                done.add((label, step))
                del run, metrics
                gc.collect()
                torch.cuda.empty_cache()
                if args.delete:
                    shutil.rmtree(path)
    finally:
        destroy_distributed()
    return rc


def run_order(args):
    """The online run's trainer read the refs in the order its producer committed them (refs.jsonl, append-only),
    which its lease batches and the server's timing decide; SpecForge's offline trainer reads the sorted feature
    files in torch.randperm(seed + epoch) order. Symlinks to the files mode's .ckpt files, named so that the
    offline trainer's k-th sample is the online trainer's k-th: SpecForge's own listing and shuffle, read back,
    prove it. A ref names no prompt (its task id is random): it is matched by its token count (the prompts'
    lengths are distinct but for a few), a tie given in the producer's own order (random.Random(seed + epoch))."""
    # pylint: disable=import-outside-toplevel,import-error
    import sqlite3
    from specforge.launch import _distributed_sampler_indices, _epoch_prompt_indices
    from specforge.runtime.data_plane.offline_reader import list_feature_files
    with open(args.refs, encoding="utf-8") as f:
        refs = [json.loads(line) for line in f if line.strip()]
    with open(args.dataset, encoding="utf-8") as f:
        ids = [json.loads(line)["id"] for line in f if line.strip()]
    out_dir = os.path.dirname(os.path.abspath(args.manifest))
    with sqlite3.connect(f"file:{args.manifest}?mode=ro", uri=True) as db:
        files = {sid: (os.path.join(out_dir, path), tokens) for sid, path, tokens in
                 db.execute("SELECT sample_id, path, tokens FROM samples WHERE state = 'done'")}
    producer = [ids[i] for i in _epoch_prompt_indices(ids, 0, seed=args.seed)]
    order, ties = [], 0
    for ref in refs:
        matches = [sid for sid in producer if sid not in order and files[sid][1] == ref["num_tokens"]]
        if not matches:
            print(f"FAIL no file of {ref['num_tokens']} tokens left for ref {ref['sample_id']}")
            return 1
        ties += len(matches) > 1
        order.append(matches[0])
    if len(order) != len(ids):
        print(f"FAIL {len(order)} refs for {len(ids)} prompts")
        return 1
    perm = _distributed_sampler_indices(len(order), dp_rank=0, dp_size=1, seed=args.seed, epoch=0)
    os.makedirs(args.out)
    for position, sid in zip(perm, order):
        os.symlink(files[sid][0], os.path.join(args.out, f"order_{position:05d}.ckpt"))
    listed = list_feature_files(args.out)
    read = [os.path.realpath(listed[i]) for i in perm]
    same = read == [os.path.realpath(files[sid][0]) for sid in order]
    emit({"order": {"samples": len(order), "ties": ties, "as_produced": sum(a == b for a, b in zip(order, producer)),
                    "offline_reads_online_order": same}}, args.record)
    return 0 if same else 1


def step_losses(log):
    losses = {}
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            step = STEP_RE.match(line)
            loss = re.search(r"'loss': ([-0-9.e]+)", line)
            if step and loss:
                losses[int(step.group(1))] = float(loss.group(1))
    return losses


def run_steps(args):
    """Two trainings' losses step by step: with one sample order, each step's loss is that sample's (the weights
    barely differ between the runs), so the steps whose losses agree show the order was the same."""
    (label_a, log_a), (label_b, log_b) = (spec.split(":", 1) for spec in (args.a, args.b))
    a, b = step_losses(log_a), step_losses(log_b)
    common = sorted(set(a) & set(b))
    gaps = [abs(a[s] - b[s]) / max(abs(a[s]), 1e-9) for s in common]
    within = sum(gap <= args.rel for gap in gaps)
    apart = [step for step, gap in zip(common, gaps) if gap > args.rel]
    emit({"steps": {"a": label_a, "b": label_b, "steps": len(common), "within": within, "rel": args.rel,
                    "first_apart": apart[:10],
                    "largest_rel_gap": round(max(gaps, default=float("nan")), 6),
                    "first_five": [[round(a[s], 4), round(b[s], 4)] for s in common[:5]]}}, args.record)
    return 0 if common and within == len(common) else 1


def run_report(args):
    with open(args.record, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    evals = {}
    for row in rows:
        if "eval" in row:
            evals.setdefault(row["eval"]["run"], {})[row["eval"]["step"]] = row["eval"]["loss"]
    runs = sorted(evals)
    steps = sorted(set().union(*(set(v) for v in evals.values()))) if evals else []
    print("| step | " + " | ".join(f"{r}: eval loss" for r in runs) + " |")
    print("| ---: |" + " ---: |" * len(runs))
    for step in steps:
        print(f"| {step} | " + " | ".join(f"{evals[r][step]:.4f}" if step in evals[r] else "-" for r in runs) + " |")
    rc = 0
    for pair in args.pairs:
        a, b, limit = (pair.split(",") + [None])[:3]
        common = [s for s in steps if s in evals.get(a, {}) and s in evals.get(b, {})]
        spread = max((abs(evals[a][s] - evals[b][s]) for s in common), default=float("nan"))
        verdict = ""
        if limit is not None:
            ok = bool(common) and spread <= float(limit)
            verdict = f" ({'within' if ok else 'NOT within'} {limit})"
            rc |= not ok
        print(f"INFO eval loss, {a} vs {b}: largest gap {spread:.4f} over steps {common}{verdict}")
    return rc


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    online = sub.add_parser("online")
    online.add_argument("--name", required=True)
    online.add_argument("--work", required=True)
    online.add_argument("--job", default="onl", help="the gateway's rid prefix (the job's name)")
    online.add_argument("--model", required=True)
    online.add_argument("--draft", required=True)
    online.add_argument("--vocab-mapping", required=True)
    online.add_argument("--dataset", required=True)
    online.add_argument("--server-url", required=True)
    online.add_argument("--dump", required=True)
    online.add_argument("--layers", type=lambda s: [int(x) for x in s.split(",")], required=True)
    online.add_argument("--hidden", type=int, required=True)
    online.add_argument("--consumer", choices=("specforge", "reader"), default="specforge")
    online.add_argument("--lease", type=int, default=8)
    online.add_argument("--high", type=int, default=0)
    online.add_argument("--low", type=int, default=0)
    online.add_argument("--segment-bytes", type=int, default=8 << 30)
    online.add_argument("--buffer-bytes", type=int, default=1 << 30)
    online.add_argument("--max-length", type=int, default=2048)
    online.add_argument("--lr", type=float, default=1e-3)
    online.add_argument("--seed", type=int, default=0)
    online.add_argument("--save-interval", type=int, default=25)
    online.add_argument("--server-wait", type=float, default=120.0)
    online.add_argument("--api-key-file", default="", help="the server's API key (a 0600 file), if it has one")
    online.add_argument("--mooncake-bin", required=True)
    online.add_argument("--trainer-python", default="", help="the producer's and consumer's (default: this one)")
    online.add_argument("--timeout", type=float, default=480)
    online.add_argument("--record")
    dataset = sub.add_parser("dataset")
    dataset.add_argument("--records", required=True)
    dataset.add_argument("--out", required=True)
    vocab = sub.add_parser("vocab")
    vocab.add_argument("--model", required=True)
    vocab.add_argument("--dataset", required=True)
    vocab.add_argument("--draft", required=True)
    vocab.add_argument("--out", required=True)
    evaluate = sub.add_parser("eval")
    evaluate.add_argument("--config", required=True, help="an offline run config whose eval set is the fixed one")
    evaluate.add_argument("--runs", nargs="+", required=True, help="LABEL:OUTPUT_DIR:RUN_ID ...")
    evaluate.add_argument("--record")
    evaluate.add_argument("--until", help="evaluate checkpoints as they come until this file exists")
    evaluate.add_argument("--delete", action="store_true", help="delete each checkpoint once evaluated")
    order = sub.add_parser("order")
    order.add_argument("--refs", required=True, help="the online run's refs.jsonl (its trainer's read order)")
    order.add_argument("--dataset", required=True, help="the prompts both modes ran (their ids, in order)")
    order.add_argument("--manifest", required=True, help="the files mode's manifest.sqlite")
    order.add_argument("--seed", type=int, default=0)
    order.add_argument("--out", required=True, help="a new directory: the symlinks")
    order.add_argument("--record")
    steps = sub.add_parser("steps")
    steps.add_argument("--a", required=True, help="LABEL:LOG")
    steps.add_argument("--b", required=True, help="LABEL:LOG")
    steps.add_argument("--rel", type=float, default=0.01, help="the relative gap within which a step agrees")
    steps.add_argument("--record")
    report = sub.add_parser("report")
    report.add_argument("--record", required=True)
    report.add_argument("--pairs", nargs="*", default=[], help="A,B[,LIMIT]: the largest eval-loss gap of two runs")
    args = parser.parse_args()
    return {"online": run_online, "vocab": run_vocab, "dataset": run_dataset, "eval": run_eval,
            "order": run_order, "steps": run_steps, "report": run_report}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
