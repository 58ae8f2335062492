"""eagle3.extraction.port_reclaim against real listeners, run through `ansible -c local`.

Every test runs in its own sandbox (see conftest.py), so the well-known SGLang
port 8000 is used as is.
"""

PORT = 8000
MODULE = 'eagle3.extraction.port_reclaim'


def pids_killed(result, signal_name=None):
    return sorted(set(k['pid'] for k in result['killed'] if signal_name in (None, k['signal'])))


BIND_PROBE = ['/usr/bin/python3', '-c',
              'import socket; s = socket.socket(); s.bind(("0.0.0.0", %d)); print("bound")' % PORT]


def test_plain_listener_check_mode_then_reclaim_then_idempotent(sandbox):
    holder = sandbox.actor('listen', '--port', str(PORT), '--host', '0.0.0.0')
    pid = holder['pids'][0]
    check, after_check, real, again, bind = sandbox.play([
        {'module': MODULE, 'args': {'port': PORT}, 'check': True},
        {'probe': ['ss', '-H', '-ltnp', 'sport = :%d' % PORT]},
        {'module': MODULE, 'args': {'port': PORT, 'signal_timeout': 2}},
        {'module': MODULE, 'args': {'port': PORT}},
        {'probe': BIND_PROBE},
    ])
    assert check['_rc'] == 0 and check['changed'] is True
    assert check['would_kill'] == [pid] and check['killed'] == []
    assert [h['pid'] for h in check['holders']] == [pid]
    assert check['port_free'] is False
    # check mode killed nothing: ss still shows the holder listening
    assert 'pid=%d,' % pid in after_check['stdout']

    assert real['_rc'] == 0 and real['changed'] is True
    assert real['killed'] == [{'pid': pid, 'signal': 'SIGTERM'}]
    assert real['port_free'] is True
    holder_out = real['holders'][0]
    assert holder_out['pid'] == pid and holder_out['user'] == 'root' and 'actors.py listen' in holder_out['cmdline']
    assert set(holder_out) >= {'pid', 'ppid', 'user', 'state', 'cmdline'}
    assert real['listeners'][0]['family'] == 'ipv4' and real['listeners'][0]['address'] == '0.0.0.0'
    assert 0 <= real['elapsed'] < 2
    assert not sandbox.alive(pid) and not sandbox.listening(PORT)

    assert again['_rc'] == 0 and again['changed'] is False
    assert again['holders'] == [] and again['killed'] == [] and again['port_free'] is True
    # what a server about to start cares about: it can bind the port again
    assert bind['stdout'] == 'bound', bind['stderr']


def test_sigterm_ignoring_holder_gets_sigkill_within_signal_timeout(sandbox):
    holder = sandbox.actor('listen', '--port', str(PORT), '--ignore-term')
    pid = holder['pids'][0]
    result = sandbox.ansible(MODULE, {'port': PORT, 'signal_timeout': 1.5, 'kill_timeout': 5})
    assert result['_rc'] == 0 and result['changed'] is True
    assert result['killed'] == [{'pid': pid, 'signal': 'SIGTERM'}, {'pid': pid, 'signal': 'SIGKILL'}]
    # SIGKILL only after signal_timeout, and then promptly
    assert 1.5 <= result['elapsed'] < 1.5 + 1.0
    assert result['port_free'] is True and not sandbox.listening(PORT)
    assert not sandbox.alive(pid)


def test_parent_and_forked_children_sharing_the_socket_all_die(sandbox):
    holder = sandbox.actor('listen', '--port', str(PORT), '--children', '3', '--ignore-term')
    pids = sorted(holder['pids'])
    assert len(pids) == 4
    result = sandbox.ansible(MODULE, {'port': PORT, 'signal_timeout': 1})
    assert result['_rc'] == 0
    assert sorted(h['pid'] for h in result['holders']) == pids
    assert pids_killed(result, 'SIGKILL') == pids
    assert result['port_free'] is True and not sandbox.listening(PORT)
    assert not any(sandbox.alive(p) for p in pids)


def test_double_forked_setsid_daemon(sandbox):
    holder = sandbox.actor('listen', '--port', str(PORT), '--daemon')
    pid = holder['pids'][0]
    # the process started exited at once; the holder is its grandchild, in a
    # session of its own and reparented to the sandbox's init
    assert pid != holder['origin'] and holder['sid'] not in (0, holder['origin'])
    assert not sandbox.exists(holder['origin'])
    result = sandbox.ansible(MODULE, {'port': PORT, 'signal_timeout': 2})
    assert [(h['pid'], h['ppid']) for h in result['holders']] == [(pid, 1)]
    assert result['_rc'] == 0 and result['killed'] == [{'pid': pid, 'signal': 'SIGTERM'}]
    assert result['port_free'] is True and not sandbox.alive(pid)


def test_ipv6_only_listener(sandbox):
    holder = sandbox.actor('listen', '--port', str(PORT), '--host', '::1', '--v6only')
    pid = holder['pids'][0]
    result = sandbox.ansible(MODULE, {'port': PORT, 'signal_timeout': 2})
    assert result['_rc'] == 0 and result['changed'] is True
    assert result['listeners'] == [{'family': 'ipv6', 'address': '::1', 'port': PORT,
                                    'inode': result['listeners'][0]['inode'], 'owner_visible': True}]
    assert pids_killed(result) == [pid]
    assert result['port_free'] is True and not sandbox.listening(PORT)


def test_address_only_reclaims_conflicting_listeners(sandbox):
    v4 = sandbox.actor('listen', '--port', str(PORT), '--host', '127.0.0.1')['pids'][0]
    v6 = sandbox.actor('listen', '--port', str(PORT), '--host', '::1', '--v6only')['pids'][0]
    result = sandbox.ansible(MODULE, {'port': PORT, 'address': '::1', 'signal_timeout': 2})
    assert result['_rc'] == 0
    assert pids_killed(result) == [v6]
    # the IPv4 listener does not conflict with a server on [::1]:8000 and is left alone
    assert sandbox.alive(v4) and not sandbox.alive(v6)
    assert len(sandbox.listening(PORT)) == 1


def test_invisible_holder_fails_and_says_to_use_vmid(sandbox):
    """The case met when servers were run by hand: a holder started with only `nsenter --net` into the
    container's network namespace is not in the container's PID namespace."""
    holder = sandbox.actor('listen', '--port', str(PORT), pid_ns=False)
    host_pid = holder['pids'][0]
    result = sandbox.ansible(MODULE, {'port': PORT, 'signal_timeout': 1})
    assert result.get('failed') is True and result['changed'] is False
    assert 'vmid' in result['msg'] and 'hypervisor' in result['msg']
    assert result['listeners'][0]['owner_visible'] is False and result['holders'] == []
    assert result['killed'] == []
    # still held, holder untouched
    assert sandbox.listening(PORT)
    with open('/proc/%d/stat' % host_pid) as f:
        assert f.read().rsplit(')', 1)[1].split()[0] in ('S', 'R')


def test_port_held_by_own_ancestor_is_never_signalled(sandbox, python):
    """The shell that runs ansible holds the listening socket, and ansible inherits
    it: both are ancestors of the module, so it must fail and kill nothing."""
    holder_script = ('import socket, os, sys\n'
                     's = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n'
                     's.bind(("127.0.0.1", %d)); s.listen(); s.set_inheritable(True)\n'
                     'os.execvp(sys.argv[1], sys.argv[1:])\n' % PORT)
    result = sandbox.ansible(MODULE, {'port': PORT, 'signal_timeout': 1},
                             wrapper=lambda argv: [python, '-c', holder_script] + argv)
    assert result.get('failed') is True
    assert result['killed'] == [] and result['would_kill'] == []
    assert result['protected'] and all('ancestor' in p['reason'] for p in result['protected'])
