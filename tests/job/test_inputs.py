# Copyright: eagle3.extraction contributors
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Names, the dataset reader, sharding, the config and the space arithmetic."""
import json
import os
import subprocess
import sys

import pytest

from job_helpers import CAPTURE, make_samples, write_dataset
from eagle3_extraction_job import config, dataset, names, space


@pytest.mark.parametrize("sample_id", ["s1", "a.b-c_d", "_x", "0", "A" * 128, "x-" * 5])
def test_dump_name_is_the_captures_name_for_every_valid_id(sample_id):
    rid = names.rid_for("job_1.v2", sample_id)
    assert names.dump_name_for("job_1.v2", sample_id) == CAPTURE.file_name_for(rid)
    assert names.sample_id_from_dump("job_1.v2", CAPTURE.file_name_for(rid)) == sample_id


@pytest.mark.parametrize("sample_id", [".hidden", "-lead", "a b", "a/b", "é", "", "A" * 129,
                                       "a\nb", None, 5])
def test_ids_that_would_be_renamed_by_the_capture_are_refused(sample_id):
    assert not names.valid_sample_id(sample_id)


@pytest.mark.parametrize("job", ["a-b", ".x", "", "x" * 65, "a b"])
def test_job_names_with_a_dash_or_odd_characters_are_refused(job):
    assert not names.valid_job(job)


@pytest.mark.parametrize("name", ["job-s1.pt.123.abcd1234.tmp", "CAPTURE_STATS.json",
                                  "CAPTURE_ERROR.txt", ".capture-error.reserve", "other-s1.pt",
                                  "job-s1.pt.bak", "job-.pt", "jobx-s1.pt", ".job-s1.pt"])
def test_only_complete_dumps_of_this_job_are_recognised(name):
    assert names.sample_id_from_dump("job", name) is None


def test_ckpt_layout_is_specforges():
    assert names.ckpt_relpath(0) == "rows_0-2000/data_0.ckpt"
    assert names.ckpt_relpath(1999) == "rows_0-2000/data_1999.ckpt"
    assert names.ckpt_relpath(2000) == "rows_2000-4000/data_2000.ckpt"


def test_bad_lines_are_reported_with_line_and_id_and_good_lines_go_on(tmp_path):
    good = make_samples(3)
    path = write_dataset(tmp_path / "d.jsonl", good[:1], extra_lines=[
        "{not json",
        json.dumps({"id": "bad-mask", "input_ids": [1, 2], "loss_mask": [1]}),
        json.dumps({"id": "neg", "input_ids": [1, -2], "loss_mask": [0, 1]}),
        json.dumps({"id": "mask2", "input_ids": [1, 2], "loss_mask": [0, 2]}),
        json.dumps({"id": "../etc", "input_ids": [1], "loss_mask": [1]}),
        json.dumps({"input_ids": [1], "loss_mask": [1]}),
        "",
        json.dumps({"id": good[0][0], "input_ids": [1], "loss_mask": [1]}),
        json.dumps({"id": good[1][0], "input_ids": good[1][1], "loss_mask": good[1][2]}),
        json.dumps({"id": "chat", "conversations": [{"role": "user", "content": "hi"}]}),
    ])
    scan = dataset.scan(str(path))
    bad = {(b.line, b.sample_id): b.reason for b in scan.bad_lines}
    assert set(bad) == {(2, None), (3, "bad-mask"), (4, "neg"), (5, "mask2"), (6, "../etc"),
                        (7, None), (9, good[0][0])}
    assert "first on line 1" in bad[(9, good[0][0])]
    assert "loss_mask 1" in bad[(3, "bad-mask")]
    assert [s.sample_id for s in scan.samples] == [good[0][0], good[1][0], "chat"]
    assert scan.samples[1].input_ids.tolist() == good[1][1]
    assert scan.samples[2].conversations is not None
    assert scan.dataset_samples == 3
    with open(path, "rb") as f:
        import hashlib
        assert scan.sha256 == hashlib.sha256(f.read()).hexdigest()
    assert str(scan.bad_lines[1]).startswith("line 3 (id 'bad-mask'):")


def test_a_line_nested_too_deep_is_a_bad_line_not_a_crash(tmp_path):
    # before: RecursionError out of the scan, at every start of the job: the shard was never done
    good = make_samples(2)
    deep = "[" * 100000 + "]" * 100000
    path = write_dataset(tmp_path / "d.jsonl", good[:1], extra_lines=[
        deep, '{"id": "deep", "input_ids": ' + deep + ', "loss_mask": [1]}',
        '{"id": ' + deep + "}",
        json.dumps({"id": good[1][0], "input_ids": good[1][1], "loss_mask": good[1][2]})])
    scan = dataset.scan(str(path))
    assert [(b.line, b.sample_id, b.reason) for b in scan.bad_lines] == [
        (2, None, "nested too deep to read as JSON"), (3, "deep", "nested too deep to read as JSON"),
        (4, None, "nested too deep to read as JSON")]
    assert [s.sample_id for s in scan.samples] == [good[0][0], good[1][0]]


def test_a_bad_lines_id_is_named_whole_or_says_it_was_cut_and_how_long_it_is(tmp_path):
    # an id of up to 128 characters (the longest a sample id may be) is named whole, not cut at
    # 80 where two ids that differ past there read the same; a longer one says it was cut
    long_ok = "x" * 100 + "-mask"
    too_long = "y" * 300
    path = write_dataset(tmp_path / "d.jsonl", [], extra_lines=[
        json.dumps({"id": long_ok, "input_ids": [1, 2], "loss_mask": [1]}),
        json.dumps({"id": too_long, "input_ids": [1], "loss_mask": [1]})])
    shown = [str(bad) for bad in dataset.scan(str(path)).bad_lines]
    assert shown[0].startswith(f"line 1 (id {long_ok!r}): input_ids has 2 tokens")
    assert shown[1].startswith(f"line 2 (id {'y' * 128!r}..., cut: 300 characters): id must match")


def test_shards_partition_the_dataset_and_are_stable(tmp_path):
    samples = make_samples(300)
    path = write_dataset(tmp_path / "d.jsonl", samples)
    seen = []
    for index in range(3):
        seen += [s.sample_id for s in dataset.scan(str(path), index, 3).samples]
    assert sorted(seen) == sorted(s[0] for s in samples)
    sizes = [len(dataset.scan(str(path), i, 3).samples) for i in range(3)]
    assert min(sizes) > 60   # roughly even
    # pinned values: a change of hash would silently move samples between hosts on re-run
    assert [dataset.shard_of(f"s{n:05d}", 3) for n in range(8)] == [2, 2, 0, 2, 2, 2, 2, 2]
    assert dataset.shard_of("s00000", 1000003) == int.from_bytes(
        __import__("hashlib").sha256(b"s00000").digest()[:8], "big") % 1000003


SHARD_HOST = os.path.join(os.path.dirname(os.path.abspath(__file__)), "shard_host.py")


def run_shard_host(path, index, count, hash_seed):
    """One shard as its host reads the dataset: a process of its own with its own hash seed."""
    env = dict(os.environ, PYTHONHASHSEED=str(hash_seed))
    done = subprocess.run([sys.executable, SHARD_HOST, str(path), str(index), str(count)], env=env,
                          capture_output=True, text=True, timeout=120, check=True)
    return json.loads(done.stdout)


def test_each_bad_line_belongs_to_one_shard_whatever_each_hosts_hash_seed(tmp_path):
    # every host has its own hash seed: a rule made of Python's hash() agrees with itself in one
    # process, so the shards must be read in processes of their own, as the hosts read them
    bad = [json.dumps({"id": f"bad-{n}", "input_ids": [1, 2], "loss_mask": [1]}) for n in range(24)]
    bad += [json.dumps({"id": n, "input_ids": [1], "loss_mask": [2]}) for n in range(6)]
    bad += ["{no id at all"]
    path = write_dataset(tmp_path / "d.jsonl", make_samples(30), extra_lines=bad)
    lines = range(31, 31 + len(bad))
    runs = [[run_shard_host(path, index, 3, seed) for index, seed in enumerate(seeds)]
            for seeds in ((1, 2, 3), (4, 5, 6))]
    for shards in runs:
        counted = sorted(line for shard in shards for line in shard["bad_lines"])
        assert counted == list(lines)   # every bad line, by exactly one shard
    # and by the same shard on other hosts (other seeds), as its samples are
    assert runs[0] == runs[1]


def test_config_rejects_bad_values_naming_key_and_value(tmp_path):
    base = dict(job="j", dataset="/d.jsonl", output_dir="/out/h", dump_dir="/dev/shm/x",
                server_url="http://127.0.0.1:30000")
    assert config.from_dict(base).server_url == "http://127.0.0.1:30000"
    # no default port to fall back on: a config without the server's URL is refused
    with pytest.raises(config.ConfigError, match="missing keys in the config: server_url"):
        config.from_dict({k: v for k, v in base.items() if k != "server_url"})
    cases = [({"job": "a-b"}, "job='a-b'"), ({"shard_index": 3, "shard_count": 3}, "shard_index=3"),
             ({"output_dir": "rel"}, "output_dir='rel'"), ({"shm_low": 0.9}, "shm_low=0.9"),
             ({"concurrency": 0}, "concurrency=0"), ({"request_timeout": float("nan")}, "nan"),
             ({"dataset": "/a\nb"}, "dataset="), ({"server_url": "ftp://x"}, "server_url"),
             ({"server_url": ""}, "server_url='': required: the URL of the server"),
             ({"output_dir": "/dev/shm/x"}, "output_dir"), ({"nope": 1}, "unknown keys in the config: nope"),
             ({"chat_ignore_tokens": [""]}, "chat_ignore_tokens"),
             ({"chat_ignore_tokens": "<think>"}, "chat_ignore_tokens"),
             ({"metrics_dir": "metrics"}, "metrics_dir='metrics': expected an absolute path"),
             ({"metrics_dir": "/var/lib/node\nexporter"}, "metrics_dir=")]
    for over, text in cases:
        with pytest.raises(config.ConfigError, match=text.replace("(", r"\(")):
            config.from_dict({**base, **over})


def test_api_key_file_must_be_private(tmp_path):
    key = tmp_path / "key"
    key.write_text("s3cret\n")
    os.chmod(key, 0o644)
    with pytest.raises(config.ConfigError, match="lets others read it") as err:
        config.read_api_key(str(key))
    assert "s3cret" not in str(err.value)
    os.chmod(key, 0o600)
    assert config.read_api_key(str(key)) == "s3cret"


def test_space_refusal_gives_the_numbers(tmp_path):
    bpt = space.bytes_per_token(7168, 3)
    assert bpt == 57344 + 16
    with pytest.raises(space.NotEnoughSpace) as err:
        space.check_fits(str(tmp_path), 37312, 87_800_000, 7168, 3, 0.1, 0)
    text = str(err.value)
    assert "37,312 samples" in text and "87,800,000 tokens" in text and "57,360 bytes" in text
    need, _free = space.check_fits(str(tmp_path), 1, 10, 16, 3, 0.1, 0)
    assert need == 10 * space.bytes_per_token(16, 3) + space.FILE_OVERHEAD


MOUNTINFO = """\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw
25 24 0:23 / /dev/shm rw,relatime - tmpfs tmpfs rw
40 27 0:40 / /srv/fast rw,relatime - tmpfs tmpfs rw
41 40 254:1 / /srv/fast/disk rw,relatime - xfs /dev/vdb rw
42 27 0:41 / /mnt/my\\040data rw,relatime - ramfs ramfs rw
"""


@pytest.mark.parametrize("path, kind", [
    ("/srv/out", "ext4"), ("/dev/shm/out/x", "tmpfs"), ("/srv/fast/x", "tmpfs"), ("/srv/fast/disk/x", "xfs"),
    ("/srv/fastx", "ext4"), ("/mnt/my data/out", "ramfs")])
def test_the_filesystem_of_a_path_is_its_longest_mount_point(tmp_path, path, kind):
    table = tmp_path / "mountinfo"
    table.write_text(MOUNTINFO)
    assert space.filesystem_type(path, mountinfo=str(table)) == kind


def test_an_output_dir_in_memory_is_refused(tmp_path):
    # an output root on any tmpfs: lost on reboot (the roles refuse /dev/shm and /run by name; this, any tmpfs)
    with pytest.raises(space.NotDurable, match="output_dir='/x/out' is on a tmpfs"):
        space.check_durable("/x/out", fs_type=lambda _p: "tmpfs")
    space.check_durable("/x/out", fs_type=lambda _p: "ext4")
    space.check_durable("/x/out", fs_type=lambda _p: None)


@pytest.mark.parametrize("size, text", [
    (0, "0 bytes"), (900, "900 bytes"), (4096, "4.0 KiB"), (150 * 2**20, "150.0 MiB"),
    (int(2.5 * 2**30), "2.5 GiB"), (3 * 2**40, "3.0 TiB"), (12_345 * 2**40, "12,345.0 TiB")])
def test_a_size_is_said_in_a_unit_that_shows_it(size, text):
    assert space.size_text(size) == text


def test_space_messages_say_small_sizes_in_a_unit_that_shows_them(tmp_path):
    # before: every size in GiB, one decimal: "0.0 GiB free, under the 0.0 GiB floor"
    def usage(path):   # the output disk nearly full, /dev/shm nearly empty
        return space.Usage(total=2**30, free=40 * 2**20 if path != "shm" else 2**30)
    with pytest.raises(space.NotEnoughSpace) as err:
        space.check_fits(str(tmp_path), 3, 10_000, 16, 3, 0.1, 64 * 2**20, usage_fn=usage)
    text = str(err.value)
    assert "0.0 GiB" not in text
    assert "= 1.4 MiB; with a 10% margin and the 64.0 MiB floor that is 65.5 MiB" in text, text
    assert text.endswith("has 40.0 MiB free")
    gate = space.Gate("shm", "out", 0.7, 0.5, 64 * 2**20, 96 * 2**20, usage_fn=usage)
    assert not gate.update() and gate.closed_reason == "output disk full: out: 40.0 MiB free, under the 64.0 MiB floor"


def test_gate_has_hysteresis():
    readings = {"shm": space.Usage(100, 50), "out": space.Usage(1000, 900)}
    gate = space.Gate("shm", "out", 0.7, 0.5, 100, 200,
                      usage_fn=lambda p: readings[p])
    assert gate.update()
    readings["shm"] = space.Usage(100, 25)        # 75 % used
    assert not gate.update() and "high watermark" in gate.closed_reason
    readings["shm"] = space.Usage(100, 40)        # 60 %: still above the low watermark
    assert not gate.update()
    readings["shm"] = space.Usage(100, 55)        # 45 %
    assert gate.update()
    readings["out"] = space.Usage(1000, 50)       # under the floor
    assert not gate.update() and "floor" in gate.closed_reason
    readings["out"] = space.Usage(1000, 150)      # above the floor, under resume
    assert not gate.update()
    readings["out"] = space.Usage(1000, 250)
    assert gate.update()


def test_hidden_size_from_model_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"text_config": {"hidden_size": 7168}}))
    assert space.hidden_size_from_model(str(tmp_path)) == 7168


def test_a_readable_id_is_named_on_a_truncated_or_numeric_id_line(tmp_path):
    # before: json.loads failed on a cut line, or the id was no string, and the line was "no id"
    path = write_dataset(tmp_path / "d.jsonl", [], extra_lines=[
        '{"id": "cut-short", "input_ids": [1, 2, 3], "loss_m',
        json.dumps({"id": 42, "input_ids": [1], "loss_mask": [1]}),
        '{"input_ids": [1], "id": "late", "loss_mask": [1',
        '{"input_ids": [1, 2',
        '{"id": 4',                      # a number cut short may be another number: not named
        '{"meta": {"id": "inner"}, "input_ids": [',   # only the line's own id counts
    ])
    scan = dataset.scan(str(path))
    assert [str(b).split(":", 1)[0] for b in scan.bad_lines] == [
        "line 1 (id 'cut-short')", "line 2 (id 42)", "line 3 (id 'late')", "line 4 (no id)",
        "line 5 (no id)", "line 6 (no id)"]
    assert "id must match" in scan.bad_lines[1].reason
