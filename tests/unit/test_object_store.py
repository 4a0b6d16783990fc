"""A store on S3-compatible object storage (moto's server on 127.0.0.1)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from mimir_core import Mimir
from tests.s3_server import moto_s3, moto_server


@pytest.fixture(scope="module")
def s3() -> Iterator[dict[str, str]]:
    exe = moto_server()
    assert exe is not None, "moto_server is part of the dev extra"
    with moto_s3("mimir-test", exe=exe, wait=30) as options:
        yield options


def test_two_clients_share_one_memory_on_object_storage(s3: dict[str, str], tmp_path: Path) -> None:
    uri = "s3://mimir-test/team-memory"
    laptop = Mimir(tmp_path / "a", store_uri=uri, storage_options=s3, embedder="hash")
    laptop.record(
        "rotate the TLS certificate",
        "certbot renew --force",
        "failure",
        reason="rate limited by ACME: too many certificates",
    )
    laptop.record(
        "rotate the TLS certificate",
        "certbot renew --staging first",
        "success",
        idempotency_key="cert-1",
    )
    server = Mimir(tmp_path / "b", store_uri=uri, storage_options=s3, embedder="hash")
    server.record(
        "rotate the TLS certificate",
        "certbot renew --staging first",
        "success",
        idempotency_key="cert-1",
    )  # same key from another machine: no duplicate
    assert server.stats().experiences == 2
    hits = server.recall("rotate the TLS certificate", k=2, outcome="failure")
    assert hits and hits[0].experience.action == "certbot renew --force"
    rec = laptop.recommend("rotate the TLS certificate")
    assert rec is not None and rec.action == "certbot renew --staging first"
