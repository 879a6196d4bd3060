"""The web console on a fleet (docs/web.md): any node's console shows every
node with its cards and every node's instances, and an admin cordons a node
from it. Debian's chromium (web/e2e, scenario "fleet") runs in the hub's
network namespace against node a."""
import json
import secrets

import pytest

from rsutil import IMAGE, LONG_RUNNING
from webutil import run_scenarios

from .fleetutil import start_pair

ADMIN = "fleet-admin-" + secrets.token_hex(16)


@pytest.fixture(scope="module")
def two(start_node_module, fleet, etcd_cluster):
    return start_pair(start_node_module, etcd_cluster, "/console", ADMIN)


def test_the_console_shows_the_whole_fleet_and_cordons_a_node(two):
    a, b = two
    for d, name in ((a, "webfa"), (b, "webfb")):
        r = d.request("POST", "/api/v1/replicaSet",
                      json.dumps({"replicaSetName": name, "imageName": IMAGE, "gpuCount": 1,
                                  "node": d.node.label, "cmd": LONG_RUNNING}))
        assert r.code == 200, r.json
    try:
        run_scenarios(a, "fleet", admin=ADMIN, prefix="webf")
        # the cordon the console made is the fleet's
        node_b = next(n for n in a.get("/api/v1/nodes").data["nodes"] if n["name"] == "b")
        assert node_b["cordoned"] is False  # the scenario uncordons it again
    finally:
        for d, name in ((a, "webfa"), (b, "webfb")):
            d.request("DELETE", f"/api/v1/replicaSet/{name}?purge=true")
