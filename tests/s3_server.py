"""A loopback S3 server (moto_server from this venv) to test DVC `s3://` remotes.

`s3_server` (module scope; import `s3_server_fixture`) starts `moto_server -H 127.0.0.1 -p <free port>`, creates a bucket
with boto3 and stops the server by its pid at the end. `S3Server.add_dvc_remote` writes the
remote (endpointurl, region us-east-1, dummy keys) into a repository's `.dvc/config`, so that a
clone of a commit holding that config reaches the same server.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

MOTO_SERVER = Path(sys.executable).parent / "moto_server"
KEY = "testing"  # moto accepts any credentials
REGION = "us-east-1"


@dataclass(frozen=True)
class S3Server:
    endpoint: str  # http://127.0.0.1:<port>
    bucket: str

    def add_dvc_remote(self, repo: Path, name: str, prefix: str, default: bool = True) -> str:
        """Configure `name` as an s3 remote of the DVC repo at `repo`; return its URL."""
        from dvc.repo import Repo

        url = f"s3://{self.bucket}/{prefix}"
        with Repo(str(repo)) as dvc_repo, dvc_repo.config.edit("repo") as conf:
            conf["remote"][name] = {
                "url": url,
                "endpointurl": self.endpoint,
                "region": REGION,
                "access_key_id": KEY,
                "secret_access_key": KEY,
            }
            if default:
                conf["core"]["remote"] = name
        return url

    def keys(self, prefix: str = "") -> list[str]:
        """Object keys in the bucket under `prefix` (to assert what a push uploaded)."""
        client = _client(self.endpoint)
        pages = client.get_paginator("list_objects_v2").paginate(Bucket=self.bucket, Prefix=prefix)
        return sorted(obj["Key"] for page in pages for obj in page.get("Contents", []))


def _client(endpoint: str):  # type: ignore[no-untyped-def]  # boto3 has no stubs here
    import boto3

    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=KEY,
        aws_secret_access_key=KEY,
    )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait_ready(endpoint: str, proc: subprocess.Popen[bytes], log: Path) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"moto_server exited {proc.returncode}: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(endpoint, timeout=1):
                return
        except urllib.error.HTTPError:
            return  # it answered
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"moto_server did not answer within 30 s: {log.read_text()[-2000:]}")


@pytest.fixture(scope="module", name="s3_server")
def s3_server_fixture(tmp_path_factory: pytest.TempPathFactory) -> Iterator[S3Server]:
    """A running moto S3 server with one empty bucket."""
    if not MOTO_SERVER.exists():
        pytest.skip(f"{MOTO_SERVER} not installed (pip install 'moto[server]')")
    log = tmp_path_factory.mktemp("moto") / "moto.log"
    port = _free_port()
    endpoint = f"http://127.0.0.1:{port}"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            [str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        _wait_ready(endpoint, proc, log)
        server = S3Server(endpoint, "ledger-test")
        _client(endpoint).create_bucket(Bucket=server.bucket)
        yield server
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
