"""``-H host1:4,host2:4``: horovodrun's host lists (``--hostfile FILE`` keeps the file form).

Until this release ``-H`` was short for ``--hostfile``; a ``-H`` value that names an existing
file is still read as a hostfile (with a note to write ``--hostfile``), and one that looks like
a path but names no file is an error saying which flag takes what.
"""

from __future__ import annotations

import os

from .job import LaunchError
from .remote import Host, parse_hostfile

__all__ = ["parse_host_list", "resolve_hosts", "LOCAL_NAMES", "all_local"]

LOCAL_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})


def parse_host_list(text: str) -> list[Host]:
    """``'h1:4,h2:4'`` -> two hosts with 4 slots each (a host without ``:K`` has no count)."""
    items = [item.strip() for item in str(text).split(",")]
    if not all(items):
        raise LaunchError(f"-H {text!r}: expected HOST[:SLOTS],HOST[:SLOTS],... (e.g. -H host1:4,host2:4) "
                          "with no empty entries")
    return parse_hostfile("\n".join(items), source=f"-H {text!r}")


def resolve_hosts(hosts: str | None,
                  hostfile: str | None) -> tuple[list[Host] | None, str | None, str | None]:
    """``(hosts, hostfile, note)`` from ``-H`` and ``--hostfile``; ``note`` is a line to show the user."""
    if hosts is None:
        return None, hostfile, None
    if hostfile is not None:
        raise LaunchError(f"-H {hosts} and --hostfile {hostfile}: give the hosts one way, a list (-H "
                          "host1:4,host2:4) or a file (--hostfile FILE)")
    if os.path.isfile(hosts):
        return None, hosts, (f"-H {hosts} names a file: it is read as a hostfile, as before; write "
                             f"--hostfile {hosts} (-H takes horovodrun's lists: -H host1:4,host2:4)")
    if os.sep in hosts or hosts.endswith((".txt", ".hosts", ".cfg")):
        raise LaunchError(f"-H {hosts!r}: no such file; -H takes a host list as horovodrun does "
                          "(-H host1:4,host2:4), --hostfile FILE a file of hosts")
    return parse_host_list(hosts), None, None


def all_local(hosts: list[Host]) -> bool:
    """Whether every listed host is this machine by name (``localhost``, ``127.0.0.1``)."""
    return all(h.address in LOCAL_NAMES for h in hosts)
