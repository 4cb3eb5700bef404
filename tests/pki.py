"""A private CA and server certificates for the TLS tests, made with the `openssl` command
(the `cryptography` package is not in the test venv): what a team sets up for its own server."""

from __future__ import annotations

import shutil
import ssl
import subprocess
from pathlib import Path

import pytest


class Pki:
    def __init__(self, root: Path) -> None:
        if shutil.which("openssl") is None:
            pytest.fail("openssl not found: the TLS tests make their CA with it (apt-get install openssl)")
        self.root = root
        self.ca = root / "team-ca.pem"
        self.ca_key = root / "team-ca.key"
        self._run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                  "-keyout", self.ca_key, "-out", self.ca, "-days", "30", "-subj", "/O=Team/CN=Team Test CA")

    def _run(self, *args: str | Path) -> None:
        done = subprocess.run(["openssl", *map(str, args)], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            pytest.fail(f"openssl {args[0]} failed: {done.stderr}")

    def server(self, name: str, *, alt: str = "IP:127.0.0.1", days: int = 30) -> tuple[Path, Path]:
        """(certificate, key) for a server named `alt`, issued by the CA; `days` < 0: expired."""
        key, csr, cert = self.root / f"{name}.key", self.root / f"{name}.csr", self.root / f"{name}.pem"
        ext = self.root / f"{name}.ext"
        ext.write_text(f"subjectAltName={alt}\n")
        self._run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-keyout", key,
                  "-out", csr, "-subj", f"/CN={name}")
        self._run("x509", "-req", "-in", csr, "-CA", self.ca, "-CAkey", self.ca_key, "-CAcreateserial", "-out", cert,
                  "-days", str(days), "-extfile", ext)
        return cert, key

    def context(self) -> ssl.SSLContext:
        """A client context that trusts the CA (the tests' own readiness polls)."""
        return ssl.create_default_context(cafile=str(self.ca))
