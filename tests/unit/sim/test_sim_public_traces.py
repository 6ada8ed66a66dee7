"""`ptc sim fetch`: public traces into the cache, each checked against its pinned SHA-256; and
the test helper that finds them or skips naming that command.

Downloads go to a server on loopback (http.server), never to the internet."""

from __future__ import annotations

import dataclasses
import gzip
import hashlib
import http.server
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import tracedata
from tracedata import trace_file
from typer.testing import CliRunner

from elastic.cli.sim import app
from elastic.errors import FetchError
from elastic.sim.traces import load_trace, public

SHIPPED = Path(__file__).resolve().parents[2] / "data" / "traces"
SWF = b"; Version: 2.2\n; Acknowledge: someone\n1 0 5 100 4 -1 -1 4 200 -1 1 1 1 -1 2 -1 -1 -1\n"


@pytest.fixture
def server() -> Iterator[str]:
    """A loopback HTTP server: /t.swf.gz is SWF gzipped, /t.swf is SWF plain."""
    files = {"/t.swf.gz": gzip.compress(SWF), "/t.swf": SWF}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            body = files.get(self.path)
            self.send_response(200 if body else 404)
            self.end_headers()
            self.wfile.write(body or b"")

        def log_message(self, *args: object) -> None:
            pass

    httpd = http.server.HTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("PTC_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache" / "traces"


def served(monkeypatch: pytest.MonkeyPatch, url: str, digest: str, gzipped: bool) -> None:
    trace = dataclasses.replace(
        public.TRACES["kth-sp2"], file="t.swf", url=url, sha256=digest, gzipped=gzipped
    )
    monkeypatch.setitem(public.TRACES, "kth-sp2", trace)


def test_fetch_downloads_checks_and_caches(
    server: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served(monkeypatch, f"{server}/t.swf.gz", hashlib.sha256(SWF).hexdigest(), gzipped=True)
    (path,) = public.fetch(["kth-sp2"])
    assert path == cache / "t.swf" and path.read_bytes() == SWF
    assert load_trace(path).metadata["Acknowledge"] == "someone"
    # Cached and verified: the server is not asked again.
    served(monkeypatch, f"{server}/gone", hashlib.sha256(SWF).hexdigest(), gzipped=True)
    assert public.fetch(["kth-sp2"]) == [path]


def test_a_wrong_checksum_is_refused_and_nothing_is_cached(
    server: str, cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    served(monkeypatch, f"{server}/t.swf", "0" * 64, gzipped=False)
    with pytest.raises(FetchError, match=f"has SHA-256 {hashlib.sha256(SWF).hexdigest()}"):
        public.fetch(["kth-sp2"])
    assert not (cache / "t.swf").exists()


def test_no_network_fails_at_once_naming_url_and_cache(
    cache: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with socket.socket() as sock:  # a loopback port nothing listens on
        sock.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/t.swf.gz"
    served(monkeypatch, url, "0" * 64, gzipped=True)
    result = CliRunner().invoke(app, ["fetch", "kth-sp2"])
    assert isinstance(result.exception, FetchError) and result.exception.exit_code == 7
    message = str(result.exception)
    assert url in message and str(cache) in message and "--from DIR" in message


def test_fetch_from_a_local_copy_checks_it(tmp_path: Path, cache: Path) -> None:
    (path,) = public.fetch(["nrel-eagle"], source_dir=SHIPPED)
    assert path == cache / "nrel-eagle-sample-1000.csv"
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "nrel-eagle-sample-1000.csv").write_text("job_id\n1\n")
    path.unlink()
    with pytest.raises(FetchError, match="not the pinned"):
        public.fetch(["nrel-eagle"], source_dir=tmp_path / "bad")
    assert not path.exists()


def test_shipped_traces_are_the_pinned_ones() -> None:
    eagle = public.TRACES["nrel-eagle"]
    digest = hashlib.sha256((SHIPPED / eagle.file).read_bytes()).hexdigest()
    assert digest == eagle.sha256
    excerpt = load_trace(SHIPPED / "KTH-SP2-1996-2-first-100.swf")
    assert len(excerpt) == 100 and excerpt.metadata["Acknowledge"] == "Lars Malinowsky"
    assert excerpt.metadata["MaxProcs"] == "100"


def test_helper_finds_a_trace_or_skips_naming_the_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert trace_file("nrel-eagle") == SHIPPED / "nrel-eagle-sample-1000.csv"
    monkeypatch.setattr(tracedata, "SHIPPED", tmp_path / "none")
    monkeypatch.setattr(tracedata, "BESIDE", tmp_path / "none")
    monkeypatch.setenv("PTC_CACHE", str(tmp_path / "cache"))
    with pytest.raises(pytest.skip.Exception, match=r"run `bin/ptc sim fetch nrel-eagle`"):
        trace_file("nrel-eagle")
    public.fetch(["nrel-eagle"], source_dir=SHIPPED)
    assert trace_file("nrel-eagle") == tmp_path / "cache" / "traces" / "nrel-eagle-sample-1000.csv"
