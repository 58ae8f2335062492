# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The online mode's part of each host's plan: who trains from whom, and what every Mooncake client is given.

An online job is declared once, where each part of it lives: its servers say ``extraction_job_mode: online``
(and their job's name), its trainer host (group ``online_trainers``) says ``online_training_job`` (the job) and
``online_training_mooncake_master`` (a host of group ``mooncake_masters``, whose ``mooncake_master_*`` variables
say where the master listens). From these alone this module derives, for every host of the job:

- ``master``: the master's endpoints (mooncake_address.endpoints of the master's host: one owner);
- ``trainer``, ``server_urls`` (the job's gateways, one a server on its rank 0, sorted by server name: the
  producer's ``server_urls``), ``aux_layer_ids`` (the servers' ``SGLANG_HS_LAYER_IDS``, else the capture's
  default);
- ``environment``: the Mooncake variables of this host's clients, its own address as the peers reach it as the
  transfer engine's bind address (a container bridge address there makes remote reads fail with -800);
- ``gateway`` on a server's rank 0: where its gateway listens, the URL the producer calls, its server and dumps.

``errors()`` says what cannot work, before anything starts: an online job with no trainer or two, a trainer
naming no master, servers of one job on other models, layers or SGLang, ports that collide on a host, a master,
gateway or trainer the other hosts cannot reach, a trainer on a GPU of its host's server.
"""

from __future__ import annotations

import ipaddress

from ansible_collections.eagle3.extraction.plugins.module_utils.validate import inventory_int, show
from ansible_collections.eagle3.extraction.plugins.plugin_utils import mooncake_address, server_address, server_layout
from ansible_collections.eagle3.extraction.plugins.plugin_utils.server_listen import AddressError, http_url
from ansible_collections.eagle3.extraction.plugins.plugin_utils.spec_defaults import spec_defaults

MASTERS = 'mooncake_masters'
TRAINERS = 'online_trainers'
GROUPS = (MASTERS, TRAINERS)
# what a server of an online job must share with the others (SpecForge: every server of a run the same target,
# revision, method and aux layers): the model, the capture's layers, the packages SGLang comes from
SHARED = ('sglang_server_model_path', 'ml_env_packages')
LAYER_IDS = 'SGLANG_HS_LAYER_IDS'
# the capture's own default when SGLANG_HS_LAYER_IDS is not set (eagle3_hs_capture.DEFAULT_LAYER_IDS, SpecForge's
# ids for Kimi-K2 / DeepSeek-V3; a unit test holds the two equal): what the trainer must be told the servers capture
CAPTURE_DEFAULT_LAYER_IDS = (1, 29, 57)
PROTOCOL = 'tcp'


def _given(values, role, name):
    if name in values:
        return values[name]
    return spec_defaults(role, (name,))[name]


def mode(values):
    return _given(values, 'extraction_job', 'extraction_job_mode')


def job_name(values):
    return _given(values, 'extraction_job', 'extraction_job_name')


def _layer_ids(values):
    env = _given(values, 'sglang_server', 'sglang_server_env') or {}
    ids = env.get(LAYER_IDS) if isinstance(env, dict) else None
    if ids is None:
        return list(CAPTURE_DEFAULT_LAYER_IDS)
    return [int(part) for part in str(ids).split(',') if part.strip()]


def online_servers(servers, job):
    """The servers' hosts of the online job ``job``, by name."""
    return sorted(host for host, values in servers.items() if mode(values) == 'online' and job_name(values) == job)


def trainers_of(online, job):
    return sorted(host for host, values in online.get(TRAINERS, {}).items()
                  if _given(values, 'online_training', 'online_training_job') == job)


def _address(host, values, what):
    found = server_address.reached_at(host, values)
    if found is None:
        raise AddressError('%s is reached through its hypervisor, so the other hosts have no address for its %s; '
                           'give it an ansible_host the others reach' % (host, what))
    return found


def environment(address, master):
    """The Mooncake variables of a client on a host the peers reach at ``address`` (SpecForge's and the
    gateway's), its master's endpoints ``master``."""
    return {'MC_TCP_BIND_ADDRESS': address, 'MOONCAKE_LOCAL_HOSTNAME': address,
            'MOONCAKE_MASTER_SERVER_ADDR': master['master_server_address'],
            'MOONCAKE_METADATA_SERVER': master['metadata_server'], 'MOONCAKE_PROTOCOL': PROTOCOL}


def _gateway_url(host, values):
    return http_url(_address(host, values, 'gateway'), _given(values, 'extraction_job', 'extraction_job_gateway_port'))


def section(servers, online, host, server_plan=None, job_plan=None):
    """The ``online`` part of ``host``'s plan: None where it takes no part in an online job.

    ``servers``: {host: values} of the extraction servers; ``online``: {group: {host: values}} of GROUPS;
    ``server_plan``/``job_plan``: the host's own server and job plans when it is a server.
    """
    values = servers.get(host)
    trainers = online.get(TRAINERS, {})
    if values is not None and mode(values) == 'online':
        job = job_name(values)
    elif host in trainers:
        job = _given(trainers[host], 'online_training', 'online_training_job')
    else:
        return None
    if not online_servers(servers, job):
        return None   # a trainer of a job in the files mode: idle
    found = trainers_of(online, job)
    if len(found) != 1:
        return None   # errors() names it; a plan is made of a valid inventory only
    trainer = found[0]
    master_host = _given(trainers[trainer], 'online_training', 'online_training_mooncake_master')
    masters = online.get(MASTERS, {})
    if master_host not in masters:
        return None
    master = mooncake_address.endpoints(master_host, masters[master_host])
    master['host'], master['address'] = master_host, master['host']
    # what the store holds at most: the producer's in-flight window is sized to it (online_training's preflight)
    master['segment_bytes'] = int(_given(masters[master_host], 'mooncake_master', 'mooncake_master_segment_bytes'))
    job_servers = online_servers(servers, job)
    rank0 = sorted(set(server_layout.layout(servers, name)['rank0'] for name in job_servers))
    own = values if values is not None else trainers[host]
    section_ = {
        'job': job,
        'master': master,
        'trainer': trainer,
        'server_urls': [_gateway_url(name, servers[name]) for name in rank0],
        'aux_layer_ids': _layer_ids(servers[job_servers[0]]),
        'environment': environment(_address(host, own, 'Mooncake client'), master),
        'gateway': None,
    }
    if server_plan is not None and server_plan['layout']['rank'] == 0:
        port = int(_given(values, 'extraction_job', 'extraction_job_gateway_port'))
        section_['gateway'] = {
            'listen_host': server_plan['address']['host'],
            'port': port,
            'url': _gateway_url(host, values),
            'server_url': job_plan['server_url'],
            'dump_dir': job_plan['dump_dir'],
            'unit': '%s@%s.service' % (_given(values, 'extraction_job', 'extraction_job_gateway_unit'), job),
        }
    return section_


def _loopback(address):
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return address == 'localhost'


def _port(values, role, name):
    return inventory_int(_given(values, role, name), 6)


def errors(servers, online):
    """What cannot work in the online jobs of this inventory, as messages naming the hosts, variables and values."""
    found = []
    trainers = online.get(TRAINERS, {})
    masters = online.get(MASTERS, {})
    jobs = sorted(set(job_name(values) for values in servers.values() if mode(values) == 'online'))
    every_job = sorted(set(job_name(values) for values in servers.values()))
    for trainer, values in sorted(trainers.items()):
        job = _given(values, 'online_training', 'online_training_job')
        if job not in every_job:
            found.append('%s: online_training_job=%s names no job of the extraction servers (%s)'
                         % (trainer, show(job), ', '.join(every_job) or 'none'))
        if job not in jobs:
            continue   # a job in the files mode: its trainer has nothing to do (in_use() leaves it out)
        master = _given(values, 'online_training', 'online_training_mooncake_master')
        if master not in masters:
            found.append('%s: online_training_mooncake_master=%s is not a host of the group %s (%s)'
                         % (trainer, show(master), MASTERS, ', '.join(sorted(masters)) or 'empty'))
    for job in jobs:
        hosts = online_servers(servers, job)
        named = trainers_of(online, job)
        if len(named) != 1:
            found.append('job %s (extraction_job_mode=online on %s) needs one trainer host: a host of the group %s '
                         'with online_training_job=%s; found %s'
                         % (job, ', '.join(hosts), TRAINERS, job, ', '.join(named) or 'none'))
        found.extend(_shared_errors(job, hosts, servers))
        found.extend(_reach_errors(job, hosts, servers, named, trainers, masters))
    found.extend(_port_errors(servers, masters))
    found.extend(_gpu_errors(servers, trainers, jobs))
    return found


def in_use(servers, online):
    """{group: [host]}: the masters and trainers some online job of ``servers`` uses (extract.yml brings up these
    alone: a trainer of a job in the files mode, or a master no trainer names, has nothing to do)."""
    jobs = set(job_name(values) for values in servers.values() if mode(values) == 'online')
    trainers = sorted(host for host, values in online.get(TRAINERS, {}).items()
                      if _given(values, 'online_training', 'online_training_job') in jobs)
    masters = sorted(set(_given(online[TRAINERS][host], 'online_training', 'online_training_mooncake_master')
                         for host in trainers) & set(online.get(MASTERS, {})))
    return {MASTERS: masters, TRAINERS: trainers}


def _shared_errors(job, hosts, servers):
    found = []
    first = hosts[0]
    for name in SHARED:
        for host in hosts[1:]:
            if _given(servers[host], *_role_of(name)) != _given(servers[first], *_role_of(name)):
                found.append('job %s: %s=%s on %s but %s on %s; every server of an online job runs the same model '
                             'and SGLang' % (job, name, show(_given(servers[host], *_role_of(name))), host,
                                             show(_given(servers[first], *_role_of(name))), first))
        for host in hosts[1:]:
            if _layer_ids(servers[host]) != _layer_ids(servers[first]):
                found.append('job %s: sglang_server_env.%s=%s on %s but %s on %s; every server of an online job '
                             'captures the same layers' % (job, LAYER_IDS, show(_layer_ids(servers[host])), host,
                                                           show(_layer_ids(servers[first])), first))
    return found


def _role_of(name):
    return ('ml_env' if name.startswith('ml_env') else 'sglang_server', name)


def _reach_errors(job, hosts, servers, named, trainers, masters):
    """A master, gateway or trainer on a loopback address, with a peer on another host: its peers cannot reach it."""
    found = []
    parts = [(host, servers[host], 'its gateway') for host in hosts]
    parts += [(host, trainers[host], 'its trainer') for host in named]
    for trainer in named:
        master = _given(trainers[trainer], 'online_training', 'online_training_mooncake_master')
        if master in masters:
            try:
                address = mooncake_address.advertised(master, masters[master])
            except AddressError as exc:
                found.append(str(exc))
                continue
            if _loopback(address) and any(host != master for host, _values, _what in parts):
                found.append('job %s: the Mooncake master on %s advertises %s, which its servers and trainer on '
                             'other hosts cannot reach; set mooncake_master_host to an address they reach'
                             % (job, master, address))
    for host, values, what in parts:
        try:
            address = _address(host, values, what)
        except AddressError as exc:
            found.append('job %s: %s' % (job, exc))
            continue
        if _loopback(address) and any(other != host for other, _values, _what in parts):
            found.append('job %s: %s (%s) is reached at %s, a loopback address the other hosts of the job cannot '
                         'reach' % (job, host, what, address))
    for host in hosts:
        bind = _given(servers[host], 'sglang_server', 'sglang_server_host')
        if _loopback(bind or '') and any(other != host for other, _values, _what in parts):
            found.append('job %s: sglang_server_host=%s on %s: its gateway listens where the server does, and the '
                         'producer on another host cannot reach it there' % (job, show(bind), host))
    return found


def _port_errors(servers, masters):
    """Ports two services of one host would both bind: the server's, its gateway's, the master's four."""
    found = []
    for host in sorted(set(servers) | set(masters)):
        taken = {}
        if host in servers and mode(servers[host]) == 'online':
            taken['sglang_server_port'] = _port(servers[host], 'sglang_server', 'sglang_server_port')
            taken['extraction_job_gateway_port'] = _port(servers[host], 'extraction_job', 'extraction_job_gateway_port')
        if host in masters:
            for name in mooncake_address.PORTS:
                taken[name] = _port(masters[host], 'mooncake_master', name)
        seen = {}
        for name, port in sorted(taken.items()):
            if port is None:
                continue
            if port in seen and not (seen[port] in mooncake_address.PORTS and name in mooncake_address.PORTS):
                # (the master's own four: the role's rule names those)
                found.append('%s: %s=%d and %s=%d: two services of the host would bind the same port'
                             % (host, seen[port], port, name, port))
            elif port not in seen:
                seen[port] = name
    return found


def _server_gpus(values):
    """The GPUs a host's SGLang server takes: its CUDA_VISIBLE_DEVICES, else --tp-size of them from --base-gpu-id;
    None for every GPU of the host (the tp size left to what gpu_check sees there)."""
    env = _given(values, 'sglang_server', 'sglang_server_env') or {}
    if isinstance(env, dict) and env.get('CUDA_VISIBLE_DEVICES') is not None:
        return [part.strip() for part in str(env['CUDA_VISIBLE_DEVICES']).split(',') if part.strip()]
    tp_size = inventory_int(_given(values, 'sglang_server', 'sglang_server_tp_size'), 3)
    flags = _given(values, 'sglang_server', 'sglang_server_flags') or {}
    base = inventory_int(flags.get('base-gpu-id', 0), 3) if isinstance(flags, dict) else 0
    if tp_size is None or base is None:
        return None
    return [str(index) for index in range(base, base + tp_size)]


def _gpu_errors(servers, trainers, jobs):
    """A trainer on a GPU of its own host's server. SGLang sizes --mem-fraction-static against the memory free when
    it starts, so once the trainer holds part of the GPU the server's unit restarts into too little memory, and
    fails every time (GPU machine: the restart beside the trainer never came back)."""
    found = []
    for trainer, values in sorted(trainers.items()):
        if trainer not in servers or _given(values, 'online_training', 'online_training_job') not in jobs:
            continue
        gpus = [str(gpu) for gpu in _given(values, 'online_training', 'online_training_gpus') or []]
        taken = _server_gpus(servers[trainer])
        shared = [gpu for gpu in gpus if taken is None or gpu in taken]
        if shared:
            held = ('every GPU of the host' if taken is None else 'GPUs %s' % ','.join(taken))
            found.append('%s: online_training_gpus=%s shares %s with the SGLang server of the host (%s): the server '
                         'sizes its memory against what is free when it starts, so its restarts beside the trainer '
                         'would fail; give the trainer GPUs the server does not take (sglang_server_env.'
                         'CUDA_VISIBLE_DEVICES, sglang_server_tp_size) or a host of its own'
                         % (trainer, show(gpus), 'GPU ' + ','.join(shared), held))
    return found
