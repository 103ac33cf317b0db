"""``odradek console`` as a command: it prints its URL and serves a secured
cluster with the same ``--command-config`` the other commands take, stops
cleanly on SIGINT, and fails in one line when there is no broker or the port
is taken."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
from pathlib import Path

from odradek.testing.broker import ADMIN_PASSWORD, Broker
from tests.integration.console.support import get


def _console(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "odradek", "console", *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=dict(os.environ))


def _one_line_failure(proc: subprocess.Popen[str]) -> str:
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    return err


def test_serves_a_sasl_cluster_with_command_config_and_stops_on_sigint(tmp_path: Path) -> None:
    with Broker(sasl=True) as broker:
        broker.create_topic("secured")
        config = tmp_path / "admin.properties"
        config.write_text(
            "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
            "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule "
            f'required username="admin" password="{ADMIN_PASSWORD}";\n')
        proc = _console("--bootstrap-server", broker.bootstrap_servers,
                        "--command-config", str(config), "--listen", "127.0.0.1:0")
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            match = re.search(r"(http://127\.0\.0\.1:\d+/)", line)
            assert match, line + (proc.stderr.read() if proc.stderr else "")
            page = get(match.group(1) + "topics")
            assert page.status == 200 and "secured" in page.body
            proc.send_signal(signal.SIGINT)
            _, err = proc.communicate(timeout=30)
            assert proc.returncode == 0, err
            assert "Traceback" not in err
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        # Without the settings the SASL listener refuses it: one line, exit 1.
        err = _one_line_failure(_console("--bootstrap-server", broker.bootstrap_servers,
                                         "--listen", "127.0.0.1:0"))
        assert broker.bootstrap_servers in err


def test_no_broker_is_one_line_and_exit_1() -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # nothing listens here once closed
    err = _one_line_failure(_console("--bootstrap-server", f"127.0.0.1:{port}",
                                     "--listen", "127.0.0.1:0"))
    assert f"127.0.0.1:{port}" in err


def test_port_in_use_is_one_line_and_exit_1() -> None:
    with Broker() as broker, socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        err = _one_line_failure(_console("--bootstrap-server", broker.bootstrap_servers,
                                         "--listen", f"127.0.0.1:{port}"))
        assert "cannot listen" in err
