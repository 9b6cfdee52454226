"""`vnuma serve --ssl-certfile --ssl-keyfile`: HTTPS with uvicorn's own TLS, and the CLI trusting it."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.api.conftest import prepared, start
from tests.cli.conftest import Cli


def test_https_serves_and_plain_http_does_not(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    openssl = shutil.which("openssl")
    assert openssl is not None, "openssl is part of the test machine's set-up"
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run(
        [openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(cert),
         "-days", "1", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
        check=True, capture_output=True,
    )
    cli = Cli(tmp_path / "inventory.db")
    tokens = prepared(cli)
    trusted = ssl.create_default_context(cafile=str(cert))
    base, proc = start(str(cli.db), tmp_path / "serve.log", "--ssl-certfile", str(cert), "--ssl-keyfile", str(key),
                       scheme="https", verify=trusted)
    try:
        assert base.startswith("https://")
        got = httpx.get(f"{base}/v1/hosts", headers={"Authorization": f"Bearer {tokens['watch']}"}, verify=trusted)
        assert got.status_code == 200 and [h["name"] for h in got.json()] == ["h1", "h2"]
        with pytest.raises(httpx.HTTPError):
            httpx.get(f"{base}/v1/hosts", verify=True)  # a certificate nobody vouches for is refused
        with pytest.raises(httpx.HTTPError):
            httpx.get(base.replace("https://", "http://") + "/v1/hosts", timeout=5)
        # The CLI trusts it through the usual variable for a private CA bundle.
        monkeypatch.setenv("SSL_CERT_FILE", str(cert))
        monkeypatch.setenv("VNUMA_TOKEN", tokens["watch"])
        client = Cli(tmp_path / "unused.db")
        client.options = ["--server", base]
        assert client.ok("host", "list", "--json").json() == cli.ok("host", "list", "--json").json()
    finally:
        proc.terminate()
        proc.wait(10)
