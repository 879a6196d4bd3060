"""Fixtures of the fleet tests: several gpubox servers on one machine, each
on a "node" of its own (a network namespace with its own dockerd), sharing
one three-member etcd cluster.

Run them with scripts/test-fleet.sh BUILD_DIR [pytest args] (scripts/test.sh
runs it as its third e2e group): it makes the nodes and the hub, joins them
(scripts/lib/fleet-net.sh), runs pytest in the hub's netns with the
GPUBOX_FLEET_* variables (fleetutil.py) and tears it all down. Without
those variables (a plain `pytest tests/e2e/fleet`) every test is skipped;
`pytest tests/e2e` does not collect this package at all (tests/e2e/
conftest.py's collect_ignore).

Fixtures:
  fleet             (session) fleetutil.Fleet: .nodes (Node: label, index,
                    addr, netns, docker_host, url(), fleet_flags(),
                    docker(), containers(), run()), .hub, .hub_addr,
                    .partition(node, ports, reject=False), .heal(node),
                    .partitioned_from(node, ports) (a context manager).
                    Partitions left at the end of a test are healed.
  etcd_cluster      (session) fleetutil.EtcdCluster, three members on the hub
                    address, healthy: .endpoints ("H:P1,H:P2,H:P3"),
                    .url(prefix, **options), .client_ports, .members,
                    .kill(m), .restart(m), .leader(), .move_leader(m),
                    .wait_healthy(), .range(prefix), .put(key, value).
                    A test that kills a member must restart it (or the
                    next test starts with two).
  start_node        (function) start(node, *extra, store=None, port=2378,
                    data_dir=None, gpus=None, fleet_flags=False, env=None)
                    -> fleetutil.NodeDaemon (conftest's Daemon run in the
                    node's netns; .kill9(), .restart(), .kill9_restart()).
                    Every daemon started is wiped and stopped after the
                    test, with the sanitizer checks.
  start_node_module (module) the same, the daemons living until the
                    module's last test.

Node and etcd addresses are the hub's netns's own, so every session uses the
same fixed ports (gpuboxd 2378 on each node; etcd 2379-2384 on the hub).
"""
import pytest

from .fleetutil import EtcdCluster, Fleet, NodeDaemons


def pytest_report_header(config):
    f = Fleet.from_env()
    if f is None:
        return "gpubox fleet: none (run scripts/test-fleet.sh)"
    return (f"gpubox fleet: hub {f.hub} ({f.hub_addr}); "
            + ", ".join(f"{n.label} {n.netns} {n.addr}" for n in f.nodes))


@pytest.fixture(scope="session")
def fleet():
    f = Fleet.from_env()
    if f is None:
        pytest.skip("no fleet: GPUBOX_FLEET_HUB / GPUBOX_FLEET_NODES are unset "
                    "(run scripts/test-fleet.sh BUILD_DIR)")
    assert f.check_inside_hub(), (
        f"pytest must run in the hub's network namespace ({f.hub}): "
        f"nsenter --net=/var/run/netns/{f.hub} ...")
    yield f
    f.heal_all()


@pytest.fixture(autouse=True)
def _heal_partitions(request):
    """Heal what a test left partitioned, so the next one starts whole."""
    yield
    if "fleet" in request.fixturenames:
        request.getfixturevalue("fleet").heal_all()


@pytest.fixture(scope="session")
def etcd_cluster(fleet, tmp_path_factory):
    base = fleet.workdir / "etcd" if fleet.workdir else tmp_path_factory.mktemp("etcd")
    cluster = EtcdCluster(base, fleet.hub_addr)
    try:
        cluster.start()
    except BaseException:
        cluster.stop()
        raise
    yield cluster
    cluster.stop()


@pytest.fixture
def start_node(fleet, etcd_cluster, tmp_path):
    daemons = NodeDaemons(fleet, etcd_cluster, tmp_path)
    yield daemons.start
    daemons.stop_all()


@pytest.fixture(scope="module")
def start_node_module(fleet, etcd_cluster, tmp_path_factory, request):
    daemons = NodeDaemons(fleet, etcd_cluster,
                          tmp_path_factory.mktemp(request.module.__name__.rsplit(".", 1)[-1]))
    yield daemons.start
    daemons.stop_all()
