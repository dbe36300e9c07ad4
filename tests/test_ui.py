"""The operations page (deltamark ui) in a real browser: Debian's Chromium driven by
Playwright against the page served on the demo's state (the orders pipeline run as the
demo runs it: a batch loaded, then a broken one rejected by its data-quality gate)."""

from __future__ import annotations

import datetime as dt
import re
import shutil
import threading
from pathlib import Path
from urllib.parse import urlparse
from zoneinfo import ZoneInfo

import pytest
from databases import unavailable
from werkzeug.serving import make_server

from framework import load_settings
from framework.common import humanize
from framework.ops import actions
from framework.server.client import start_server
from framework.state.table_io import open_store
from framework.ui.app import create_app
from framework.workflows import resume_workflow, run_workflow
from jobs import orders_landing
from state_tables.model import DqResult, Run

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
SCREENSHOTS = ROOT / "test-output" / "ui"
HOSTILE = "<script>window.__xss = 1</script>"
HOSTILE_SAMPLE = "<img src=x onerror=\"window.__xss = 2\">"
TOKEN = "test-token"


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """The demo's pipeline state: a first workflow run, then one whose ingest rejects a
    broken batch, resumed once the batch is resent, then two that find nothing new (each
    job's run skipped); and a job whose error and data-quality sample hold HTML."""
    work = tmp_path_factory.mktemp("demo")
    settings = load_settings(conf_dir=ROOT / "conf", state_root=work / "state")
    landing = work / "data" / "landing" / "orders"
    with pytest.MonkeyPatch.context() as patch:
        patch.chdir(work)  # the conf's relative paths land under it, as in the demo
        # the workflow runs share one warm JVM, as on a frequent schedule
        server, _ = start_server(settings, idle_minutes=10)
        try:
            orders_landing.land(landing, batches=2, orders=40)
            assert run_workflow(settings, "orders_pipeline").succeeded
            orders_landing.land(landing, batches=1, orders=40, broken=2)
            rejected = run_workflow(settings, "orders_pipeline")
            assert not rejected.succeeded
            orders_landing.resend(landing, orders=40)
            assert resume_workflow(settings, rejected.workflow_run_id).succeeded
            for _ in range(2):
                assert run_workflow(settings, "orders_pipeline").succeeded
        finally:
            server.stop()
    store = open_store(settings.state_root)
    now = dt.datetime.now(dt.UTC)
    store.record_run(Run(job="hostile", run_id="h1", run_seq=1, status="failed",
                         mode="enable", started_at=now, ended_at=now, error=HOSTILE))
    store.record_dq_results([DqResult(
        job="hostile", run_id="h1", run_seq=1, attempt=1, ruleset="r", target="t",
        policy="fail", rule="IsComplete x", kind="row", outcome="failed", action="rejected",
        rows=1, unexpected_count=1, sample=(HOSTILE_SAMPLE,))])
    return settings


@pytest.fixture(scope="module")
def browser():
    if not CHROMIUM.exists():
        unavailable(f"{CHROMIUM} is absent (bash .ci/test_tools.sh installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=str(CHROMIUM), args=[
            "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update",
            "--disable-sync"])
        yield launched
        launched.close()


@pytest.fixture
def served(demo):
    """The page on the demo's state, actions allowed, on a free port of 127.0.0.1."""
    server = make_server("127.0.0.1", 0, create_app(demo, token=TOKEN), threaded=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()


@pytest.fixture
def page(browser, served):
    """A page that records console errors, uncaught errors and any request that leaves
    127.0.0.1 (it is refused)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    opened = context.new_page()
    opened.problems, opened.outside = [], []
    opened.on("console", lambda m: m.type == "error" and opened.problems.append(m.text))
    opened.on("pageerror", lambda e: opened.problems.append(str(e)))

    def only_local(route):
        if urlparse(route.request.url).hostname == "127.0.0.1":
            return route.continue_()
        opened.outside.append(route.request.url)
        return route.abort()

    opened.route("**/*", only_local)
    yield opened
    context.close()


def shot(page, name: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{name}.png"), full_page=True)
    print(f"screenshot: {SCREENSHOTS / name}.png")


@pytest.mark.parametrize(("path", "charts"), [
    ("/", None), ("/jobs/orders_ingest", 2), ("/jobs/orders_silver", 2),
    ("/workflows/orders_pipeline", 0), ("/jobs/hostile", 2)])
def test_each_page_loads_without_errors_draws_its_charts_and_fetches_nothing_outside(
        page, served, path, charts):
    response = page.goto(served + path)
    assert response.status == 200
    page.wait_for_load_state("networkidle")
    drawn = page.locator("div.chart[data-drawn=yes] canvas").count()
    expected = page.locator("div.chart").count() if charts is None else charts
    assert drawn == expected and (charts == 0 or drawn > 0)
    assert page.problems == [] and page.outside == []
    assert page.evaluate("window.__xss") is None
    shot(page, path.strip("/").replace("/", "_") or "overview")


def test_data_and_errors_show_as_text(page, served):
    page.goto(served + "/jobs/hostile")
    assert page.get_by_text(HOSTILE).count() == 1  # the run's error, as text
    assert page.get_by_text(HOSTILE_SAMPLE, exact=False).count() == 1
    assert page.locator("img").count() == 0
    page.goto(served + "/")
    assert page.get_by_text(HOSTILE).count() == 1
    assert page.evaluate("window.__xss") is None


def test_the_demo_state_shows_what_happened(page, served, demo, monkeypatch):
    monkeypatch.chdir(Path(demo.state_root).parent)  # the conf's relative paths, as served
    page.goto(served + "/")
    row = page.locator("tr", has=page.get_by_role("link", name="orders_ingest", exact=True))
    assert row.locator(".status").inner_text() == "skipped"  # the last run found nothing new
    assert "nothing new" in row.locator("td").nth(1).inner_text()
    assert row.locator("td").nth(3).locator("time").count() == 1  # its last success
    assert row.locator("td").nth(4).inner_text() == "0"  # no failure since
    waiting = row.locator("td.waiting[data-filled=yes]")  # the cells fill in any order
    assert waiting.inner_text() == "nothing new"
    orders_landing.land(Path(demo.state_root).parent / "data" / "landing" / "orders",
                        batches=1, orders=5)
    page.reload()
    assert re.fullmatch(r"orders_src: 1 file \([\d.]+ (bytes|KB)\)", waiting.inner_text())
    page.goto(served + "/workflows/orders_pipeline")
    # the latest run: each job found nothing new
    assert page.locator("svg.graph g.node.nothing_new").count() == 3
    assert page.locator("table.latest").get_by_text("skipped: nothing new").count() == 3
    runs = page.locator("table.runs tbody tr:visible")
    assert [r.inner_text().split("\t")[1] for r in runs.all()] == [
        "skipped: nothing new", "SUCCEEDED", "FAILED", "SUCCEEDED"]
    assert "2 runs" in runs.nth(0).inner_text()  # folded
    assert "1 FAILED, 2 SKIPPED" in runs.nth(2).inner_text()
    rejected = next(r for r in open_store(demo.state_root).runs("orders_ingest")
                    if r.status == "failed")
    page.goto(served + f"/jobs/orders_ingest?dq_run={rejected.run_id}")
    assert page.locator("table.dq tr.failed").count() == 2  # the rejected batch's rules
    assert "-371.92" in page.locator("table.dq").inner_text()  # a failing value


def test_a_rewind_through_the_page_changes_the_bookmark_as_the_cli_would(
        page, served, demo, tmp_path, monkeypatch):
    monkeypatch.chdir(Path(demo.state_root).parent)  # the conf's relative paths, as served
    store = open_store(demo.state_root)
    first = next(r for r in store.runs("orders_silver") if r.status == "succeeded")
    # what the CLI's rewind does, on a copy of the state
    copy = tmp_path / "state"
    shutil.copytree(demo.state_root, copy)
    actions.rewind(load_settings(conf_dir=ROOT / "conf", state_root=copy), "orders_silver",
                 to_run=first.run_id)
    expected = {b.context: b.state for b in open_store(copy).bookmarks("orders_silver")}

    page.goto(served + "/jobs/orders_silver")
    assert page.locator("form#rewind").count() == 0  # actions need the token
    page.goto(served + f"/?token={TOKEN}")
    page.goto(served + "/jobs/orders_silver")
    # first with --restore-targets: the page shows which later writes it would remove
    later = next(r for r in store.runs("orders_silver") if r.run_seq > first.run_seq
                 and any(o.get("written") for o in r.outputs.values()))
    page.locator("form#rewind select[name=to_run]").select_option(first.run_id)
    page.locator("form#rewind input[name=restore_targets]").check()
    page.locator("form#rewind button").click()
    [(target, written)] = [(t, o) for t, o in later.outputs.items() if o.get("written")]
    removed = page.locator("table tr", has_text=target)
    assert removed.count() == 1 and f"version {written['version']}" in removed.inner_text()
    shot(page, "rewind_restore_preview")
    page.get_by_role("link", name="cancel").click()
    assert {b.context: b.state for b in store.bookmarks("orders_silver")} != expected
    page.locator("form#rewind select[name=to_run]").select_option(first.run_id)
    page.locator("form#rewind button").click()
    assert page.get_by_text(f"Rewind orders_silver to run {first.run_id}").count() == 1
    shot(page, "rewind_confirm")
    page.locator("form#confirm button").click()
    assert page.get_by_text(f"rewound to run {first.run_seq}").count() == 1
    assert {b.context: b.state for b in store.bookmarks("orders_silver")} == expected
    # confirmed with --restore-targets, the later write leaves the target
    page.locator("form#rewind select[name=to_run]").select_option(first.run_id)
    page.locator("form#rewind input[name=restore_targets]").check()
    page.locator("form#rewind button").click()
    page.locator("form#confirm button").click()
    assert page.get_by_text(f"restored {target}").count() == 1
    assert page.problems == []


def test_a_post_without_the_token_or_its_csrf_value_is_refused(page, served, demo):
    before = open_store(demo.state_root).bookmarks("orders_ingest")
    page.goto(served + "/")
    for data in ({}, {"csrf": "forged"}):
        assert page.request.post(served + "/jobs/orders_ingest/reset",
                                 form=data).status == 403
    assert page.goto(served + "/?token=wr%C3%B6ng").status == 403  # any text: refused
    page.goto(served + f"/?token={TOKEN}")
    assert page.request.post(served + "/jobs/orders_ingest/reset",
                             form={"csrf": "forged"}).status == 403
    assert open_store(demo.state_root).bookmarks("orders_ingest") == before


def test_runs_bookmarks_and_times_read_as_words_in_the_readers_time_zone(browser, served,
                                                                          demo):
    context = browser.new_context(viewport={"width": 1400, "height": 900},
                                  timezone_id="America/New_York")
    page = context.new_page()
    page.goto(served + "/jobs/orders_ingest")
    runs = page.locator("table.runs")
    assert "{" not in runs.inner_text()  # counts and writes in words, not JSON
    first = next(r for r in open_store(demo.state_root).runs("orders_ingest") if r.run_seq == 1)
    row = runs.locator("tr", has=page.get_by_role("link", name="1", exact=True))
    cells = row.locator("td").all_inner_texts()
    counts = first.inputs["orders_src"]
    assert cells[5] == (f"orders_src: 2 of 2 files ({humanize.size(counts['bytes'])})")
    assert cells[6] == "data/lake/bronze/orders: version 0"
    assert cells[4] == humanize.duration((first.ended_at - first.started_at).total_seconds())
    # times: in the reader's zone, with how long ago, the exact value on hover
    local = first.started_at.astimezone(ZoneInfo("America/New_York"))
    started = row.locator("time")
    assert started.inner_text().startswith(
        local.strftime("%H:%M") if local.date() == dt.datetime.now(
            ZoneInfo("America/New_York")).date() else local.strftime("%Y-%m-%d %H:%M"))
    assert started.inner_text().endswith(" ago")
    assert "America/New_York" in started.get_attribute("title")
    assert first.started_at.isoformat() in started.get_attribute("title")
    assert page.locator("time").count() == page.locator("time[data-local=yes]").count()
    # the two runs that found nothing new: one folded line, unfolded on request
    skipped = runs.locator("tr.skipped-run")
    assert skipped.count() == 2 and not skipped.first.is_visible()
    assert runs.locator("tr.fold").inner_text().startswith("4-5\tskipped")
    assert "2 runs found nothing new" in runs.locator("tr.fold").inner_text()
    page.locator("label[for=show-skipped]").click()
    assert skipped.first.is_visible() and not runs.locator("tr.fold").is_visible()
    assert "nothing new" in skipped.first.inner_text()
    # the bookmark, described; its raw state a click away
    [bookmark] = open_store(demo.state_root).bookmarks("orders_ingest")
    facts = page.locator("table.facts").first.inner_text()
    assert f"{humanize.plural(bookmark.state['files_total'], 'file')} (" in facts
    assert "read by all runs" in facts and "{" not in facts
    assert not page.locator("pre.state").first.is_visible()
    shot(page, "jobs_orders_ingest_new_york")
    # the raw values stay in the API
    api = page.request.get(served + "/api/jobs/orders_ingest").json()
    assert api["runs"][-1]["inputs"]["orders_src"]["bytes"] == counts["bytes"]
    assert api["runs"][-1]["started_at"] == first.started_at.isoformat()
    assert [r["status"] for r in api["runs"][:2]] == ["skipped", "skipped"]
    context.close()


def test_a_state_root_without_state_says_so_on_the_page(page, tmp_path):
    settings = load_settings(conf_dir=ROOT / "conf", state_root=tmp_path / "nothing")
    server = make_server("127.0.0.1", 0, create_app(settings), threaded=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        page.goto(f"http://127.0.0.1:{server.server_port}/")
        [said] = page.locator("p.empty").all_inner_texts()
        assert said.startswith(f"no deltamark state at {tmp_path / 'nothing'}: ")
        assert "--state-root PATH" in said and "DELTAMARK_STATE_ROOT" in said
        assert page.problems == []
        shot(page, "no_state")
    finally:
        server.shutdown()
