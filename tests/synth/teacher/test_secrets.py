"""The API key, and what a URL carries, never appear in a message in any form; a key that cannot be
sent is named in one line."""

from __future__ import annotations

from urllib.parse import quote

import pytest

from flows.config import load_config
from helpers.openai_server import Reply, Status, serve
from synth.engine.config import ConfigError
from synth.teacher.client import Teacher, TeacherConfig, TeacherError
from synth.teacher.openai_compat import OpenAIBackend
from synth.teacher.types import scrub, secret_forms

KEY_ENV = "HOPFORGE_TEST_SECRETS_KEY"
KEY = "sk-proj-A1b2/C3d4+E5f6=secret"


def cfg(**kw) -> TeacherConfig:
    return TeacherConfig(**{"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": "m",
                            "api_key_env": KEY_ENV, "max_retries": 0, "tool_protocol": "native", **kw})


def test_every_form_of_the_key_is_scrubbed():
    raw = KEY + "\r"  # a copy-paste accident: the client printed it as b'Bearer sk-...\r'
    message = (f"Illegal header value b'Bearer {raw}'; repr {raw!r}; bytes {('Bearer ' + raw).encode()!r}; url "
               f"?key={quote(KEY, safe='')}; json \"{KEY}\\r\"; stripped {KEY}")
    out = scrub(message, raw)
    for form in secret_forms(raw):
        assert form not in out
    assert "sk-proj" not in out and "A1b2" not in out and "C3d4" not in out and out.count("***") >= 6
    assert scrub("no key here", "") == "no key here" and scrub("abc", "ab") == "abc"  # too short to scrub


def test_a_server_echoing_the_key_in_odd_forms_never_shows_it(tmp_path, monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    echo = f"invalid key {KEY!r} / {quote(KEY, safe='')} / {('Bearer ' + KEY + chr(13)).encode()!r}"
    with serve(handler=lambda req: Status(400, message=echo)) as srv:
        t = Teacher(cfg(base_url=srv.base_url), tmp_path / "t.sqlite")
        with pytest.raises(TeacherError) as e:
            t.chat_sync([{"role": "user", "content": "q"}])
    assert e.value.reason == "http_400" and "invalid key" in str(e.value)
    assert "A1b2" not in str(e.value) and "A1b2%2FC3d4" not in str(e.value)


def test_a_key_with_a_trailing_carriage_return_is_stripped_and_sent(tmp_path, monkeypatch):
    # It used to fail as "nothing answers at teacher.base_url ... Illegal header value b'Bearer sk-...\r'".
    monkeypatch.setenv(KEY_ENV, f"  {KEY}\r\n")
    with serve(handler=lambda req: Reply(content="hi")) as srv:
        resp = Teacher(cfg(base_url=srv.base_url), tmp_path / "t.sqlite").chat_sync([{"role": "user", "content": "q"}])
        assert resp.content == "hi" and srv.requests[0].headers["authorization"] == f"Bearer {KEY}"


@pytest.mark.parametrize("key, said", [(KEY[:8] + "\r" + KEY[8:], "contains a control character (at position 9 of"),
                                       (KEY[:8] + "\x1b" + KEY[8:], "contains a control character"),
                                       (KEY[:8] + "é" + KEY[8:], "contains a non-ASCII character (at position 9 of")])
def test_a_key_that_cannot_travel_in_a_header_is_one_line_naming_the_variable(monkeypatch, key, said):
    # A non-ASCII key used to end in a UnicodeEncodeError traceback; an inner \r in "nothing answers at".
    monkeypatch.setenv(KEY_ENV, key)
    with pytest.raises(ConfigError) as e:
        Teacher(cfg(), None)
    msg = str(e.value)
    assert f"the API key in {KEY_ENV} (teacher.api_key_env) {said}" in msg and "\n" not in msg
    assert KEY[:8] not in msg and KEY[9:] not in msg and "nothing answers" not in msg


def test_an_unset_key_still_says_how_to_set_it(monkeypatch):
    monkeypatch.setenv(KEY_ENV, " \r\n")
    with pytest.raises(ConfigError, match=f"{KEY_ENV} \\(teacher.api_key_env\\) is unset or empty.*EMPTY"):
        Teacher(cfg(), None)


@pytest.mark.parametrize("url", ["http://user:sk-url-secret@host/v1", "http://sk-url-secret@host/v1?k=sk-q-secret"])
def test_credentials_in_base_url_are_rejected_without_repeating_them(url):
    with pytest.raises(ConfigError) as e:
        load_config(None, [f"teacher.base_url={url}"])
    msg = str(e.value)
    assert "must not carry credentials" in msg and "sk-url-secret" not in msg and "sk-q-secret" not in msg
    assert "user:" not in msg.replace("(user:password@)", "") and "http://***@host/v1" in msg


def test_a_urls_query_string_is_never_shown(monkeypatch):
    monkeypatch.setenv(KEY_ENV, KEY)
    c = cfg(base_url="http://host:8000/v1?api-key=sk-q-secret#frag")
    assert c.display_url() == "http://host:8000/v1"
    backend = OpenAIBackend(c)
    assert "sk-q-secret" not in backend.scrub("GET http://host:8000/v1?api-key=sk-q-secret failed")
    assert "sk-q-secret" not in repr(backend)
