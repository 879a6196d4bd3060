"""The parts of a fleet test: the machines (nodes), the etcd cluster they
share, and gpuboxd running on one node.

The shape (scripts/test-fleet.sh builds it, scripts/lib/fleet-net.sh wires
it):

    hub netns GPUBOX_FLEET_HUB: bridge at NET.1, the etcd cluster, pytest
      |-- node 1 (a): netns + own dockerd, address NET.11
      |-- node 2 (b): netns + own dockerd, address NET.12
      `-- node 3 (c): netns + own dockerd, address NET.13

pytest itself runs in the hub's netns, so it reaches every node's address
and every etcd member; gpuboxd runs in a node's netns (nsenter --net) with
DOCKER_HOST set to that node's dockerd. Everything but the network is the
host's and shared by all nodes: files and mounts, the pid namespace, the
host name and boot id. So the nodes look like one host to whatever asks
those (gpuboxd's store claim takes over at once from a dead daemon "on
this host", whichever node it ran on): give each node a name of its own
(--node) rather than rely on the host name.

Environment (set by scripts/test-fleet.sh):
  GPUBOX_FLEET_HUB           the hub's netns name
  GPUBOX_FLEET_NODES         the nodes' netns (sandbox) names, comma-separated,
                             in address order
  GPUBOX_FLEET_DOCKER_HOSTS  each node's DOCKER_HOST (unix://...), same order
  GPUBOX_FLEET_NET           the /24's first three octets (default 10.77.0);
                             the hub is NET.1, node i (1-based) NET.(10+i)
  GPUBOX_FLEET_WORKDIR       optional: a directory for etcd's data (the
                             script mounts a tmpfs there, so a loaded disk
                             cannot slow etcd's fsyncs into elections)

Fleet      the nodes and the hub from the environment; partition / heal a
           node from etcd (fleet_partition / fleet_heal of fleet-net.sh).
Node       one machine: label ('a', 'b', ...), index (1-based), addr,
           netns, docker_host; docker() asks its dockerd, containers() lists
           gpubox's containers there, run() runs a program in its netns.
EtcdCluster three real etcd members (Debian's /usr/bin/etcd, or
           $GPUBOX_ETCD) on the hub address; kill -9 and restart a member,
           move the leadership, wait until the cluster is healthy, and the
           endpoint list / etcd:// URL for gpuboxd's --store.
NodeDaemon a gpuboxd on one node: conftest's Daemon (its ready line, stop
           with a clean exit and no sanitizer report), run through nsenter;
           kill9() and restart() on the same data dir.
NodeDaemons starts gpuboxd (NodeDaemon) on nodes with their defaults, stops them all;
           the start_node fixtures hand out its start().
"""
import contextlib
import json
import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

from conftest import SANITIZER_MARKERS, SOURCE_DIR, Daemon, docker_request
from etcdutil import ETCD, _die_with_parent, b64, successor, unb64

NETNS_DIR = Path("/var/run/netns")
FLEET_NET_SH = SOURCE_DIR / "scripts" / "lib" / "fleet-net.sh"
# Each node's netns is its own, so every gpuboxd can listen on the same port
# of its own address; a fixed port lets a test know a node's URL (and its
# --advertise) before the daemon starts.
API_PORT = 2378
# Simulated GPUs of node 1, 2, 3 (then again): different models, so a GPU
# tells which node it is on.
NODE_GPUS = ("4xA100-80GB", "2xT4-16GB", "8xA10-24GB")
PORT_RANGE = "41000-41099"
LABEL_SET = "gpubox.replicaset"


class Node:
    """One machine of the fleet: a test sandbox (netns + dockerd)."""

    def __init__(self, index, netns, docker_host, net):
        self.index = index  # 1-based, as the address
        self.label = chr(ord("a") + index - 1) if index <= 26 else f"n{index}"
        self.netns = netns
        self.netns_path = NETNS_DIR / netns
        self.docker_host = docker_host
        assert docker_host.startswith("unix://"), docker_host
        self.docker_socket = docker_host[len("unix://"):]
        self.addr = f"{net}.{10 + index}"
        self.gpus = NODE_GPUS[(index - 1) % len(NODE_GPUS)]

    def __repr__(self):
        return f"Node({self.label}: {self.netns} {self.addr})"

    def url(self, port=API_PORT):
        return f"http://{self.addr}:{port}"

    def fleet_flags(self, port=API_PORT):
        """The flags that make a gpuboxd this node of a fleet (the fleet
        feature: --node NAME --advertise URL)."""
        return ["--node", self.label, "--advertise", self.url(port)]

    def env(self, base=None):
        """An environment for a program on this node: DOCKER_HOST is its dockerd."""
        env = dict(os.environ if base is None else base)
        env["DOCKER_HOST"] = self.docker_host
        return env

    def command(self, args):
        """args run in this node's netns (nsenter --net, as netns-dockerd.sh)."""
        return ["nsenter", f"--net={self.netns_path}", *map(str, args)]

    def run(self, args, timeout=60, **kwargs):
        """Run a program in this node's netns to completion (CompletedProcess;
        text output captured unless kwargs say otherwise)."""
        kwargs.setdefault("capture_output", True)
        kwargs.setdefault("text", True)
        return subprocess.run(self.command(args), env=self.env(), timeout=timeout, **kwargs)

    def docker(self, method, path, body=None):
        """One Engine API call on this node's dockerd (conftest's Response)."""
        return docker_request(method, path, body, socket_path=self.docker_socket)

    def containers(self, set_name=None):
        """gpubox's containers on this node's dockerd (running or not): those
        of replica set set_name, or all with a gpubox.replicaset label."""
        label = LABEL_SET if set_name is None else f"{LABEL_SET}={set_name}"
        filters = urllib.parse.quote(json.dumps({"label": [label]}))
        r = self.docker("GET", f"/containers/json?all=1&filters={filters}")
        assert r.status == 200, (self, r.status, r.json)
        return r.json


class Fleet:
    """The hub and the nodes scripts/test-fleet.sh made."""

    def __init__(self, hub, node_names, docker_hosts, net="10.77.0", workdir=None):
        assert len(node_names) == len(docker_hosts), (node_names, docker_hosts)
        self.hub = hub
        self.net = net
        self.hub_addr = f"{net}.1"
        self.workdir = Path(workdir) if workdir else None
        self.nodes = [Node(i, name, host, net)
                      for i, (name, host) in enumerate(zip(node_names, docker_hosts), 1)]
        self.partitioned = set()

    @classmethod
    def from_env(cls, environ=None):
        """The fleet the environment describes, or None when it names none
        (pytest was not started by scripts/test-fleet.sh)."""
        env = os.environ if environ is None else environ
        hub, nodes = env.get("GPUBOX_FLEET_HUB", ""), env.get("GPUBOX_FLEET_NODES", "")
        if not hub or not nodes:
            return None
        names = nodes.split(",")
        hosts = env.get("GPUBOX_FLEET_DOCKER_HOSTS", "")
        hosts = hosts.split(",") if hosts else [
            f"unix://{os.environ.get('NSD_RUN_BASE', '/run/gpubox-test')}/{n}/docker.sock"
            for n in names]
        return cls(hub, names, hosts, env.get("GPUBOX_FLEET_NET", "") or "10.77.0",
                   env.get("GPUBOX_FLEET_WORKDIR") or None)

    def node(self, which):
        """A Node from a Node, a 0-based position, a label or a netns name."""
        if isinstance(which, Node):
            return which
        if isinstance(which, int):
            return self.nodes[which]
        for n in self.nodes:
            if which in (n.label, n.netns):
                return n
        raise KeyError(which)

    def check_inside_hub(self):
        """pytest must run in the hub's netns: true if it does."""
        try:
            return os.stat("/proc/self/ns/net").st_ino == os.stat(NETNS_DIR / self.hub).st_ino
        except OSError:
            return False

    def _net_sh(self, function, *args):
        script = 'set -euo pipefail; . "$0"; "$@"'
        env = dict(os.environ, FLEET_NET=self.net)
        p = subprocess.run(["bash", "-c", script, str(FLEET_NET_SH), function, *map(str, args)],
                           capture_output=True, text=True, timeout=60, env=env)
        assert p.returncode == 0, f"{function} {args}: exit {p.returncode}\n{p.stdout}{p.stderr}"
        return p.stdout

    def partition(self, which, ports, reject=False):
        """Cut a node off from the hub's TCP ports (the etcd members' client
        ports: EtcdCluster.client_ports): its packets there are dropped (with
        reject, refused at once). HTTP to and from the node still works."""
        node = self.node(which)
        self._net_sh("fleet_partition", node.netns, *(["--reject"] if reject else []), *ports)
        self.partitioned.add(node.netns)

    def heal(self, which):
        node = self.node(which)
        self._net_sh("fleet_heal", node.netns)
        self.partitioned.discard(node.netns)

    def heal_all(self):
        for name in sorted(self.partitioned):
            self.heal(name)

    @contextlib.contextmanager
    def partitioned_from(self, which, ports, reject=False):
        """with fleet.partitioned_from(node, etcd.client_ports): ... healed after."""
        self.partition(which, ports, reject)
        try:
            yield self.node(which)
        finally:
            self.heal(which)


# ---- etcd ---------------------------------------------------------------


class EtcdMember:
    """One member of an EtcdCluster; its data dir and log under dir."""

    def __init__(self, name, host, client_port, peer_port, dir):
        self.name = name
        self.host = host
        self.client_port = client_port
        self.peer_port = peer_port
        self.dir = Path(dir)
        self.proc = None
        self.id = None  # etcd's member id (a decimal string), once known

    def __repr__(self):
        return f"EtcdMember({self.name} {self.endpoint}{'' if self.running else ' down'})"

    @property
    def endpoint(self):
        return f"{self.host}:{self.client_port}"

    @property
    def client_url(self):
        return f"http://{self.endpoint}"

    @property
    def peer_url(self):
        return f"http://{self.host}:{self.peer_port}"

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def log(self):
        p = self.dir / "etcd.log"
        return p.read_text(errors="replace") if p.exists() else ""

    def spawn(self, args):
        """Start etcd with args (the cluster's flags); returns at once. It
        dies with pytest's main thread (PR_SET_PDEATHSIG, etcdutil)."""
        import threading
        assert threading.current_thread() is threading.main_thread(), \
            "etcd would die with this thread (PR_SET_PDEATHSIG): start it from the main thread"
        assert not self.running, f"{self} runs already"
        self.dir.mkdir(parents=True, exist_ok=True)
        with open(self.dir / "etcd.log", "ab") as log:
            self.proc = subprocess.Popen([ETCD, *args], stdout=log, stderr=subprocess.STDOUT,
                                         stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)

    def kill(self):
        """kill -9, as a crashed machine."""
        if self.proc is not None:
            self.proc.send_signal(signal.SIGCONT)
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def stop(self):
        if self.proc is None:
            return
        self.proc.send_signal(signal.SIGCONT)
        self.proc.terminate()
        try:
            self.proc.wait(10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    def post(self, path, body, timeout=5):
        req = urllib.request.Request(f"{self.client_url}{path}", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.loads(r.read())

    def health(self, timeout=3):
        """etcd's /health of this member: True when it has a leader."""
        try:
            with urllib.request.urlopen(f"{self.client_url}/health", timeout=timeout) as r:
                return json.loads(r.read()).get("health") == "true"
        except (OSError, ValueError):
            return False

    def status(self, timeout=3):
        """/v3/maintenance/status: {'header': {'member_id': ...}, 'leader': ...}."""
        s = self.post("/v3/maintenance/status", {}, timeout)
        self.id = s["header"]["member_id"]
        return s


class EtcdCluster:
    """size etcd members on host, member k (0-based) with client port
    base_port + 2k and peer port base_port + 2k + 1 (fixed: the hub's netns
    is this session's own). Their dirs are dir/m1, dir/m2, ...

    The raft timings are etcd's defaults times 2.5 (heartbeat 250 ms,
    election 2.5 s): with every test run, build and dockerd of the machine
    on two cores, a member that misses a few heartbeats must not start an
    election the test did not ask for."""

    def __init__(self, dir, host, size=3, base_port=2379, heartbeat_ms=250, election_ms=2500):
        self.dir = Path(dir)
        self.host = host
        self.heartbeat_ms = heartbeat_ms
        self.election_ms = election_ms
        self.token = f"gpubox-fleet-{os.getpid()}-{time.time_ns()}"
        self.members = [EtcdMember(f"m{k + 1}", host, base_port + 2 * k, base_port + 2 * k + 1,
                                   self.dir / f"m{k + 1}") for k in range(size)]

    # ---- what gpuboxd is given ----

    @property
    def client_ports(self):
        return [m.client_port for m in self.members]

    @property
    def endpoints(self):
        """"H:P1,H:P2,H:P3": every member, for etcd://ENDPOINTS/prefix."""
        return ",".join(m.endpoint for m in self.members)

    def url(self, prefix="", **options):
        """The --store URL: etcd://H:P1,H:P2,H:P3/prefix?option=value&..."""
        query = "&".join(f"{k}={v}" for k, v in options.items())
        return f"etcd://{self.endpoints}{prefix}{'?' + query if query else ''}"

    # ---- members ----

    def _args(self, m):
        cluster = ",".join(f"{o.name}={o.peer_url}" for o in self.members)
        return ["--name", m.name, "--data-dir", str(m.dir / "data"),
                "--listen-client-urls", m.client_url, "--advertise-client-urls", m.client_url,
                "--listen-peer-urls", m.peer_url, "--initial-advertise-peer-urls", m.peer_url,
                "--initial-cluster", cluster, "--initial-cluster-token", self.token,
                # ignored once the data dir exists (a restart rejoins)
                "--initial-cluster-state", "new",
                "--heartbeat-interval", str(self.heartbeat_ms),
                "--election-timeout", str(self.election_ms)]

    def member(self, which):
        """A member from an EtcdMember, a 0-based position or a name."""
        if isinstance(which, EtcdMember):
            return which
        if isinstance(which, int):
            return self.members[which]
        return next(m for m in self.members if m.name == which)

    @property
    def running(self):
        return [m for m in self.members if m.running]

    def start(self, timeout=90):
        """Start every member (none forms a quorum alone, so all at once) and
        wait until the cluster is healthy."""
        for m in self.members:
            m.spawn(self._args(m))
        return self.wait_healthy(timeout)

    def kill(self, which):
        """kill -9 one member; returns it."""
        m = self.member(which)
        m.kill()
        return m

    def restart(self, which, timeout=90):
        """Start a killed or stopped member again on its data dir and ports
        (it rejoins) and wait until the whole cluster is healthy."""
        m = self.member(which)
        m.spawn(self._args(m))
        self.wait_healthy(timeout)
        return m

    def stop(self):
        for m in self.members:
            m.stop()

    def _health(self):
        """(ok, why): every running member says healthy and names the same
        leader, which is one of them; a majority of the cluster runs."""
        running = self.running
        if len(running) <= len(self.members) // 2:
            return False, f"only {len(running)} of {len(self.members)} members run"
        leaders = {}
        for m in running:
            if not m.health():
                return False, f"{m.name} is not healthy"
            try:
                leaders[m.name] = m.status()["leader"]
            except (OSError, ValueError, KeyError) as e:
                return False, f"{m.name}: status: {e}"
        if len(set(leaders.values())) != 1:
            return False, f"members disagree on the leader: {leaders}"
        leader = next(iter(leaders.values()))
        if leader not in {m.id for m in running}:
            return False, f"leader {leader} is not a running member"
        return True, f"leader {self.leader_of(leader).name}"

    def healthy(self):
        return self._health()[0]

    def wait_healthy(self, timeout=90):
        """Until every running member agrees on a running leader; raises
        AssertionError with the members' logs after timeout."""
        deadline = time.monotonic() + timeout
        while True:
            ok, why = self._health()
            if ok:
                return self
            for m in self.members:
                if m.proc is not None and m.proc.poll() is not None:
                    raise AssertionError(f"etcd {m.name} exited {m.proc.returncode}; log:\n"
                                         f"{m.log()[-4000:]}")
            if time.monotonic() > deadline:
                logs = "\n".join(f"--- {m.name}:\n{m.log()[-3000:]}" for m in self.members)
                raise AssertionError(f"etcd cluster not healthy after {timeout}s: {why}\n{logs}")
            time.sleep(0.2)

    def leader_of(self, member_id):
        return next(m for m in self.members if m.id == member_id)

    def leader(self):
        """The member the running members agree leads (after wait_healthy)."""
        self.wait_healthy()
        return self.leader_of(self.running[0].status()["leader"])

    def move_leader(self, which, timeout=90):
        """Make a member the leader (etcd's transfer-leadership, asked of the
        current leader) and wait until the cluster agrees."""
        target = self.member(which)
        deadline = time.monotonic() + timeout
        while True:
            current = self.leader()
            if current is target:
                return target
            try:
                target.status()
                current.post("/v3/maintenance/transfer-leadership", {"targetID": target.id})
            except (OSError, ValueError):
                pass  # the leadership moved meanwhile, or an election: ask again
            if time.monotonic() > deadline:
                raise AssertionError(f"{target.name} did not become the leader in {timeout}s")
            time.sleep(0.2)

    # ---- the gateway, through any running member ----

    def post(self, path, body, timeout=5):
        error = None
        for m in self.running:
            try:
                return m.post(path, body, timeout)
            except (OSError, ValueError) as e:
                error = e
        raise error or OSError("no etcd member runs")

    def put(self, key, value):
        return self.post("/v3/kv/put", {"key": b64(key), "value": b64(value)})

    def range(self, prefix):
        """{key: value} of every key starting with prefix (strings)."""
        r = self.post("/v3/kv/range", {"key": b64(prefix), "range_end": b64(successor(prefix))})
        return {unb64(kv["key"]): unb64(kv.get("value", "")) for kv in r.get("kvs", [])}


# ---- gpuboxd on a node -------------------------------------------------------


class NodeDaemon(Daemon):
    """A gpuboxd in a node's netns, with DOCKER_HOST its dockerd. Start, the
    ready line, requests and stop (exit 0, no sanitizer report) are
    conftest's Daemon's; kill9() and restart() add a crash and a start on
    the same data dir (each start logs to a file of its own: log_paths)."""

    # Start-up may wait for the store (--store-wait): a claim on the prefix
    # held by a daemon that is gone without a trace on this host lasts until
    # its lease runs out (10 s); and the machine may be loaded.
    ready_timeout = 90

    def __init__(self, node, args, data_dir, log_path, env=None):
        super().__init__(args, data_dir, log_path, env=node.env(env))
        self.node = node
        self.args = node.command(self.args)
        self.log_paths = [Path(log_path)]
        self.killed = False  # by kill9(), not by itself

    def __repr__(self):
        return f"NodeDaemon({self.node.label} {self.url})"

    def assert_no_sanitizer_report(self):
        for path in self.log_paths:
            log = path.read_text(errors="replace") if path.exists() else ""
            for marker in SANITIZER_MARKERS:
                assert marker not in log, f"sanitizer report in {path}:\n{log}"

    def kill9(self):
        """SIGKILL and reap it, as a crashed machine (no clean-up, no report)."""
        assert self.proc is not None and self.proc.poll() is None, f"{self} is not running"
        self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()
        self.log_file.close()
        self.killed = True
        self.assert_no_sanitizer_report()

    def restart(self):
        """Start again with the same flags and data dir (after kill9 or stop);
        the new log is gpuboxd-<node>.<n>.log beside the first."""
        assert self.proc is None or self.proc.poll() is not None, f"{self} still runs"
        first = self.log_paths[0]
        self.log_path = first.with_name(f"{first.stem}.{len(self.log_paths) + 1}{first.suffix}")
        self.log_paths.append(self.log_path)
        self.killed = False
        return self.start()

    def kill9_restart(self):
        self.kill9()
        return self.restart()


def wipe_quietly(d):
    """Delete (with purge) every replica set d lists; a daemon that cannot
    answer is left alone (the sandbox's teardown removes its containers)."""
    try:
        r = d.get("/api/v1/replicaSet?all=true")
        for rs in (r.data or {}).get("replicaSets", []) if r.status == 200 else []:
            name = urllib.parse.quote(rs["name"], safe="")
            d.request("DELETE", f"/api/v1/replicaSet/{name}?purge=true")
    except (OSError, ValueError, KeyError, TypeError):
        pass


def start_pair(start, etcd, prefix, token):
    """gpuboxd on nodes a and b with fleet flags, sharing the store prefix
    and one admin token, once each sees both nodes."""
    store = etcd.url(prefix)
    a = start("a", store=store, fleet_flags=True, token=token)
    b = start("b", store=store, fleet_flags=True, token=token)
    deadline = time.monotonic() + 30
    while len(a.get("/api/v1/nodes").data["nodes"]) < 2:
        assert time.monotonic() < deadline, "node b did not join within 30 s"
        time.sleep(0.1)
    return a, b


class NodeDaemons:
    """Starts gpuboxd on nodes with each node's defaults; stop_all() wipes
    and stops every one still running, checking each exit."""

    def __init__(self, fleet, etcd, base_dir):
        self.fleet = fleet
        self.etcd = etcd
        self.base_dir = Path(base_dir)
        self.started = []

    def start(self, which, *extra, store=None, port=API_PORT, data_dir=None, gpus=None,
              fleet_flags=False, token=None, env=None):
        """Start gpuboxd on a node (a Node, a 0-based position or a label):

            --listen ADDR:port --data-dir DIR --simulate-gpus GPUS
            --port-range 41000-41099 --docker-wait 30 --store STORE
            --insecure-no-auth [extra...]

        port defaults to 2378, the data dir to BASE/<label>-<n>/data, gpus
        to the node's models (node a 4xA100-80GB, b 2xT4-16GB, c
        8xA10-24GB), store to etcd://<all members>/harness/<label>. With
        fleet_flags, --node LABEL --advertise http://ADDR:port come too.
        The API listens on the node's bridge address, so gpuboxd wants
        authentication: --insecure-no-auth (the network is the test's own),
        or with token, --token-file with that admin token, which every
        request of the returned daemon then sends. Returns the NodeDaemon,
        ready."""
        node = self.fleet.node(which)
        n = sum(1 for d in self.started if d.node is node)
        home = self.base_dir / f"{node.label}-{n}"
        home.mkdir(parents=True, exist_ok=True)
        data = Path(data_dir) if data_dir else home / "data"
        args = ["--listen", f"{node.addr}:{port}", "--data-dir", str(data),
                "--simulate-gpus", gpus or node.gpus, "--port-range", PORT_RANGE,
                "--docker-wait", "30",
                "--store", store or self.etcd.url(f"/harness/{node.label}")]
        if token:
            tokens = home / "tokens"
            tokens.write_text(f"fleet:admin:{token}\n")
            tokens.chmod(0o600)
            args += ["--token-file", str(tokens)]
        else:
            args.append("--insecure-no-auth")
        if fleet_flags:
            args += node.fleet_flags(port)
        d = NodeDaemon(node, [*args, *extra], data, home / f"gpuboxd-{node.label}.log", env=env)
        d.token = token
        try:
            d.start()
        except BaseException:
            if d.proc is not None:
                d.proc.stdout.close()
                d.log_file.close()
            raise
        self.started.append(d)
        return d

    def stop_all(self):
        """Wipe and stop every daemon still running (the partitions healed
        first, so they can reach etcd); the first failed check is raised
        once all are stopped."""
        self.fleet.heal_all()
        errors = []
        for d in self.started:
            if d.proc is not None and d.proc.poll() is None:
                wipe_quietly(d)
            elif d.proc is not None and not d.killed and d.proc.returncode != 0:
                errors.append(AssertionError(f"{d} exited {d.proc.returncode} by itself; log:\n"
                                             f"{d.log()}"))
            try:
                d.stop()
                d.assert_no_sanitizer_report()
            except AssertionError as e:
                errors.append(e)
        self.started = []
        if errors:
            raise errors[0]
