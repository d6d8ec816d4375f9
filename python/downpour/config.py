"""The parts of a job's YAML (common/config*.cc) a Python worker needs.

The daemons validate the whole file; this reads only the keys the client uses,
with the same defaults, and says which key is wrong when one is.
"""

import os

import yaml


class JobConfig:
    """cluster, heartbeat, rpc, training and security keys of a job file."""

    def __init__(self, doc, path="<config>"):
        self.path = path
        doc = doc or {}
        self.doc = doc  # the whole file (with overrides), for a worker's keys
        cluster = self._section(doc, "cluster")
        self.coordinator = cluster.get("coordinator")
        if not isinstance(self.coordinator, str) or not self.coordinator:
            raise ValueError("%s: cluster.coordinator must be host:port" % path)
        self.workers = list(cluster.get("workers") or [])
        self.max_workers = int(cluster.get("max_workers", 0) or 0)
        heartbeat = self._section(doc, "heartbeat")
        self.heartbeat_interval_s = float(heartbeat.get("interval_s", 0.5))
        rpc = self._section(doc, "rpc")
        self.deadline_s = float(rpc.get("deadline_s", 5.0))
        self.connect_timeout_s = float(rpc.get("connect_timeout_s", 60.0))
        training = self._section(doc, "training")
        self.outage_timeout_s = float(training.get("outage_timeout_s", 300))
        model = self._section(doc, "model")
        self.sparse_buckets = int(model.get("sparse_buckets", 1024))
        security = self._section(doc, "security")
        self.tls = bool(security.get("tls", False))
        self.ca_file = security.get("ca_file", "")
        self.cert_file = security.get("cert_file", "")
        self.key_file = security.get("key_file", "")
        self.server_name = security.get("server_name", "")
        self.worker_token_file = security.get("worker_token_file", "")
        if self.worker_token_file and not self.tls:
            raise ValueError(
                "%s: security.worker_token_file needs security.tls: true" % path)

    def _section(self, doc, name):
        section = doc.get(name) or {}
        if not isinstance(section, dict):
            raise ValueError("%s: '%s' must be a mapping" % (self.path, name))
        return section


def load(path, overrides=()):
    """The JobConfig of the YAML file at `path`, with `overrides` applied:
    "section.key=value" strings as the daemons' --set takes them (the value
    read as YAML)."""
    with open(path) as f:
        doc = yaml.safe_load(f) or {}
    for override in overrides:
        key, sep, value = override.partition("=")
        section, dot, name = key.strip().partition(".")
        if not sep or not dot or not section or not name:
            raise ValueError("--set %s: expected section.key=value" % override)
        current = doc.get(section)
        if current is None:
            current = doc[section] = {}
        if not isinstance(current, dict):
            raise ValueError("--set %s: '%s' is not a mapping in %s" %
                             (override, section, path))
        current[name] = yaml.safe_load(value)
    return JobConfig(doc, os.fspath(path))


def read_token(path):
    """A token file: one token, surrounding whitespace ignored."""
    with open(path) as f:
        token = f.read().strip()
    if not 16 <= len(token) <= 4096:
        raise ValueError("%s: a token has 16 to 4096 characters" % path)
    return token
