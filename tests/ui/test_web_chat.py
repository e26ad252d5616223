"""The web chat UI in headless Chromium: upload a CSV, ask, see the code, its output and the final answer stream in.

Drives Debian's /usr/bin/chromium through Playwright's Python API (no `playwright install`: nothing is downloaded).
"""

from __future__ import annotations

import importlib.util
import re
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

CHROMIUM = Path("/usr/bin/chromium")
if not CHROMIUM.exists():
    pytest.skip(f"browser tests need Chromium at {CHROMIUM} (apt-get install chromium)", allow_module_level=True)
if importlib.util.find_spec("playwright") is None:
    pytest.skip("browser tests need the playwright package (pip install -e '.[dev]')", allow_module_level=True)

from playwright.sync_api import Page, Route, expect, sync_playwright  # noqa: E402

from tests.ui.conftest import ANSWER_TURN, CODE_TURN, FOLLOWUP_ANSWER, FOLLOWUP_PLOT_CODE  # noqa: E402
from worldsmith.ui.web import launch, shutdown  # noqa: E402

# Gradio's queue calls pandas APIs that pandas 3 deprecates; not ours to fix.
pytestmark = [pytest.mark.browser, pytest.mark.filterwarnings("ignore:::gradio.queueing")]

CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
STEP_TIMEOUT_MS = 60_000  # the first cell starts a sandbox worker with pandas: seconds on a busy 2-core machine


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def server(scripted_settings):
    script, settings = scripted_settings
    port = _free_port()
    app = launch(settings, host="127.0.0.1", port=port, block=False)
    try:
        yield script, settings, f"http://127.0.0.1:{port}/"
    finally:
        shutdown(app)


@pytest.fixture
def page():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        try:
            yield browser.new_page(viewport={"width": 1280, "height": 1100})
        finally:
            browser.close()


def _block_outside_requests(page: Page) -> list[str]:
    """Abort (and record) every request that leaves localhost: the UI must work with no network."""
    outside: list[str] = []

    def handle(route: Route) -> None:
        host = urlparse(route.request.url).hostname or ""
        if route.request.url.startswith(("data:", "blob:")) or host in ("127.0.0.1", "localhost"):
            route.continue_()
        else:
            outside.append(route.request.url)
            route.abort()

    page.route("**/*", handle)
    return outside


def _ask(page: Page, question: str) -> None:
    page.locator("#ws-question textarea").fill(question)
    page.locator("#ws-send").click()


def _thread_id(page: Page) -> str:
    found = re.search(r"thread `?([0-9a-f]{12})", page.locator("#ws-status").inner_text())
    assert found, page.locator("#ws-status").inner_text()
    return found.group(1)


def test_upload_ask_and_watch_the_steps(server, page: Page, sales_csv: Path, tmp_path: Path) -> None:
    script, settings, url = server
    script.queue(CODE_TURN, ANSWER_TURN, FOLLOWUP_PLOT_CODE, FOLLOWUP_ANSWER)
    outside = _block_outside_requests(page)
    page.goto(url)
    status = page.locator("#ws-status")
    expect(status).to_contain_text(f"scripted · {settings.llm.default.model}")
    expect(status).to_contain_text("ready", timeout=STEP_TIMEOUT_MS)  # the load event has answered

    page.locator("#ws-files input[type=file]").set_input_files(str(sales_csv))
    expect(status).to_contain_text("1 file(s) attached", timeout=STEP_TIMEOUT_MS)
    _ask(page, "What is the mean amount?")

    chat = page.locator("#ws-chat")
    expect(chat).to_contain_text("Final answer", timeout=STEP_TIMEOUT_MS)
    expect(chat.locator("h3", has_text="Final answer")).to_be_visible()
    expect(chat).to_contain_text("The mean amount is 20.")
    expect(chat.locator("code", has_text="df = pd.read_csv('sales.csv')")).to_be_visible()  # the code step
    expect(chat.locator("code", has_text=re.compile(r"^\s*20\.0\s*$"))).to_be_visible()  # the sandbox's output
    expect(chat.locator("blockquote", has_text="Load the data.")).to_be_visible()  # the thought, muted
    expect(chat).to_contain_text("New conversation (thread")
    expect(status).to_contain_text("done in")
    thread_id = _thread_id(page)
    upload = Path(settings.runs_dir).resolve() / "web" / "uploads" / thread_id / "sales.csv"
    assert upload.read_text() == sales_csv.read_text()
    page.screenshot(path=str(tmp_path / "web_chat.png"), full_page=True)

    # Follow-up in the same thread: `df` from the first cell is still defined; the plot shows as an image
    # served from the sandbox workspace; the answer's Markdown table renders as a table.
    _ask(page, "And seven times the maximum?")
    expect(chat.locator("table")).to_be_visible(timeout=STEP_TIMEOUT_MS)
    expect(chat.locator("table")).to_contain_text("210")
    expect(chat.locator("code", has_text=re.compile(r"^\s*210\s+\[files written: bar\.png\]"))).to_be_visible()
    expect(chat.get_by_text("New conversation (thread")).to_have_count(1)  # no second thread was started
    plot = chat.locator("img[src$='bar.png']")
    expect(plot).to_be_visible()
    assert plot.evaluate("img => img.complete && img.naturalWidth") > 100, "the plot image did not load"
    expect(chat.get_by_role("button", name="Share")).to_be_hidden()  # Gradio's share-to-Hugging-Face button
    page.screenshot(path=str(tmp_path / "web_chat_followup.png"), full_page=True)

    assert not outside, f"the page tried to reach the network: {outside}"
    print(f"screenshots: {tmp_path / 'web_chat.png'}, {tmp_path / 'web_chat_followup.png'}")


def test_errors_read_as_sentences_and_threads_reopen_by_url(server, page: Page, sales_csv: Path) -> None:
    script, _, url = server  # nothing queued yet: the model call fails
    page.goto(url)
    expect(page.locator("#ws-status")).to_contain_text("ready", timeout=STEP_TIMEOUT_MS)
    page.locator("#ws-files input[type=file]").set_input_files(str(sales_csv))
    expect(page.locator("#ws-status")).to_contain_text("1 file(s) attached", timeout=STEP_TIMEOUT_MS)
    _ask(page, "What is the mean amount?")
    chat = page.locator("#ws-chat")
    expect(chat).to_contain_text("Error — the language model call failed", timeout=STEP_TIMEOUT_MS)
    expect(page.locator("#ws-status")).to_contain_text("error")
    assert "Traceback" not in chat.inner_text()
    expect(page.locator("#ws-send")).to_be_enabled()
    thread_id = _thread_id(page)

    # A fresh page load (as after a server restart) reopens the thread from its URL and continues it.
    script.queue(CODE_TURN, ANSWER_TURN)
    page.goto(f"{url}?thread={thread_id}")
    expect(chat).to_contain_text(f"Reopened thread {thread_id}")
    expect(chat).to_contain_text("the language model call failed")  # the earlier transcript is back
    _ask(page, "What is the mean amount?")
    expect(chat).to_contain_text("Final answer", timeout=STEP_TIMEOUT_MS)
    expect(chat.locator("code", has_text=re.compile(r"^\s*20\.0\s*$"))).to_be_visible()
    assert _thread_id(page) == thread_id
    expect(chat.get_by_text("New conversation (thread")).to_have_count(1)  # only the one from the first question

    page.goto(f"{url}?thread=../../etc")
    expect(chat).to_contain_text("no chat thread ../../etc on this server")
