"""A fleet with tokens (docs/fleet.md, "Tokens"): a node passes the
caller's Authorization on when it forwards, so the owner checks the caller
as if asked directly; a caller the receiving node refuses reaches nobody.
"""
from rsutil import IMAGE, LONG_RUNNING, call, create, delete


def test_forwarding_carries_the_callers_token(start_node, fleet, etcd_cluster):
    store = etcd_cluster.url("/auth")
    a = start_node("a", store=store, fleet_flags=True, token="fleet-secret-token-1")
    b = start_node("b", store=store, fleet_flags=True, token="fleet-secret-token-1")
    r = create(b, "auth1", 1, node="a")
    assert r.status == 200, r.json
    assert [c["Labels"]["gpubox.replicaset"] for c in fleet.node("a").containers("auth1")] == \
        ["auth1"]
    # the info of a's set through b, with the token and without
    assert call(b, "GET", "/api/v1/replicaSet/auth1").status == 200
    r = b.request("GET", "/api/v1/replicaSet/auth1", headers={"Authorization": "Bearer wrong"})
    assert (r.status, r.code) == (401, 1108), r.json
    r = b.request("POST", "/api/v1/replicaSet",
                  body=f'{{"replicaSetName":"auth2","imageName":"{IMAGE}","node":"a",'
                       f'"cmd":["{LONG_RUNNING[0]}","{LONG_RUNNING[1]}"]}}'.encode(),
                  headers={"Authorization": "Bearer wrong", "Content-Type": "application/json"})
    assert (r.status, r.code) == (401, 1108), r.json
    assert fleet.node("a").containers("auth2") == []
    assert delete(b, "auth1", purge=True).status == 200
    assert fleet.node("a").containers("auth1") == []
    assert a.get("/api/v1/nodes").status == 200
