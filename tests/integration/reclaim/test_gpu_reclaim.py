"""process_reclaim with gpu_holders and gpu_memory_max_mib, against a GPU-memory
holder registered with the stand-in nvidia-smi (lab/standins/nvidia_smi/),
which replays the real H200 captures and frees the memory when the holder dies."""

import os

import pytest

from conftest import PYTHON, REPO

MODULE = 'eagle3.extraction.process_reclaim'
STANDIN_DIR = os.path.join(REPO, 'lab', 'standins', 'nvidia_smi')
NVIDIA_SMI = os.path.join(STANDIN_DIR, 'nvidia-smi')
STANDIN_CLI = os.path.join(STANDIN_DIR, 'nvidia-smi-standin')
CAPTURES = os.path.join(REPO, 'lab', 'fixtures', 'nvidia-smi')
# memory.used with one holder of 20998 MiB on a GPU, as captured (busy/)
BUSY_MIB = 21007


@pytest.fixture
def gpu_sandbox(sandbox, tmp_path):
    if not os.path.exists(STANDIN_CLI) or not os.path.isdir(CAPTURES):
        pytest.skip('the stand-in nvidia-smi (lab/standins/nvidia_smi) or its captures are missing')
    conf = tmp_path / 'nvidia-smi-standin.conf'
    conf.write_text('gpus=2\n')
    standin = {'NVIDIA_SMI_STANDIN_CONF': str(conf),
               'NVIDIA_SMI_STANDIN_STATE': str(tmp_path / 'standin-state' / 'state.json'),
               'NVIDIA_SMI_STANDIN_DATA': CAPTURES}
    sandbox.fake_gpu_devices()
    # the module runs nvidia-smi with ansible's environment (local connection)
    sandbox.extra_env.update(standin)
    sandbox.standin_env = dict(os.environ, **standin)
    return sandbox


def start_holder(box, *extra):
    line = box.spawn_line([PYTHON, STANDIN_CLI, 'hold', '--gpu', 'all', '--mib', '20998'] + list(extra),
                          env=box.standin_env)
    # "holding pid=P gpus=0,1 mib=20998 devices=4"
    fields = dict(f.split('=', 1) for f in line.split()[1:])
    assert fields['devices'] == '4', line
    return int(fields['pid'])


def used(gpus):
    return [g['memory_used_mib'] for g in gpus]


def test_gpu_holder_ignoring_sigterm_is_killed_and_memory_returns(gpu_sandbox):
    box = gpu_sandbox
    holder = start_holder(box, '--ignore-sigterm')
    args = {'match': [], 'gpu_holders': True, 'gpu_memory_max_mib': 0, 'gpu_wait_timeout': 10,
            'signal_timeout': 1, 'nvidia_smi_path': NVIDIA_SMI}

    check, after_check, result, again = box.play([
        {'module': MODULE, 'args': args, 'check': True},
        {'probe': [NVIDIA_SMI, '--query-gpu=memory.used', '--format=csv,noheader,nounits']},
        {'module': MODULE, 'args': args},
        {'module': MODULE, 'args': args},
    ])
    assert check['_rc'] == 0 and check['changed'] is True and check['killed'] == []
    assert check['would_kill'] == [holder]
    assert used(check['gpu_memory_before']) == [BUSY_MIB, BUSY_MIB]
    # check mode killed nothing: the memory is still held
    assert after_check['stdout'].split() == [str(BUSY_MIB), str(BUSY_MIB)]

    assert result['_rc'] == 0, result.get('msg')
    assert result['matched'][0]['pid'] == holder
    assert result['matched'][0]['matched_by'] == ['gpu device', 'nvidia-smi compute app']
    assert [a['pid'] for a in result['gpu_apps']] == [holder, holder]
    assert result['killed'] == [{'pid': holder, 'signal': 'SIGTERM'}, {'pid': holder, 'signal': 'SIGKILL'}]
    assert used(result['gpu_memory_before']) == [BUSY_MIB, BUSY_MIB]
    assert used(result['gpu_memory_after']) == [0, 0]
    assert result['gpu_memory_progress'][-1]['used_mib'] == [0, 0]
    assert not box.alive(holder)

    assert again['_rc'] == 0 and again['changed'] is False and again['matched'] == []


def test_gpu_memory_that_stays_fails_naming_gpus_and_mib(gpu_sandbox):
    box = gpu_sandbox
    holder = start_holder(box)
    result = box.ansible(MODULE, {'match': [], 'gpu_holders': True, 'exclude': [holder], 'gpu_memory_max_mib': 100,
                                  'gpu_wait_timeout': 1, 'nvidia_smi_path': NVIDIA_SMI})
    assert result.get('failed') is True
    assert 'GPU 0 uses %d MiB' % BUSY_MIB in result['msg'] and 'GPU 1 uses %d MiB' % BUSY_MIB in result['msg']
    assert 'gpu_memory_max_mib=100' in result['msg']
    assert result['killed'] == [] and box.alive(holder)


def test_orphaned_sglang_scheduler_holding_gpu_memory(gpu_sandbox, tmp_path):
    """The SGLang leftover: a scheduler_TP0 reparented to init keeps GPU memory;
    the default patterns find it, and the GPUs come back to 0 MiB."""
    box = gpu_sandbox
    script = tmp_path / 'scheduler.py'
    script.write_text(
        'import os, subprocess, sys\n'
        'sys.path.insert(0, %r)\n'
        'import actors\n'
        'if os.fork():\n'
        '    os._exit(0)\n'
        'os.setsid()\n'
        'actors.set_title("sglang::scheduler_TP0")\n'
        'subprocess.run([sys.executable, %r, "alloc", "--gpu", "all", "--mib", "50000", "--pid", str(os.getpid())],'
        ' check=True)\n'
        'print(os.getpid(), flush=True)\n'
        'actors.sleep_forever()\n' % (os.path.dirname(os.path.abspath(__file__)), STANDIN_CLI))
    pid = int(box.spawn_line([PYTHON, str(script)], env=box.standin_env))
    result = box.ansible(MODULE, {'gpu_memory_max_mib': 0, 'gpu_wait_timeout': 10, 'signal_timeout': 2,
                                  'nvidia_smi_path': NVIDIA_SMI})
    assert result['_rc'] == 0, result.get('msg')
    assert [(m['pid'], m['ppid'], m['cmdline']) for m in result['matched']] == [(pid, 1, 'sglang::scheduler_TP0')]
    assert used(result['gpu_memory_before']) == [50009, 50009]
    assert used(result['gpu_memory_after']) == [0, 0]
