"""The OpenAPI document end to end: gpuboxd serves docs/openapi.yaml as
written (GET /openapi.yaml) and as JSON (GET /openapi.json) exactly as a
full YAML parser reads the file; every documented operation is a route the
daemon answers; and real answers of the main routes, success and error,
conform to the document's schemas (tests/e2e/schema.py checks them).

The full YAML parser is js-yaml, pinned in tools/openapi/package-lock.json
and installed by scripts/test.sh (npm ci), which also runs the OpenAPI
validator on the file.
"""
import json
import subprocess

import pytest

from conftest import SOURCE_DIR
from rsutil import (IMAGE, LONG_RUNNING, RUN_TAG, call, create, create_ok, delete, execute,
                    lifecycle, remove_image, rs_path, start_module_daemon, wipe)
from schema import request_schema, response_schema, validate

PREFIX = "e2oa" + RUN_TAG
YAML = SOURCE_DIR / "docs" / "openapi.yaml"
TOOLS = SOURCE_DIR / "tools" / "openapi"


@pytest.fixture(scope="module")
def d(tmp_path_factory):
    daemon = start_module_daemon(tmp_path_factory.mktemp("oa"), "63100-63149")
    yield daemon
    try:
        wipe(daemon, PREFIX)
    finally:
        daemon.stop()


@pytest.fixture(scope="module")
def doc(d):
    r = d.get("/openapi.json")
    assert r.status == 200 and r.headers["Content-Type"] == "application/json"
    return r.json


def check(doc, pattern, method, r):
    """r (an answer to METHOD pattern) conforms to the documented schema."""
    schema = response_schema(doc, pattern, method, r.status)
    errors = validate(r.json, schema, doc)
    assert not errors, f"{method} {pattern} answered HTTP {r.status} {r.json}:\n" + "\n".join(errors)


def raw_get(d, path):
    """(status, headers, body bytes) of a GET whose answer is not JSON."""
    conn = d.connection()
    try:
        conn.request("GET", path)
        r = conn.getresponse()
        return r.status, r.headers, r.read()
    finally:
        conn.close()


def test_yaml_is_served_as_written(d):
    status, headers, body = raw_get(d, "/openapi.yaml")
    assert status == 200
    assert headers["Content-Type"] == "application/yaml"
    assert body == YAML.read_bytes()


def test_json_is_the_yaml_as_a_full_parser_reads_it(doc):
    assert (TOOLS / "node_modules" / "js-yaml").is_dir(), \
        "tools/openapi/node_modules is missing: run `npm ci` in tools/openapi (scripts/test.sh does)"
    out = subprocess.run(["node", str(TOOLS / "yaml2json.js"), str(YAML)], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    assert doc == json.loads(out)


def test_document_shape(doc):
    assert doc["openapi"] == "3.0.3"
    codes = doc["components"]["schemas"]["ErrorCode"]
    assert 200 in codes["enum"] and 1013 in codes["enum"] and 1199 in codes["enum"]
    assert len(codes["x-enum-varnames"]) == len(codes["enum"])
    for code in codes["enum"]:
        assert f"{code} " in codes["description"], code
    for path, item in doc["paths"].items():
        for method, op in item.items():
            if method == "parameters":
                continue
            assert op.get("summary"), (method, path)
            # a WebSocket (the terminal) answers 101 where others answer 200
            assert "200" in op["responses"] or "101" in op["responses"], (method, path)


def test_every_documented_operation_is_a_route(d, doc):
    """Asked with a name that does not exist, no operation answers "no such
    route" (1101) or "method not allowed" (1102)."""
    for path, item in doc["paths"].items():
        concrete = path.replace("{name}", "e2oa_nosuch")
        for method in item:
            if method == "parameters":
                continue
            conn = d.connection()
            try:
                conn.request(method.upper(), concrete)
                r = conn.getresponse()
                status, body = r.status, r.read()
            finally:
                conn.close()
            if status in (404, 405):
                assert json.loads(body)["code"] not in (1101, 1102), (method, path, body[:200])


def test_resources_and_system_answers_conform(d, doc):
    for pattern in ("/healthz", "/version", "/api/v1/resources/gpus", "/api/v1/resources/ports",
                    "/api/v1/gpus", "/api/v1/replicaSet"):
        check(doc, pattern, "get", d.get(pattern))


def test_replica_set_lifecycle_answers_conform(d, doc):
    name = PREFIX + "_life"
    body = {"imageName": IMAGE, "replicaSetName": name, "gpuCount": 1, "cmd": LONG_RUNNING,
            "containerPorts": ["22", "53/udp"], "env": ["A=1"], "labels": {"team": "x"},
            "memory": "64MB", "cpus": 0.5}
    assert validate(body, request_schema(doc, "/api/v1/replicaSet", "post"), doc) == []
    r = call(d, "POST", "/api/v1/replicaSet", body)
    assert r.status == 200, r.json
    check(doc, "/api/v1/replicaSet", "post", r)
    check(doc, "/api/v1/replicaSet", "get", d.get("/api/v1/replicaSet?all=true"))
    check(doc, "/api/v1/replicaSet/{name}", "get", d.get(rs_path(name)))
    check(doc, "/api/v1/replicaSet/{name}/history", "get", d.get(rs_path(name, "/history")))
    exec_body = {"cmd": ["sh", "-c", "echo hi; exit 3"], "workDir": "/tmp", "timeoutSeconds": 30}
    assert validate(exec_body, request_schema(doc, "/api/v1/replicaSet/{name}/execute", "post"),
                    doc) == []
    r = execute(d, name, exec_body["cmd"], workDir="/tmp", timeoutSeconds=30)
    assert r.data["exitCode"] == 3
    check(doc, "/api/v1/replicaSet/{name}/execute", "post", r)
    for action in ("pause", "continue", "stop"):
        r = lifecycle(d, name, action)
        assert r.status == 200, r.json
        check(doc, f"/api/v1/replicaSet/{{name}}/{action}", "patch", r)
    image = f"e2oa-commit-{RUN_TAG}:v1"
    try:
        r = call(d, "POST", rs_path(name, "/commit"), {"newImageName": image})
        assert r.status == 200, r.json
        check(doc, "/api/v1/replicaSet/{name}/commit", "post", r)
    finally:
        remove_image(image)
    r = delete(d, name)
    check(doc, "/api/v1/replicaSet/{name}", "delete", r)
    r = delete(d, name, purge=True)
    check(doc, "/api/v1/replicaSet/{name}", "delete", r)


def test_volume_answers_conform(d, doc):
    vol = PREFIX + "vol"
    body = {"name": vol, "size": "32MB"}
    assert validate(body, request_schema(doc, "/api/v1/volumes", "post"), doc) == []
    try:
        r = call(d, "POST", "/api/v1/volumes", body)
        assert r.status == 200, r.json
        check(doc, "/api/v1/volumes", "post", r)
        check(doc, "/api/v1/volumes", "get", d.get("/api/v1/volumes"))
        check(doc, "/api/v1/volumes/{name}", "get", d.get(f"/api/v1/volumes/{vol}"))
        r = call(d, "PATCH", f"/api/v1/volumes/{vol}/size", {"size": "48MB"})
        assert r.status == 200, r.json
        check(doc, "/api/v1/volumes/{name}/size", "patch", r)
        r = d.get(f"/api/v1/volumes/{vol}/history")
        assert [h["version"] for h in r.data["history"]] == [2, 1]
        check(doc, "/api/v1/volumes/{name}/history", "get", r)
        r = call(d, "POST", "/api/v1/volumes", {"name": vol, "size": "1XB"})
        assert r.status == 400
        check(doc, "/api/v1/volumes", "post", r)
    finally:
        r = call(d, "DELETE", f"/api/v1/volumes/{vol}")
    check(doc, "/api/v1/volumes/{name}", "delete", r)
    r = d.get(f"/api/v1/volumes/{vol}")
    assert r.status == 404
    check(doc, "/api/v1/volumes/{name}", "get", r)


def test_error_answers_conform(d, doc):
    name = PREFIX + "_err"
    r = d.get(rs_path(PREFIX + "_nosuch"))
    assert r.status == 404 and r.code == 1100
    check(doc, "/api/v1/replicaSet/{name}", "get", r)
    create_ok(d, name)
    try:
        r = create(d, name)
        assert r.status == 409 and r.code == 1008
        check(doc, "/api/v1/replicaSet", "post", r)
        r = lifecycle(d, name, "continue")
        assert r.status == 409 and r.code == 1107
        check(doc, "/api/v1/replicaSet/{name}/continue", "patch", r)
        r = create(d, PREFIX + "_big", gpus=64)
        assert r.status == 409 and r.code == 1013
        check(doc, "/api/v1/replicaSet", "post", r)
        r = call(d, "POST", "/api/v1/replicaSet", raw=b"{not json")
        assert r.status == 400 and r.code == 1000
        check(doc, "/api/v1/replicaSet", "post", r)
    finally:
        delete(d, name, purge=True)


def test_schema_checker_catches_wrong_answers(doc):
    """The checker is no rubber stamp: answers that break the schemas fail."""
    schema = response_schema(doc, "/api/v1/resources/ports", "get", 200)
    good = {"code": 200, "msg": "success", "data": {"ports": {
        "startPort": 1, "endPort": 2, "availableCount": 2, "usedPorts": [],
        "StartPort": 1, "EndPort": 2, "AvailableCount": 2, "UsedPortSet": {}}}}
    assert validate(good, schema, doc) == []
    bad = json.loads(json.dumps(good))
    bad["data"]["ports"]["usedPorts"] = ["22"]
    assert validate(bad, schema, doc)
    del bad["data"]["ports"]["startPort"]
    assert any("startPort" in e for e in validate(bad, schema, doc))
    assert validate({"code": 999, "msg": "x", "data": None}, schema, doc)
