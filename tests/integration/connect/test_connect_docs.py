"""The curl session of docs/connect.md, run line by line against a worker."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

from tests.integration.connect.conftest import Running
from tests.integration.connect.support import ROOT, call, wait_for

DOC = ROOT / "docs" / "connect.md"


def curl_lines() -> list[str]:
    blocks = re.findall(r"```bash\n(.*?)```", DOC.read_text(encoding="utf-8"), re.S)
    return [line for block in blocks for line in block.splitlines()
            if line.startswith("curl")]


def test_the_docs_curl_session(connect: Running, tmp_path: Path) -> None:
    lines = curl_lines()
    assert len(lines) >= 10
    demo = tmp_path / "demo.txt"
    demo.write_text("a\nb\n", encoding="utf-8")
    host = connect.url.removeprefix("http://")
    answers: list[tuple[str, int, object]] = []
    for line in lines:
        command = (line.replace("localhost:8083", host)
                   .replace("/tmp/connect-demo.txt", str(demo)) + " -w '\\n%{http_code}'")
        done = subprocess.run(command, shell=True, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, (line, done.stderr)
        text, _, code = done.stdout.rpartition("\n")
        assert code.isdigit() and 200 <= int(code) < 300, (line, done.stdout)
        answers.append((line, int(code), json.loads(text) if text.strip() else None))
        if " -X POST " in line:  # the task reads the file before the session goes on
            wait_for("both lines read", lambda: call(
                "GET", connect.url + "/connectors/demo/offsets")[1]["offsets"])
    by_path = {line.split()[-1] if "-d" not in line else line.split(" -d ")[0].split()[-1]:
               (code, body) for line, code, body in answers}
    root = by_path["localhost:8083/"][1]
    assert isinstance(root, dict) and root["kafka_cluster_id"]
    code, validated = by_path["localhost:8083/connector-plugins/FileStreamSource/config/validate"]
    assert isinstance(validated, dict) and validated["error_count"] == 1
    assert [c["value"]["name"] for c in validated["configs"] if c["value"]["errors"]] == ["file"]
    code, created = by_path["localhost:8083/connectors"]
    assert code == 201 and isinstance(created, dict) and created["name"] == "demo"
    offsets = next(b for line, _, b in answers if line.endswith("demo/offsets"))
    assert offsets == {"offsets": [{"partition": {"filename": str(demo)},
                                    "offset": {"position": 4}}]}
    assert [c for line, c, _ in answers if "DELETE" in line] == [204]
    assert call("GET", connect.url + "/connectors") == (200, [])
