"""The TLS part of `:checkhealth` and `local-copilot doctor`: an https entry's certificate as
the server presents it (subject, issuer, names, expiry) and whether it passes the check with
the entry's trust (access.py), and the warning `tls_verify = false` earns on every run.

The certificate is fetched without checking it, for display only (nothing is sent on that
connection): a certificate that fails the check is exactly the one the user needs to see.
Its fields are read from its DER form here; no X.509 library is needed for four fields.
"""

from __future__ import annotations

import asyncio
import ipaddress
import ssl
import time
from datetime import UTC, datetime
from urllib.parse import urlsplit

import msgspec

from ..backend_config import BackendConfig
from ..transport.access import certificate_verdict, tls_context
from .checks import Item

__all__ = ["CertInfo", "judge_tls_verify", "parse_der", "peer_certificate", "tls_items"]

EXPIRES_SOON_DAYS = 14


class CertInfo(msgspec.Struct, frozen=True, kw_only=True):
    subject: str
    issuer: str
    not_before: float  # seconds since the epoch
    not_after: float
    names: list[str] = []  # its subjectAltName DNS names and IP addresses


def judge_tls_verify(name: str, bcfg: BackendConfig) -> Item | None:
    """`tls_verify = false` is a warning every time the report runs (configuration section)."""
    if bcfg.tls_verify:
        return None
    return Item(level="warn", message=f"backends[{name!r}].tls_verify = false: the certificate of {bcfg.url} is not "
                                      "checked, so whoever sits between can read the code sent and the token",
                advice=[f"set backends[{name!r}].ca_file to the PEM of the CA that issued it, and drop tls_verify"])


async def tls_items(name: str, bcfg: BackendConfig, timeout: float) -> list[Item]:
    """The certificate of an https entry's server, and the check's verdict with its trust."""
    if not bcfg.url.startswith("https://"):
        return []
    try:
        info = await peer_certificate(bcfg.url, timeout)
    except (OSError, ssl.SSLError, TimeoutError, ValueError):
        return []  # no TLS server there: the reachability line says why
    shown = describe(info)
    if not bcfg.tls_verify:
        return [Item(level="info", message=f"certificate: {shown} (not checked)")]
    parts = urlsplit(bcfg.url)
    try:
        async with asyncio.timeout(timeout):
            _, writer = await asyncio.open_connection(parts.hostname, parts.port or 443, ssl=tls_context(bcfg))
        writer.close()
    except ssl.SSLCertVerificationError as err:
        what, fix = certificate_verdict(err)
        fix = fix.replace("ca_file", f"backends[{name!r}].ca_file").replace(" url", f" backends[{name!r}].url")
        if "ca_file" in fix:
            fix += f" ({info.issuer})"
        return [Item(level="error", message=f"certificate {what}: {shown}", advice=[fix])]
    except (OSError, ssl.SSLError, TimeoutError):
        return []
    trust = f"trusted through backends[{name!r}].ca_file" if bcfg.ca_file else "trusted by the system"
    days = (info.not_after - time.time()) / 86400
    if days < EXPIRES_SOON_DAYS:
        return [Item(level="warn", message=f"certificate expires in {max(days, 0):.0f} days: {shown}",
                     advice=["renew the server's certificate before it expires"])]
    return [Item(level="ok", message=f"certificate {trust}: {shown}")]


def describe(info: CertInfo) -> str:
    until = datetime.fromtimestamp(info.not_after, UTC).strftime("%Y-%m-%d %H:%M UTC")
    names = f" for {', '.join(info.names[:4])}" if info.names else ""
    return f"subject {info.subject}{names}, issuer {info.issuer}, expires {until}"


async def peer_certificate(url: str, timeout: float) -> CertInfo:
    """The certificate the server at `url` presents, unchecked (for display)."""
    parts = urlsplit(url)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    async with asyncio.timeout(timeout):
        _, writer = await asyncio.open_connection(parts.hostname, parts.port or 443, ssl=ctx)
    try:
        der = writer.get_extra_info("ssl_object").getpeercert(binary_form=True)
    finally:
        writer.close()
    if not der:
        raise ValueError("no certificate")
    return parse_der(der)


# -- DER ---------------------------------------------------------------------------------

_ATTRS = {b"\x55\x04\x03": "CN", b"\x55\x04\x0a": "O", b"\x55\x04\x0b": "OU"}
_SAN = b"\x55\x1d\x11"


def _tlv(data: bytes, i: int) -> tuple[int, int, int]:
    """(tag, start of the value, its end) of the element at `i`."""
    tag, n = data[i], data[i + 1]
    i += 2
    if n & 0x80:
        k = n & 0x7F
        n = int.from_bytes(data[i:i + k], "big")
        i += k
    if i + n > len(data):
        raise ValueError("truncated DER")
    return tag, i, i + n


def _children(data: bytes, start: int, end: int) -> list[tuple[int, int, int]]:
    out = []
    while start < end:
        tag, s, e = _tlv(data, start)
        out.append((tag, s, e))
        start = e
    return out


def _name(data: bytes, start: int, end: int) -> str:
    parts = []
    for _, s, e in _children(data, start, end):  # SET
        for _, s2, e2 in _children(data, s, e):  # SEQUENCE { OID, value }
            (_, os_, oe), (_, vs, ve) = _children(data, s2, e2)[:2]
            attr = _ATTRS.get(data[os_:oe])
            if attr:
                parts.append(f"{attr}={data[vs:ve].decode('utf-8', 'replace')}")
    return ", ".join(parts) or "(no name)"


def _time(data: bytes, tag: int, start: int, end: int) -> float:
    text = data[start:end].decode("ascii").rstrip("Z")
    if tag == 0x17:  # UTCTime: YYMMDDHHMMSS
        year = int(text[:2])
        text = f"{1900 + year if year >= 50 else 2000 + year}{text[2:]}"
    return datetime.strptime(text[:14], "%Y%m%d%H%M%S").replace(tzinfo=UTC).timestamp()


def _alt_names(data: bytes, start: int, end: int) -> list[str]:
    names: list[str] = []
    for _, s, e in _children(data, start, end):  # Extension
        fields = _children(data, s, e)
        if data[fields[0][1]:fields[0][2]] != _SAN:
            continue
        _, os_, oe = fields[-1]  # OCTET STRING holding GeneralNames
        _, gs, ge = _tlv(data, os_)
        for tag, ns, ne in _children(data, gs, ge):
            if tag == 0x82:
                names.append(data[ns:ne].decode("ascii", "replace"))
            elif tag == 0x87 and ne - ns in (4, 16):
                names.append(str(ipaddress.ip_address(data[ns:ne])))
    return names


def parse_der(der: bytes) -> CertInfo:
    """Subject, issuer, validity and alternative names of an X.509 certificate in DER."""
    _, cs, ce = _tlv(der, 0)
    _, ts, te = _children(der, cs, ce)[0]  # tbsCertificate
    fields = _children(der, ts, te)
    if fields[0][0] == 0xA0:  # [0] version
        fields = fields[1:]
    issuer, validity, subject = fields[2], fields[3], fields[4]
    (t1, s1, e1), (t2, s2, e2) = _children(der, validity[1], validity[2])
    names: list[str] = []
    for tag, s, _e in fields[6:]:
        if tag == 0xA3:  # [3] extensions
            _, xs, xe = _tlv(der, s)
            names = _alt_names(der, xs, xe)
    return CertInfo(subject=_name(der, subject[1], subject[2]), issuer=_name(der, issuer[1], issuer[2]),
                    not_before=_time(der, t1, s1, e1), not_after=_time(der, t2, s2, e2), names=names)
