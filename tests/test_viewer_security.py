"""The viewer's server is reachable by whatever reaches its port: stores only by opaque id, no path from
the client ever joined to the filesystem (``..``, encoded, absolute, NUL), a Host header it was not
started for refused (DNS rebinding), requests capped, no CORS, and off loopback a token on every
request (tested against a real server on all interfaces). Silent and slow clients are dropped; many
clients at once get no errors."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from starlette.testclient import TestClient

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy
from cubeslab.viewer.app import make_app
from cubeslab_bench.viewer_server import viewer_server

CLI = Path(sys.executable).parent / "cubeslab"


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("secure")
    write_segy(folder / "s.sgy", SyntheticSurvey(20, 30, 40), sample_format=5)
    cubeslab.ingest(folder / "s.sgy", folder / "s.zarr")
    (folder / "s.zarr" / "outside").symlink_to("/etc")  # a link out of the store
    return folder / "s.zarr"


@pytest.fixture(scope="module")
def client(store):
    return TestClient(make_app([str(store)]), base_url="http://127.0.0.1")


@pytest.fixture(scope="module")
def store_id(client) -> str:
    [listed] = client.get("/api/stores").json()
    assert re.fullmatch(r"[0-9a-f]{8}", listed["id"])  # opaque: no path in it
    return listed["id"]


@pytest.mark.parametrize(
    "path",
    [
        "/static/../app.py",
        "/static/%2e%2e/app.py",
        "/static/%2e%2e%2fapp.py",
        "/static//etc/passwd",
        "/static/..%2f..%2f..%2fetc%2fpasswd",
        "/static/viewer.js%00.png",
        "/api/stores/..%2f..%2fetc",
        "/api/stores/%2fetc%2fpasswd/plane?axis=0&index=0&h=1&w=1",
        "/api/stores/outside",
        "/s.zarr/zarr.json",
        "/outside/passwd",
    ],
)
def test_no_path_from_the_client_reaches_the_filesystem(client, path):
    response = client.get(path)
    assert response.status_code in (400, 404), (path, response.status_code)
    assert b"root:" not in response.content and b"def make_app" not in response.content


def test_requests_are_checked_and_capped(client, store_id):
    base = f"/api/stores/{store_id}"
    assert client.get(f"{base}/plane?axis=0&index=3&h=30&w=40").status_code == 200
    cases = {
        "h=100000&w=40": "each side must be 1 to 4096",
        "h=abc&w=40": "is not an integer",
        "w=40": "h is required",
        "h=30&w=40&index=99": "no plane 99",
        "h=30&w=40&axis=7": "no plane",
        "h=30&w=40&r0=5&r1=400": "outside",
        "h=30&w=40&index=" + "9" * 40: "is not an integer",
        "h=30&w=40&r0=--1": "r0='--1' is not an integer",
        "h=30&w=40&index=%C2%B2": "index='²' is not an integer",  # a digit to str.isdigit, not to int()
        "h=30&w=40&index=%EF%BC%91": "index='１' is not an integer",  # full-width 1
    }
    for query, message in cases.items():
        query = query if "index=" in query else "index=3&" + query
        query = query if "axis=" in query else "axis=0&" + query
        response = client.get(f"{base}/plane?{query}")
        assert response.status_code == 400 and message in response.json()["error"], (query, response.text)
    assert client.get(f"{base}/sample?i=99&j=0&k=0").status_code == 400


def test_a_plane_within_the_cap_is_read_at_a_step_that_keeps_it_within(tmp_path):
    """A region wider than twice the asked width is read every n-th sample, at most 4096 a side: a
    request within the cap is answered, never refused after a read of the whole region."""
    values = np.arange(2 * 8191 * 3, dtype="float32").reshape(2, 8191, 3)
    with cubeslab.create(tmp_path / "wide.zarr", values.shape, "float32", dims=["a", "b", "c"]) as array:
        array[...] = values
    client = TestClient(make_app([str(tmp_path / "wide.zarr")]), base_url="http://127.0.0.1")
    [listed] = client.get("/api/stores").json()
    response = client.get(f"/api/stores/{listed['id']}/plane?axis=2&index=1&h=2&w=2048")
    assert response.status_code == 200, response.text
    where = json.loads(response.headers["x-plane"])
    got = np.frombuffer(response.content, "<f4").reshape(where["shape"])
    assert where["factors"] == [1, 2] and max(got.shape) <= 4096
    assert np.array_equal(got, values[:, ::2, 1])


def test_an_ipv6_loopback_server_answers_and_prints_a_url_with_brackets(store):
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback on this machine")
    client = TestClient(make_app([str(store)], host="::1"), base_url="http://[::1]:8000")
    assert client.get("/api/stores").status_code == 200
    assert client.get("/api/stores", headers={"host": "evil.example"}).status_code == 400
    with viewer_server([store], "--host", "::1", wait=False) as (process, _):
        assert process.stderr is not None
        line = process.stderr.readline()
        url = re.search(r"http://\S+", line)
        assert url and url.group(0).startswith("http://[::1]:"), line
        for _ in range(100):
            try:
                with urllib.request.urlopen(url.group(0) + "api/stores", timeout=5) as answer:
                    assert answer.status == 200
                    break
            except urllib.error.URLError:
                time.sleep(0.1)
        else:
            raise AssertionError(f"no answer at {url.group(0)}")


def test_a_foreign_host_header_is_refused_and_no_cors_is_sent(client, store_id):
    assert client.get("/api/stores", headers={"host": "evil.example"}).status_code == 400
    response = client.get(f"/api/stores/{store_id}", headers={"origin": "http://evil.example"})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


def test_the_server_never_writes_to_a_store(client, store_id, store):
    before = {p: p.stat().st_mtime_ns for p in store.rglob("*") if p.is_file()}
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)(f"/api/stores/{store_id}").status_code == 405
    client.get(f"/api/stores/{store_id}/plane?axis=2&index=5&h=20&w=30")
    assert {p: p.stat().st_mtime_ns for p in store.rglob("*") if p.is_file()} == before


def test_off_loopback_every_request_needs_the_token(store):
    with viewer_server([store], "--host", "0.0.0.0", wait=False) as (process, base):
        assert process.stderr is not None
        line = process.stderr.readline()
        token = re.search(r"\?token=([\w-]+)", line)
        assert token, line
        url = f"{base}/api/stores"
        deadline = time.monotonic() + 30
        while True:
            try:
                urllib.request.urlopen(url, timeout=1)
                pytest.fail("a request without the token was answered")
            except urllib.error.HTTPError as refused:
                assert refused.code == 403
                break
            except OSError:
                assert time.monotonic() < deadline
                time.sleep(0.1)
        with urllib.request.urlopen(f"{url}?token={token.group(1)}", timeout=5) as answered:
            assert answered.status == 200
        request = urllib.request.Request(url, headers={"X-Cubeslab-Token": token.group(1)})
        with urllib.request.urlopen(request, timeout=5) as answered:
            assert answered.status == 200
        with pytest.raises(urllib.error.HTTPError, match="403"):
            urllib.request.urlopen(f"{url}?token=wrong", timeout=5)


def answer(url: str, **headers: str) -> int:
    """The status of a GET of ``url``, once the server that was just started answers."""
    deadline = time.monotonic() + 30
    while True:
        try:
            with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=5) as answered:
                return answered.status
        except urllib.error.HTTPError as refused:
            return refused.code
        except OSError:
            assert time.monotonic() < deadline, f"no answer at {url}"
            time.sleep(0.1)


def test_off_loopback_the_page_s_own_files_need_no_token_and_the_url_printed_can_be_browsed(store):
    with viewer_server([store], "--host", "0.0.0.0", wait=False) as (process, base):
        assert process.stderr is not None
        line = process.stderr.readline()
        url = re.search(r"http://\S+", line)
        assert url and url.group(0).startswith(f"{base}/?token="), line  # not http://0.0.0.0:...
        assert "every interface" in line, line
        assert answer(url.group(0)) == 200
        for name in ("viewer.js", "viewer.css", "msi.js"):  # as the page's <script> and <link> ask
            assert answer(f"{base}/static/{name}") == 200, name
        assert answer(f"{base}/") == 403 and answer(f"{base}/api/stores") == 403
        assert answer(f"{base}/static/../api/stores") in (403, 404)


def test_slow_and_silent_clients_are_dropped(store):
    with viewer_server([store]) as (_, base):
        port = int(base.rsplit(":", 1)[1])
        silent = socket.create_connection(("127.0.0.1", port))
        slow = socket.create_connection(("127.0.0.1", port))
        slow.sendall(b"GET /api/stores HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # and never the blank line
        started = time.monotonic()
        for client in (silent, slow):
            client.settimeout(30)
            assert client.recv(100) == b""  # closed by the server
        assert time.monotonic() - started < 15


def test_fifty_clients_stepping_through_planes_get_no_errors(store):
    """A short load test on localhost: 50 clients for 5 s against the real server (the benchmark runs
    it for 30 s and reports latencies)."""
    with viewer_server([store]) as (_, base):
        with urllib.request.urlopen(f"{base}/api/stores", timeout=5) as listed:
            store_id = re.search(rb'"id":"(\w+)"', listed.read()).group(1).decode()  # type: ignore[union-attr]
        failures: list[str] = []
        answered = [0]
        stop = time.monotonic() + 5

        def client(n: int) -> None:
            index = n
            while time.monotonic() < stop:
                index = (index + 1) % 20
                try:
                    url = f"{base}/api/stores/{store_id}/plane?axis=0&index={index}&h=30&w=40"
                    with urllib.request.urlopen(url, timeout=30) as response:
                        assert len(response.read()) == 30 * 40 * 4
                    answered[0] += 1
                except Exception as error:  # every failure is counted
                    failures.append(repr(error))

        threads = [threading.Thread(target=client, args=(n,)) for n in range(50)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        assert not failures, failures[:3]
        assert answered[0] > 50


def test_a_port_already_taken_is_said_before_any_url(store):
    # Another server on the port: the command says so and exits 1; no URL that would lead to that server.
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [str(CLI), "view", str(store), "--port", str(port)], capture_output=True, text=True, timeout=60
        )
    assert done.returncode == 1, done.stderr
    assert f"127.0.0.1:{port}: cannot listen there" in done.stderr
    assert "http://" not in done.stderr and "Traceback" not in done.stderr
