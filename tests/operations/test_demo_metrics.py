"""`/metrics` is on in the demo, and the demo prints where it is."""

import os
import signal
import urllib.request

from tests.conftest import sqlite_only
from tests.support.demo import free_port, running_demo

WAIT = 120

pytestmark = sqlite_only


def test_the_demo_serves_metrics_as_prometheus_text_and_prints_their_url(tmp_path):
    port = free_port()
    with running_demo(
        tmp_path, port, env={"METRICS_ENABLED": "false", "METRICS_TOKEN": ""}
    ) as demo:
        printed = demo.wait_for(r"Metrics: (\S+) \(Prometheus text\)\n", timeout=WAIT)[1]
        demo.wait_healthy(timeout=WAIT)

        with urllib.request.urlopen(printed, timeout=5) as response:
            status, content_type = response.status, response.headers["Content-Type"]
            text = response.read().decode()

        os.killpg(demo.process.pid, signal.SIGINT)
        assert demo.finish(timeout=WAIT) == 0, demo.output
    assert printed == f"http://127.0.0.1:{port}/metrics"
    assert status == 200
    assert content_type.startswith("text/plain; version=0.0.4")
    assert "# TYPE tickwork_" in text
