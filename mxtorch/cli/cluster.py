"""``mxtorch cluster``: an emulated cluster on this machine (network namespaces, links shaped by tc).

  mxtorch cluster up --hosts 4 --bandwidth 1gbit      # prints the cluster's name and hosts
  mxtorch cluster status
  mxtorch cluster exec h1 -- python -c "import socket; print(socket.gethostname())"
  mxtorch launch --launcher cluster -n 4 python train.py --kvstore horovod
  mxtorch cluster link h2 down                         # cut h2 off; `... link h2 up` restores it
  mxtorch cluster bandwidth h3 100mbit                 # slow one host's link (both directions)
  mxtorch cluster kill h1                              # SIGKILL every process on h1
  mxtorch cluster down                                 # remove it (--all: every cluster; --stale)

Every host is a network namespace with one link (a veth pair) to a bridge; rates are
limited in both directions with tc (tbf, or htb with --shaper htb).  Commands run inside a
host get GLOO_SOCKET_IFNAME and DMLC_INTERFACE set to its interface.  Needs root and iproute2.
With one cluster up, commands find it by themselves; otherwise name it with --cluster NAME.
"""

from __future__ import annotations

import argparse
import signal
import subprocess
import sys
from typing import Any

from ..cluster import SHAPERS, Cluster, ClusterError, down_all, format_rate, list_clusters, sweep_stale


def add_parser(sub: Any) -> argparse.ArgumentParser:
    p = sub.add_parser("cluster", help="emulated cluster: hosts as network namespaces with shaped links",
                       description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    acts = p.add_subparsers(dest="action", metavar="ACTION")
    up = acts.add_parser("up", help="make a cluster")
    up.add_argument("-n", "--hosts", type=int, default=2, help="number of hosts (default 2)")
    up.add_argument("-b", "--bandwidth", default=None,
                    help="rate of every link, each direction: 10gbit, 1gbit, 100mbit (default: unlimited)")
    up.add_argument("--shaper", choices=SHAPERS, default="tbf", help="tc queueing discipline (default tbf)")
    up.add_argument("--name", default=None, help="cluster name (default: a random one)")
    down = acts.add_parser("down", help="remove clusters (stops every process on their hosts)")
    down.add_argument("names", nargs="*", metavar="NAME", help="clusters to remove (default: the only one)")
    down.add_argument("--all", action="store_true", help="every cluster, and leftover namespaces named mxc-*")
    down.add_argument("--stale", action="store_true", help="the clusters whose owning process has died")
    st = acts.add_parser("status", help="show clusters, links, rates and processes")
    st.add_argument("names", nargs="*", metavar="NAME", help="clusters to show (default: all)")
    ex = acts.add_parser("exec", help="run a command inside a host")
    _host_args(ex)
    # dest not "argv": the entry point stores its own argument list there
    ex.add_argument("exec_argv", nargs=argparse.REMAINDER, metavar="COMMAND",
                    help="the command and its arguments")
    kill = acts.add_parser("kill", help="kill every process on a host (a crash)")
    _host_args(kill)
    kill.add_argument("--signal", default="KILL", help="signal name (default KILL)")
    link = acts.add_parser("link", help="cut a host off (down) or plug it back in (up)")
    _host_args(link)
    link.add_argument("state", choices=("up", "down"))
    bw = acts.add_parser("bandwidth", help="change the rate of a host's link ('all': every host)")
    _host_args(bw)
    bw.add_argument("rate", help="10gbit, 1gbit, 100mbit, ... or none")
    return p


def _host_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--cluster", default=None, help="cluster name (default: the only one)")
    p.add_argument("host", help="host name (h0, h1, ...), index or address")


def run(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except ClusterError as e:
        print(f"mxtorch cluster: error: {e}", file=sys.stderr)
        return 2


def _run(args: argparse.Namespace) -> int:
    action = args.action
    if action is None:
        print("mxtorch cluster: error: give an action: up, down, status, exec, kill, link or bandwidth "
              "(mxtorch cluster --help)", file=sys.stderr)
        return 2
    if action == "up":
        c = Cluster.up(args.hosts, args.bandwidth, name=args.name, shaper=args.shaper)
        print(c.describe())
        print(f"remove it with: mxtorch cluster down {c.name}")
        return 0
    if action == "down":
        if args.all:
            removed = down_all()
        elif args.stale:
            removed = sweep_stale()
        else:
            targets = [Cluster.attach(n) for n in args.names] if args.names else [Cluster.attach()]
            for c in targets:
                c.down()
            removed = [c.name for c in targets]
        print(f"removed: {', '.join(removed) if removed else 'nothing'}")
        return 0
    if action == "status":
        clusters = [Cluster.attach(n) for n in args.names] if args.names else list_clusters()
        if not clusters:
            print("no cluster is up (mxtorch cluster up --hosts N --bandwidth RATE)")
        for c in clusters:
            print(c.describe())
        return 0
    c = Cluster.attach(args.cluster)
    if action == "exec":
        argv = args.exec_argv[1:] if args.exec_argv[:1] == ["--"] else args.exec_argv
        if not argv:
            raise ClusterError("no command: `mxtorch cluster exec HOST -- COMMAND [ARGS...]`")
        return subprocess.run(c.command(args.host, argv), env=c.environment(args.host)).returncode
    if action == "kill":
        try:
            sig = signal.Signals[f"SIG{args.signal.upper().removeprefix('SIG')}"]
        except KeyError:
            raise ClusterError(f"unknown signal {args.signal!r}: use a name such as KILL, TERM or INT") \
                from None
        pids = c.kill_host_processes(args.host, sig)
        print(f"{c.host(args.host).name}: sent {sig.name} to {len(pids)} process(es)"
              + (f" ({', '.join(map(str, pids))})" if pids else ""))
        return 0
    if action == "link":
        (c.link_up if args.state == "up" else c.link_down)(args.host)
        print(f"{c.host(args.host).name}: link {args.state}")
        return 0
    # bandwidth
    which = None if args.host == "all" else args.host
    c.set_bandwidth(which, args.rate)
    shown = "every host" if which is None else c.host(which).name
    print(f"{shown}: {format_rate(c.bandwidth(c.hosts[0] if which is None else which))} each direction")
    return 0
