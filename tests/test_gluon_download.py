"""mx.gluon.utils.download against a real HTTP server on 127.0.0.1: the file lands whole and
atomically, the SHA-1 and size bounds are checked, an existing file is kept unless asked."""

from __future__ import annotations

import hashlib
import http.server
import os
import threading
from collections.abc import Iterator

import pytest

from mxtorch.base import MXNetError
from mxtorch.gluon.utils import download

BODY = b"mxtorch " * 5000


class _Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path != "/data.bin":
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture()
def server() -> Iterator[str]:
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    t = threading.Thread(target=httpd.serve_forever, daemon=True)
    t.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


def test_download_into_a_folder_checks_sha1_and_keeps_existing_files(server, tmp_path) -> None:
    sha1 = hashlib.sha1(BODY).hexdigest()
    got = download(f"{server}/data.bin", path=str(tmp_path), sha1_hash=sha1)
    assert got == os.path.join(str(tmp_path), "data.bin")
    assert open(got, "rb").read() == BODY and os.listdir(tmp_path) == ["data.bin"]
    with open(got, "wb") as f:
        f.write(b"local")
    assert download(f"{server}/data.bin", path=got) == got and open(got, "rb").read() == b"local"
    download(f"{server}/data.bin", path=got, sha1_hash=sha1)  # a wrong hash fetches it again
    assert open(got, "rb").read() == BODY


def test_bad_hash_oversize_and_http_errors_leave_no_file(server, tmp_path) -> None:
    target = str(tmp_path / "out.bin")
    with pytest.raises(MXNetError, match="SHA-1"):
        download(f"{server}/data.bin", path=target, sha1_hash="0" * 40, retries=0)
    with pytest.raises(MXNetError, match="max_bytes"):
        download(f"{server}/data.bin", path=target, max_bytes=1000, retries=0)
    with pytest.raises(MXNetError, match="404"):
        download(f"{server}/missing", path=target, retries=1)
    assert os.listdir(tmp_path) == []
    with pytest.raises(ValueError, match="retries"):
        download(f"{server}/data.bin", path=target, retries=-1)


def test_unverified_https_warns(server, tmp_path) -> None:
    with pytest.warns(UserWarning, match="Unverified HTTPS request"):
        download(f"{server}/data.bin", path=str(tmp_path), verify_ssl=False)
