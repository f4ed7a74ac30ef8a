"""The data explorer in a real browser: Debian's headless Chromium opens ``index.html`` from file://.

The run folder is the one ``test_explorer.py`` builds (questions, dropped questions, walks,
traces, the production ``filter`` stage), plus the production ``report`` stage for the
figures.  Selenium drives Chromium through ``/usr/bin/chromedriver`` (given to ``Service``, so
Selenium Manager never runs or downloads anything).  Chromium and its driver come from
``scripts/ensure_chromium.sh`` (``make test`` runs it); without them these tests fail, unless
``HOPFORGE_SKIP_BROWSER=1``.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path

import pytest

from helpers.filterstore import config, publish
from helpers.traces import make_question
from synth.engine.records import Question
from synth.engine.runner import run_stage
from synth.engine.store import Store
from synth.report.explorer import write_explorer

pytestmark = pytest.mark.slow

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage",
         "--window-size=1500,1100"]


def _sibling():
    """``test_explorer.py``, for its run builder and readers."""
    spec = importlib.util.spec_from_file_location("explorer_data_tests", Path(__file__).with_name("test_explorer.py"))
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return mod


data = _sibling()


def need_browser() -> None:
    """Skip only when asked to; a missing Chromium or Selenium is a failure that says how to get them."""
    if os.environ.get("HOPFORGE_SKIP_BROWSER") == "1":
        pytest.skip("HOPFORGE_SKIP_BROWSER=1: the browser tests of the explorer are skipped")
    missing = [str(p) for p in (CHROMIUM, CHROMEDRIVER) if not p.exists()]
    if missing:
        pytest.fail(f"{' and '.join(missing)} not found: run `bash scripts/ensure_chromium.sh` (as root; `make test` "
                    "runs it) to install Debian's chromium and chromium-driver, or set HOPFORGE_SKIP_BROWSER=1",
                    pytrace=False)
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.fail("selenium is not installed: `.venv/bin/pip install -c requirements.lock -e '.[dev]'`", pytrace=False)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> tuple[Path, Store, dict]:
    """A run folder, its report (figures), and the explorer written beside them."""
    need_browser()
    from flows.stages import REPORT

    root = tmp_path_factory.mktemp("explorer-browser")
    store = data.build_run(root / "run", root / "tok")
    outcome = run_stage(REPORT, config(), store)
    out = root / "report"
    shutil.copytree(store.path("report"), out)
    info = write_explorer(store, out, outcome.report["figures"], outcome.report["summary"])
    index, _ = data.load(out)
    return out, store, index | {"info": info}


@pytest.fixture(scope="module")
def driver(tmp_path_factory):
    need_browser()
    os.environ.setdefault("SE_OFFLINE", "true")  # belt and braces: Selenium Manager must never fetch a driver
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = str(CHROMIUM)
    for flag in FLAGS + [f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}"]:
        opts.add_argument(flag)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    d = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=opts)
    d.set_page_load_timeout(60)
    yield d
    d.quit()


def wait(driver, script: str, timeout: float = 20):
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(driver, timeout).until(lambda d: d.execute_script(script))


def open_page(driver, out: Path, fragment: str = "") -> None:
    driver.get((out / "index.html").as_uri() + fragment)
    wait(driver, "return window.__hopforge && window.__hopforge.ready")


def assert_no_errors(driver) -> None:
    """No uncaught error in the page and nothing logged at SEVERE (JS errors, failed loads)."""
    severe = [e for e in driver.get_log("browser") if e["level"] == "SEVERE"]
    assert severe == []
    assert driver.execute_script("return window.__hopforge.errors") == []


def rows(driver) -> list[str]:
    return driver.execute_script("return Array.from(document.querySelectorAll('#rows tr')).map(r => r.dataset.qid)")


def select(driver, element_id: str, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    Select(driver.find_element(By.ID, element_id)).select_by_visible_text(text)


def expected(index: dict, split: str | None = None, status: int | None = None, reason: str | None = None,
             search: str = "") -> list[str]:
    """The ids the table should list, computed from the index data (the page's rules)."""
    c = index["cols"]
    out = []
    for i, qid in enumerate(c["id"]):
        if split is not None and index["splits"][c["split"][i]] != split:
            continue
        if status is not None and c["status"][i] != status:
            continue
        if reason is not None:
            k = index["reasons"].index(reason)
            if c["reason"][i] != k and k not in c["trace_reasons"][i]:
                continue
        hay = "\n".join([qid, c["text"][i], c["answer"][i], c["titles"][i]]).lower()
        if not all(t in hay for t in search.lower().split()):
            continue
        out.append(qid)
    return out


def option_text(index: dict, reason: str) -> str:
    return f"{reason} ({index['reason_counts'][index['reasons'].index(reason)]})"


def test_page_opens_from_disk_with_funnel_figures_and_table(site, driver) -> None:
    out, _, index = site
    open_page(driver, out)
    assert rows(driver) == index["cols"]["id"]
    assert driver.execute_script("return document.getElementById('count').textContent") == "8 questions"
    stages = driver.execute_script(
        "return Array.from(document.querySelectorAll('#funnel tbody tr')).map(r => r.cells[0].textContent)")
    assert stages == [r["stage"] for r in index["meta"]["funnel"]] and "filter" in stages
    # Every figure is drawn from the report folder (relative file:// URLs).
    figs = driver.execute_script(
        "return Array.from(document.querySelectorAll('#figures img')).map(i => [i.getAttribute('src'), i.complete, "
        "i.naturalWidth])")
    assert [f[0] for f in figs] == [f["file"] for f in index["meta"]["figures"]] and len(figs) >= 5
    driver.execute_script("document.querySelectorAll('#figures img').forEach(i => i.loading = 'eager')")
    wait(driver, "return Array.from(document.querySelectorAll('#figures img')).every(i => i.complete && i.naturalWidth > 0)")
    assert_no_errors(driver)


def test_filters_and_search_narrow_the_table(site, driver) -> None:
    from selenium.webdriver.common.by import By

    out, _, index = site
    open_page(driver, out)
    select(driver, "f-split", "rl")
    assert rows(driver) == expected(index, split="rl") == ["qc", "qd"]
    select(driver, "f-kept", "dropped")
    assert rows(driver) == expected(index, split="rl", status=0) == ["qd"]
    driver.find_element(By.ID, "reset").click()
    assert rows(driver) == index["cols"]["id"]
    select(driver, "f-reason", option_text(index, "filter: wrong_answer"))
    assert rows(driver) == expected(index, reason="filter: wrong_answer") == ["qa", "qc"]
    select(driver, "f-reason", option_text(index, "questions: ambiguous_hop"))
    assert rows(driver) == ["qx"]
    driver.find_element(By.ID, "reset").click()
    box = driver.find_element(By.ID, "search")
    box.send_keys("river")
    assert rows(driver) == expected(index, search="river") == ["qx"]
    box.clear()
    box.send_keys("Bravo harbour")
    assert rows(driver) == expected(index, search="bravo harbour") and len(rows(driver)) == 7  # not qy: no path
    select(driver, "f-split", "eval")
    assert rows(driver) == ["qe"]
    assert "1 of 8 questions match" in driver.find_element(By.ID, "count").text
    assert_no_errors(driver)


def test_opening_a_question_shows_path_traces_verdicts_and_gold(site, driver, tmp_path) -> None:
    from selenium.webdriver.common.by import By

    out, _, _ = site
    open_page(driver, out)
    driver.find_element(By.CSS_SELECTOR, "#rows tr[data-qid='qa']").click()
    wait(driver, "var d = document.getElementById('detail'); return d.dataset.qid === 'qa' && d.dataset.state === 'ready'")
    detail = driver.find_element(By.ID, "detail")
    assert "kept · sft" in detail.text and "c/n 2/3" in detail.text
    hops = driver.find_elements(By.CSS_SELECTOR, "#detail ol.path > li")
    assert len(hops) == 3
    assert "Alpha Station is linked to Bravo Harbour in this paragraph." in hops[0].text
    assert "links back to" in hops[1].text
    traces = driver.find_elements(By.CSS_SELECTOR, "#detail details.trace")
    assert [t.get_attribute("data-trace") for t in traces] == ["ta0", "ta1", "ta2"]
    assert not traces[1].get_attribute("open")
    traces[1].find_element(By.TAG_NAME, "summary").click()
    assert traces[1].get_attribute("open")
    verdicts = traces[1].find_elements(By.CSS_SELECTOR, "table.filters tbody tr")
    assert [v.get_attribute("data-filter") for v in verdicts] == data.CHAIN
    assert verdicts[1].text.split()[:3] == ["correctness", "drop", "wrong_answer"] and "Echo" in verdicts[1].text
    assert verdicts[2].text.split()[:2] == ["low_step", "skip"]
    calls = traces[1].find_elements(By.CSS_SELECTOR, "details.call")
    assert [c.get_attribute("data-tool") for c in calls] == ["search", "open", "find", "search"]
    calls[0].find_element(By.TAG_NAME, "summary").click()
    assert '"query": "Alpha Station"' in calls[0].text
    # The observation where each gold page was first seen is marked, with the page highlighted in it.
    gold = traces[1].find_elements(By.CSS_SELECTOR, ".msg.tool.gold")
    assert [g.get_attribute("data-gold") for g in gold] == ["0", "1", "2", "3"]
    assert "first sight of gold 1: Alpha Station (p0)" in gold[0].text
    gold[0].find_element(By.TAG_NAME, "summary").click()
    marks = [m.text for m in gold[0].find_elements(By.CSS_SELECTOR, "mark.gold")]
    assert '"page_id": "p0"' in marks and "Alpha Station" in marks
    traces[2].find_element(By.TAG_NAME, "summary").click()
    assert "gold 3 Charlie (planet) (p2): never seen" in traces[2].text
    shot = tmp_path / "explorer.png"
    driver.execute_script("document.getElementById('sec-questions').scrollIntoView()")
    driver.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 20_000
    assert_no_errors(driver)


def test_a_dropped_question_and_a_link_to_it(site, driver) -> None:
    out, _, _ = site
    open_page(driver, out, "#q=qx")
    wait(driver, "var d = document.getElementById('detail'); return d.dataset.qid === 'qx' && d.dataset.state === 'ready'")
    text = driver.execute_script("return document.getElementById('detail').innerText")
    assert "Dropped by the questions stage: ambiguous_hop — hop 2: the clue also fits Echo" in text
    assert "Which river flows past the harbour?" in text and "Written from walk w-qx" in text
    assert driver.execute_script("return Array.from(document.querySelectorAll('#rows tr.selected')).map(r => r.dataset.qid)") == ["qx"]
    assert_no_errors(driver)


def test_hostile_text_is_shown_as_text(site, driver) -> None:
    from selenium.webdriver.common.by import By

    out, _, _ = site
    open_page(driver, out)
    driver.find_element(By.CSS_SELECTOR, "#rows tr[data-qid='qb']").click()
    wait(driver, "var d = document.getElementById('detail'); return d.dataset.qid === 'qb' && d.dataset.state === 'ready'")
    for summary in driver.find_elements(By.CSS_SELECTOR, "#detail details summary"):
        driver.execute_script("arguments[0].parentElement.open = true", summary)
    shown = driver.execute_script("return document.querySelector('#detail .qtext').textContent")
    assert shown == data.HOSTILE + " Which city?"
    cell = driver.execute_script("return document.querySelector(\"#rows tr[data-qid='qb'] td.text\").textContent")
    assert cell.startswith("</script><script>")
    assert driver.execute_script("return typeof window.__pwned") == "undefined"
    assert driver.execute_script("return document.querySelectorAll('img[src=x], #detail b, #rows b').length") == 0
    assert driver.execute_script("return document.scripts.length") == 3  # the page's own, the index, one shard
    assert_no_errors(driver)


def test_pagination(tmp_path, driver) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.select import Select

    store = Store(tmp_path / "run")
    publish(store, "questions", {"questions": Question.to_table([make_question(f"q{i:03d}") for i in range(130)])})
    write_explorer(store, tmp_path / "out", [], shard_size=40)
    open_page(driver, tmp_path / "out")
    assert rows(driver) == [f"q{i:03d}" for i in range(50)]
    driver.find_element(By.ID, "next").click()
    assert rows(driver) == [f"q{i:03d}" for i in range(50, 100)]
    assert driver.find_element(By.ID, "page-info").text == "rows 51–100 · page 2 of 3"
    driver.find_element(By.ID, "last").click()
    assert rows(driver) == [f"q{i:03d}" for i in range(100, 130)]
    assert driver.find_element(By.ID, "next").get_attribute("disabled")
    Select(driver.find_element(By.ID, "page-size")).select_by_visible_text("25")
    assert len(rows(driver)) == 25 and driver.find_element(By.ID, "page-info").text == "rows 1–25 · page 1 of 6"
    driver.find_element(By.ID, "last").click()
    driver.find_element(By.CSS_SELECTOR, "#rows tr[data-qid='q127']").click()  # in the fourth shard
    wait(driver, "var d = document.getElementById('detail'); return d.dataset.qid === 'q127' && d.dataset.state === 'ready'")
    assert "Start from Alpha Station" in driver.find_element(By.ID, "detail").text
    assert_no_errors(driver)


RLO = "\u202e"  # RIGHT-TO-LEFT OVERRIDE: the characters after it are laid out right to left, until it is closed
# Where a piece of text is drawn: the left edge of the first text node under root that holds needle.
X_OF = """
var root = arguments[0], needle = arguments[1];
var walk = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), n;
while ((n = walk.nextNode())) {
  var i = n.data.indexOf(needle);
  if (i >= 0) { var r = document.createRange(); r.setStart(n, i); r.setEnd(n, i + needle.length);
                var b = r.getBoundingClientRect(); return [b.left, b.top]; }
}
return null;
"""


def test_a_right_to_left_override_in_a_title_ends_with_the_title(tmp_path, driver) -> None:
    """A title holding U+202E reverses only itself: the question text after it, the path after it and the
    cells of its row keep their left-to-right order."""
    from selenium.webdriver.common.by import By

    store = Store(tmp_path / "run")
    titles = [f"Al{RLO}Xyz", "Bo", "Cy", "Du"]
    questions = [make_question("qrtl", titles=titles, question=f"From {titles[0]} go on to Du?"), make_question("qok")]
    publish(store, "questions", {"questions": Question.to_table(questions)})
    write_explorer(store, tmp_path / "out", [])
    open_page(driver, tmp_path / "out")

    def x(element, needle: str) -> float:
        where = driver.execute_script(X_OF, element, needle)
        assert where is not None, needle
        return where

    row = driver.find_element(By.CSS_SELECTOR, "#rows tr[data-qid='qrtl']")
    cell = row.find_element(By.CSS_SELECTOR, "td.text")
    (go, top_go), (on, top_on), (to, top_to) = x(cell, "go"), x(cell, "on"), x(cell, "to")
    assert top_go == top_on == top_to and go < on < to  # after the title, the words run left to right again
    # The row's tooltip (an attribute, where no element can isolate) puts each title between FSI and PDI.
    assert row.get_attribute("title").split(" → ")[0] == f"\u2068Al{RLO}Xyz\u2069"
    row.click()
    wait(driver, "var d = document.getElementById('detail'); return d.dataset.qid === 'qrtl' && d.dataset.state === 'ready'")
    heading = driver.find_element(By.CSS_SELECTOR, "#detail h4")
    assert heading.text.startswith("Path: ")
    (bo, top_bo), (cy, _), (du, top_du) = x(heading, "Bo"), x(heading, "Cy"), x(heading, "Du")
    assert top_bo == top_du and bo < cy < du  # the titles after the first keep the path's order
    qtext = driver.find_element(By.CSS_SELECTOR, "#detail .qtext")
    assert x(qtext, "go")[0] < x(qtext, "on")[0] < x(qtext, "to")[0]
    assert driver.execute_script("return document.querySelector('#detail .qtext').textContent") == questions[0].question
    assert_no_errors(driver)
