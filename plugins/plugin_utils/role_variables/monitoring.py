# -*- coding: utf-8 -*-
# Copyright: eagle3.extraction maintainers
# GNU General Public License v3.0+ (see COPYING or https://www.gnu.org/licenses/gpl-3.0.txt)
"""monitoring's variables, each declared once (plugin_utils/variable_record.py says what a record holds).

Edit a variable here, then run ``python lab/tools/role_files.py --write``: it makes the role's
meta/argument_specs.yml, defaults/main.yml and README table from these records.
"""

from __future__ import annotations

from ansible_collections.eagle3.extraction.plugins.plugin_utils.value_rules import NODE_NAME, number, path, pattern
from ansible_collections.eagle3.extraction.plugins.plugin_utils.variable_record import EntryPoint, Variable

ROLE = 'monitoring'
DEFAULTS_HEADER = (
    'Off until monitoring_prometheus_host names a host of the inventory: then node_exporter runs on every',
    "extraction server (the job's metrics in its textfile dir) and Prometheus, with the job's alert rules and",
    'dashboard, on that host.',
)
# a week: a longer alert window is a typo
MAX_WINDOW = 7 * 24 * 3600


def _window(name, default, what, comment='', group=False):
    """An alert's window in seconds (the rule's ``for``)."""
    return Variable(
        name, 'int', default,
        description='Seconds %s before the alert fires (its C(for)), 0 to %d (a week).' % (what, MAX_WINDOW),
        rule=number(0, MAX_WINDOW, 'seconds'), comment=comment, group=group)


ENTRY_POINTS = (
    EntryPoint(
        'main', "Watch the extraction job with Prometheus: node_exporter's textfile collector, scrape config, "
        'alert rules and a Grafana dashboard',
        description=[
            (
                'Nothing while O(monitoring_prometheus_host) is empty. Else, on each extraction server: Debian\'s '
                'C(prometheus-node-exporter) installed, its textfile collector reading O(monitoring_textfile_dir) '
                "(where the extraction job writes its metrics; the host's plan gives the job that dir), enabled "
                'and running.'),
            (
                "On O(monitoring_prometheus_host): Debian's C(prometheus) with a C(prometheus.yml) made from the "
                'inventory (the host plans of extract.yml\'s inventory check: each server\'s node_exporter, each '
                "server's SGLang C(/metrics), the online mode's Mooncake master; every target labelled "
                'C(host=<inventory_hostname>)), the alert rules and the Grafana dashboard in '
                'O(monitoring_config_dir). Each file is checked (C(promtool check rules), C(promtool check config)) '
                'before it replaces the old one; a changed file restarts Prometheus, which must answer ready.'),
            'Runs in extract.yml after the servers; it needs the inventory check of that playbook\'s first play.',
            'A second run changes nothing. Supports check mode.',
        ]),
)

VARIABLES = (
    Variable(
        'monitoring_prometheus_host', 'str', '',
        description=[
            (
                'The inventory name of the host that runs Prometheus (it may be an extraction server); empty turns '
                "monitoring off. Set it for every host (the group C(all)): the extraction servers read it too (their "
                "job's metrics dir, node_exporter)."),
        ],
        rule=pattern(NODE_NAME, 'the inventory name of a host', empty=True),
        comment='The host that runs Prometheus; empty: off.', plan=True),
    Variable(
        'monitoring_textfile_dir', 'str', '/var/lib/prometheus/node-exporter',
        description=(
            "node_exporter's textfile collector dir on the extraction servers (Debian's default): the extraction "
            'job writes its C(*.prom) files there when monitoring is on (C(extraction_job_metrics_dir) through the '
            "host's plan)."),
        rule=path(), plan=True, group=True,
        comment="node_exporter's textfile dir (the job's metrics) and port on every extraction server."),
    Variable(
        'monitoring_node_exporter_port', 'int', 9100,
        description="node_exporter's port on every extraction server, 1 to 65535; Prometheus must reach it.",
        rule=number(1, 65535), plan=True),
    Variable(
        'monitoring_prometheus_port', 'int', 9090,
        description="Prometheus's port on O(monitoring_prometheus_host) (its web UI and query API), 1 to 65535.",
        rule=number(1, 65535), group=True,
        comment="Prometheus's port, where its rules and the dashboard go, and how often it scrapes and evaluates."),
    Variable(
        'monitoring_config_dir', 'str', '/etc/prometheus/eagle3',
        description=(
            "Where the job's alert rules (C(eagle3-alerts.yml)) and the Grafana dashboard (C(eagle3-dashboard.json)) "
            'go on the monitoring host; C(prometheus.yml) loads the rules from there.'),
        rule=path()),
    Variable(
        'monitoring_scrape_interval', 'int', 15,
        description='Seconds between two scrapes of each target, 1 to 300.',
        rule=number(1, 300, 'seconds')),
    Variable(
        'monitoring_evaluation_interval', 'int', 15,
        description='Seconds between two evaluations of the alert rules, 1 to 300.',
        rule=number(1, 300, 'seconds')),
    _window('monitoring_no_progress_seconds', 1800,
            'a shard with samples left makes no durable progress while its server is not down',
            comment='Alert windows (seconds).', group=True),
    _window('monitoring_server_down_seconds', 300, "a server's /metrics does not answer"),
    _window('monitoring_shm_high_seconds', 600, "/dev/shm stays above the job's high watermark"),
    _window('monitoring_output_floor_seconds', 60, "the output disk's free space stays below the job's floor"),
    _window('monitoring_metrics_stale_seconds', 300, "the job's metrics file goes unwritten while the job is at work"),
    Variable(
        'monitoring_ready_timeout', 'int', 120,
        description='Seconds to wait for Prometheus to answer ready after a (re)start, 1 to 3600.',
        rule=number(1, 3600, 'seconds'), group=True,
        comment='Seconds to wait for Prometheus after a (re)start.'),
)
