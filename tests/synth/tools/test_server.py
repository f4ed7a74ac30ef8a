"""The tool server (GET and POST for each endpoint, errors, masking) and `hopforge tools` on the command line."""

import json
import logging
import socket
import time

import httpx
import pytest
from helpers.searchcorpus import build_test_index
from typer.testing import CliRunner

from flows.cli_tools import tools_app
from synth.tools.search import SearchIndex
from synth.tools.toolbox import Toolbox
from synth.tools.config import ToolsConfig
from synth.tools.server import MAX_JSON_DEPTH, check_loopback, host_problem, json_depth, start_server

JSON = {"Content-Type": "application/json"}


@pytest.fixture(scope="module")
def out(tmp_path_factory):
    root = tmp_path_factory.mktemp("toolserver")
    build_test_index(root)  # root/index: the layout `hopforge index --out root` leaves
    return root


@pytest.fixture(scope="module")
def server(out):
    with start_server(out / "index", ToolsConfig(page_chars=300)) as running:
        yield running


@pytest.fixture(scope="module")
def client(server):
    with httpx.Client(base_url=server.url, timeout=10) as c:
        yield c


@pytest.fixture(scope="module")
def box(out):
    return Toolbox(SearchIndex.open(out / "index"), ToolsConfig(page_chars=300))


def test_health_and_tools(client, box):
    health = client.get("/health").json()
    assert health["status"] == "ok" and health["docs"] > 10
    assert client.get("/tools").json() == box.schemas()


def test_search_get_and_post(client, box):
    expected = json.loads(box.call("search", {"query": "volcano crater", "k": 3})[0])
    assert client.get("/search", params={"q": "volcano crater", "k": 3}).json() == expected
    assert client.post("/search", json={"q": "volcano crater", "k": 3}).json() == expected
    assert client.post("/search", json={"query": "volcano crater", "k": 3}).json() == expected
    got = client.get("/search", params={"q": "volcano"}).json()
    assert len(got) == 5 and all(set(r) == {"page_id", "title", "snippet"} for r in got)


def test_search_exclude_masks(client):
    top = client.get("/search", params={"q": "Paris"}).json()[0]["page_id"]
    got = client.get("/search", params={"q": "Paris", "exclude": top}).json()
    assert top not in [r["page_id"] for r in got]
    got = client.post("/search", json={"q": "volcano", "k": 5, "exclude": ["200", "201"]}).json()
    assert len(got) == 5 and not {"200", "201"} & {r["page_id"] for r in got}
    got = client.get("/search", params={"q": "volcano", "exclude": "200,201"}).json()
    assert not {"200", "201"} & {r["page_id"] for r in got}


def test_open_get_and_post(client, box):
    expected = json.loads(box.call("open", {"page": "105", "offset": 300})[0])
    assert client.get("/open", params={"page": "105", "offset": 300}).json() == expected
    assert client.post("/open", json={"page": "105", "offset": 300}).json() == expected
    first = client.get("/open", params={"page": "Long harbour page"}).json()
    assert first["offset"] == 0 and first["next_offset"] == len(first["text"]) <= 300


def test_find_get_and_post(client, box):
    expected = json.loads(box.call("find", {"page": "Obsidian", "text": "glass"})[0])
    assert client.get("/find", params={"page": "Obsidian", "text": "glass"}).json() == expected
    assert client.post("/find", json={"page": "103", "text": "glass"}).json() == expected
    assert expected["passages"][0]["index"] == 3


@pytest.mark.parametrize("method, path, kw, status, needle", [
    ("GET", "/search", {"params": {}}, 400, "missing argument 'query'"),
    ("GET", "/search", {"params": {"q": "x", "k": "many"}}, 400, "'k' must be an integer"),
    ("GET", "/search", {"params": {"q": "x", "k": 0}}, 400, "'k' must be between"),
    ("POST", "/search", {"content": b"{not json", "headers": JSON}, 400, "not valid JSON"),
    ("POST", "/search", {"content": b"\xff\xfe{", "headers": JSON}, 400, "not valid JSON"),
    ("POST", "/search", {"json": [1, 2]}, 400, "must be a JSON object"),
    ("POST", "/search", {"json": {"q": "x", "exclude": 5}}, 400, "'exclude'"),
    ("GET", "/open", {"params": {"page": "Atlantis"}}, 404, "no page with id or title"),
    ("GET", "/open", {"params": {"page": "103", "offset": -3}}, 400, "'offset' must be >= 0"),
    ("GET", "/open", {"params": {"page": "103", "offset": "1.5"}}, 400, "'offset' must be an integer"),
    ("POST", "/open", {"json": {"page": "103", "offset": 10**7}}, 400, "past the end"),
    ("GET", "/find", {"params": {"page": "103"}}, 400, "missing argument 'text'"),
    ("POST", "/find", {"json": {"page": "103", "text": ""}}, 400, "'text' is empty"),
    ("GET", "/find", {"params": {"page": "103", "text": "x", "bogus": 1}}, 400, "unknown argument(s) bogus"),
])
def test_errors_are_json_with_4xx(client, method, path, kw, status, needle):
    r = client.request(method, path, **kw)
    assert r.status_code == status and needle in r.json()["error"]


def test_hostile_query_over_http(client):
    for q in ['"unbalanced', "AND OR NOT", "title:(x", "🌋", "\\"]:
        r = client.get("/search", params={"q": q})
        assert r.status_code == 200 and isinstance(r.json(), list)


def test_loopback_only():
    for host in ("127.0.0.1", "::1", "localhost", "127.0.0.2"):
        check_loopback(host)
    for host in ("0.0.0.0", "192.168.1.10", "example.com", "::"):
        with pytest.raises(ValueError, match="loopback"):
            check_loopback(host)
    with pytest.raises(ValueError, match="loopback"):
        start_server("unused", host="0.0.0.0")


def test_cli_tools_search_prints_json(out):
    r = CliRunner().invoke(tools_app, ["search", "--out", str(out), "--query", "Paris Hilton", "--k", "2"])
    assert r.exit_code == 0, r.output
    got = json.loads(r.stdout)
    assert len(got) == 2 and got[0]["title"] == "Paris Hilton"
    r = CliRunner().invoke(tools_app, ["search", "--out", str(out), "-q", "Paris", "--exclude", "100"])
    assert r.exit_code == 0 and "100" not in [x["page_id"] for x in json.loads(r.stdout)]


def test_cli_errors_exit_2(out, tmp_path):
    def run(*args):
        r = CliRunner().invoke(tools_app, list(args))
        return r.exit_code, " ".join(r.output.split())  # the error console wraps long lines

    code, text = run("search", "--out", str(tmp_path), "--query", "Paris")
    assert code == 2 and f"hopforge index --out {tmp_path}" in text
    code, text = run("search", "--out", str(out), "--query", "Paris", "--k", "0")
    assert code == 2 and "'k' must be between" in text
    code, text = run("serve", "--out", str(out), "--host", "0.0.0.0")
    assert code == 2 and "loopback" in text
    code, text = run("serve", "--out", str(tmp_path), "--port", "0")
    assert code == 2 and f"hopforge index --out {tmp_path}" in text


def test_request_size_limits(client, server):
    big = 100 << 20
    r = client.post("/search", content=b"x" * big)
    assert r.status_code == 413 and "at most 65,536" in r.json()["error"]

    def trickle():  # no Content-Length: refused once 64 KB have arrived, not read to the end
        for _ in range(64):
            yield b"y" * (1 << 20)

    r = client.post("/search", content=trickle())
    assert r.status_code == 413
    with socket.create_connection((server.host, server.port), timeout=10) as s:  # a URL too long for httpx
        s.sendall(b"GET /search?q=" + b"a" * 70_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        reply = b"".join(iter(lambda: s.recv(4096), b""))
    status = reply.split()[1]
    assert status in (b"413", b"414", b"400"), reply[:200]  # refused by the server or its HTTP parser, never searched
    title = client.get("/search", params={"q": "volcano"}).json()[0]["title"]
    r = client.post("/find", json={"page": title, "text": "z" * 50_000})
    assert r.status_code == 200 and len(r.text) < 2_000  # the pattern is echoed as a short prefix only
    assert client.get("/search", params={"q": "volcano"}).status_code == 200  # and the server still serves


class _Records(logging.Handler):
    """Every record uvicorn logs while attached."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record):
        self.records.append(record)


def _wait_until(condition, what: str, limit: float = 20.0) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"never happened: {what}"  # a hang guard, not a duration
        time.sleep(0.01)


def _half_post(server, declared: int = 200, sent: bytes = b'{"q": "volc') -> socket.socket:
    s = socket.create_connection((server.host, server.port), timeout=20)
    s.sendall(b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
              b"Content-Length: %d\r\n\r\n" % declared + sent)
    return s


def test_a_client_gone_mid_body_logs_nothing_and_the_server_still_answers(out):
    with start_server(out / "index", ToolsConfig()) as running:
        logged = _Records()
        logging.getLogger("uvicorn").addHandler(logged)
        try:
            for _ in range(5):
                s = _half_post(running)
                _wait_until(lambda: running.requests_in_flight == 1, "the handler awaits the body")
                s.close()
                _wait_until(lambda: running.requests_in_flight == 0, "the handler ended")
        finally:
            logging.getLogger("uvicorn").removeHandler(logged)
        assert [r.getMessage() for r in logged.records if r.exc_info or r.levelno >= logging.ERROR] == []
        r = httpx.get(running.url + "/search", params={"q": "volcano"}, timeout=10)
        assert r.status_code == 200 and r.json()


def _closed_by_server(s: socket.socket) -> bool:
    """Whether the server closed ``s`` (recv gives b'' or a reset) before the socket's own timeout."""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                return True
    except ConnectionResetError:
        return True
    except socket.timeout:
        return False


@pytest.mark.parametrize("opening", [
    b"",  # connects and says nothing
    b"GET /search?q=volcano HTTP/1.1\r\nHost: 127.0.0.1\r\n",  # headers never finished
    b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 200\r\n\r\n{\"q\": ",  # half a body
], ids=["silent", "half-headers", "half-body"])
def test_a_half_sent_request_is_closed_after_request_timeout(out, opening):
    cfg = ToolsConfig(request_timeout_s=0.2, idle_timeout_s=0.2)
    with start_server(out / "index", cfg) as running:
        with socket.create_connection((running.host, running.port), timeout=20) as s:
            s.sendall(opening)
            assert _closed_by_server(s)
        _wait_until(lambda: running.requests_in_flight == 0, "the handler ended")
        assert httpx.get(running.url + "/search", params={"q": "volcano"}, timeout=10).status_code == 200


def test_an_idle_keep_alive_connection_is_closed_and_a_prompt_one_is_served(out):
    cfg = ToolsConfig(request_timeout_s=0.2, idle_timeout_s=0.2)
    with start_server(out / "index", cfg) as running:
        with socket.create_connection((running.host, running.port), timeout=20) as s:
            s.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            reply = s.recv(65536)
            assert reply.startswith(b"HTTP/1.1 200")
            assert _closed_by_server(s)  # after the answer, nothing more comes: closed once idle


def test_a_url_up_to_max_request_bytes_reaches_the_app_even_in_pieces(server):
    # ~20 KB, past h11's own 16 KB limit on a request line still arriving: the app answers it, not the parser
    line = b"GET /search?q=" + b"+".join([b"volcano"] * 2500) + b" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    with socket.create_connection((server.host, server.port), timeout=20) as s:
        s.sendall(line[:17_000])
        time.sleep(0.2)  # let the server read the first piece alone
        s.sendall(line[17_000:])
        reply = b"".join(iter(lambda: s.recv(4096), b""))
    assert reply.split()[1] == b"200", reply[:200]


class _Logged(_Records):
    """Records of the server's loggers (uvicorn's and the app's) while in a ``with`` block."""

    NAMES = ("uvicorn", "uvicorn.error", "uvicorn.access", "hopforge")

    def __enter__(self):
        for name in self.NAMES:
            logging.getLogger(name).addHandler(self)
        return self

    def __exit__(self, *exc):
        for name in self.NAMES:
            logging.getLogger(name).removeHandler(self)

    def problems(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.exc_info or r.levelno >= logging.ERROR]


@pytest.mark.parametrize("levels", [MAX_JSON_DEPTH + 1, 900, 5_000, 30_000])
def test_deeply_nested_json_is_a_400_not_a_traceback(client, levels):
    body = b'{"query": ' + b"[" * levels + b'"x"' + b"]" * levels + b"}"
    assert len(body) < 65_536  # under the size limit: the depth alone is refused
    with _Logged() as logged:
        r = client.post("/search", content=body, headers=JSON)
    assert r.status_code == 400 and f"more than {MAX_JSON_DEPTH} levels deep" in r.json()["error"]
    assert logged.problems() == []
    nested = {"query": "volcano", "exclude": ["200"]}  # the deepest a real body gets: 2 levels
    assert json_depth(nested) == 2 and client.post("/search", json=nested).status_code == 200


def test_json_depth_counts_without_recursing():
    assert [json_depth(v) for v in (1, "x", [], {}, [[1]], {"a": [{"b": 1}]})] == [0, 0, 1, 1, 2, 3]
    deep: list = []
    for _ in range(100_000):  # far past the recursion limit
        deep = [deep]
    assert json_depth(deep) == 100_001


@pytest.mark.parametrize("headers", [
    {"Content-Type": "text/plain"},  # what a web page may send cross-origin without a preflight
    {"Content-Type": "application/x-www-form-urlencoded"},
    {"Content-Type": "multipart/form-data; boundary=x"},
    {},  # no type at all
], ids=["text-plain", "form", "multipart", "none"])
def test_a_post_body_that_is_not_declared_json_is_refused(client, headers):
    r = client.post("/search", content=b'{"query": "volcano"}', headers=headers)
    assert r.status_code == 415
    assert "Content-Type: application/json" in r.json()["error"]
    sent = headers.get("Content-Type")
    assert (repr(sent) if sent else "no Content-Type") in r.json()["error"]


def test_json_with_parameters_and_an_empty_post_are_accepted(client):
    r = client.post("/search", content=b'{"query": "volcano", "k": 1}',
                    headers={"Content-Type": "Application/JSON; charset=utf-8"})
    assert r.status_code == 200 and len(r.json()) == 1
    r = client.post("/search", params={"q": "volcano", "k": 1})  # no body: the query string alone
    assert r.status_code == 200 and len(r.json()) == 1


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "LOCALHOST", "[::1]", "127.0.0.2"])
def test_a_loopback_host_header_is_served(server, host):
    with httpx.Client(base_url=server.url, timeout=10) as c:
        assert c.get("/health", headers={"Host": f"{host}:{server.port}"}).status_code == 200
        assert c.get("/health", headers={"Host": host}).status_code == 200


@pytest.mark.parametrize("host", [
    "evil.example", "evil.example:8765",  # DNS rebinding: the page's own name, resolved to 127.0.0.1
    "localhost.evil.example", "127.0.0.1.nip.io", "10.0.0.1", "[::]", "0.0.0.0",
    "127.0.0.1:99999", "127.0.0.1:port", "user@127.0.0.1", "127.0.0.1/path", "",
])
def test_a_host_header_not_naming_loopback_is_refused_on_every_route(server, host):
    assert host_problem(host) is not None
    with httpx.Client(base_url=server.url, timeout=10) as c:
        for method, path in (("GET", "/health"), ("GET", "/tools"), ("GET", "/search?q=volcano"),
                             ("POST", "/open"), ("GET", "/docs")):
            r = c.request(method, path, headers={"Host": host}, json={"page": "103"} if method == "POST" else None)
            assert r.status_code == 400, (host, path)
            assert ("Host header" in r.json()["error"]) and "loopback" in r.json()["error"]


def test_a_request_without_a_host_header_is_refused(server):
    with socket.create_connection((server.host, server.port), timeout=10) as s:  # HTTP/1.0 may leave Host out
        s.sendall(b"GET /health HTTP/1.0\r\n\r\n")
        reply = b"".join(iter(lambda: s.recv(4096), b""))
    assert reply.split()[1] == b"400" and b"no Host header" in reply
