"""Runs the web console's browser scenarios (web/e2e/scenarios.mjs: Debian's
chromium driven by playwright-core) against a running gpuboxd; shared by
test_console.py and fleet/test_fleet_console.py."""
import os
import subprocess

from conftest import SOURCE_DIR
from rsutil import IMAGE

WEB = SOURCE_DIR / "web"


def run_scenarios(daemon, *scenarios, admin, viewer=None, prefix, shots=None):
    """Run the scenarios in one chromium against daemon's URL; fail with
    what they printed and the tail of gpuboxd's log."""
    env = dict(os.environ, GPUBOX_URL=f"http://{daemon.host}:{daemon.port}",
               GPUBOX_ADMIN_TOKEN=admin, GPUBOX_VIEWER_TOKEN=viewer or "",
               GPUBOX_TEST_IMAGE=IMAGE, GPUBOX_PREFIX=prefix)
    env.pop("GPUBOX_SCREENSHOTS", None)
    if shots:
        env["GPUBOX_SCREENSHOTS"] = shots
    p = subprocess.run(["node", str(WEB / "e2e" / "run.mjs"), *scenarios], cwd=WEB, env=env,
                       capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, f"gpuboxd log tail:\n{daemon.log()[-1500:]}\n{p.stderr}\n{p.stdout}"
