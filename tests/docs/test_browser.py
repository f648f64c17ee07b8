"""The built site in a real browser: Debian's headless Chromium, driven by Selenium, reading from a local server.

Checks what a reader sees: pages render with their code blocks and a copy button on each, and search finds "slot".
Screenshots go to .lab/screenshots/ (git-ignored) for a person to look at.
"""

import functools
import http.server
import os
import shutil
import subprocess
import threading

import pytest

from rtm_lab.paths import PROJECT_ROOT

# Minutes of Spark or a browser: kept out of the fast loop (`pytest -m "not slow"`).
pytestmark = pytest.mark.slow

SCREENSHOTS = PROJECT_ROOT / ".lab" / "screenshots"
# Offline and quiet: no sandbox (root in CI), no GPU, and none of Chromium's background calls to Google services.
CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
]
WAIT_S = 20


def browser_binaries() -> tuple[str, str]:
    chromium = os.environ.get("CHROMIUM") or shutil.which("chromium")
    driver = os.environ.get("CHROMEDRIVER") or shutil.which("chromedriver")
    if not (chromium and driver):
        # Same step as `make setup`: installs Debian's chromium + chromium-driver when root, else says how.
        setup = subprocess.run([str(PROJECT_ROOT / "scripts" / "setup_browser.sh")], capture_output=True, text=True)
        if setup.returncode != 0:
            pytest.fail(setup.stderr.strip(), pytrace=False)
        chromium, driver = shutil.which("chromium"), shutil.which("chromedriver")
    return chromium, driver


@pytest.fixture(scope="module")
def site_url(built_site):
    handler = functools.partial(QuietHandler, directory=str(built_site))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


class QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format, *args):
        pass


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = browser_binaries()
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in CHROMIUM_FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(WAIT_S)
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    yield driver
    driver.quit()


def wait_for(browser, css: str, at_least: int = 1):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    return WebDriverWait(browser, WAIT_S).until(
        lambda d: (found := d.find_elements(By.CSS_SELECTOR, css)) and len(found) >= at_least and found
    )


def code_blocks_with_copy_buttons(browser, url: str, screenshot: str) -> int:
    """Open a page; return how many code blocks it shows, after checking each got Material's copy button."""
    from selenium.webdriver.common.by import By

    browser.get(url)
    wait_for(browser, "article.md-content__inner h1")
    blocks = browser.find_elements(By.CSS_SELECTOR, "article div.highlight pre > code")
    assert blocks, f"{url}: no code blocks rendered"
    # The copy buttons are added by the theme's JavaScript after load: their presence proves the scripts ran.
    buttons = wait_for(browser, 'article div.highlight pre button[data-md-type="copy"]', at_least=len(blocks))
    assert len(buttons) == len(blocks)
    # textContent, not .text: a block in a hidden content tab has no visible text but must not be empty.
    assert all(b.get_attribute("textContent").strip() for b in blocks), f"{url}: an empty code block"
    browser.save_screenshot(str(SCREENSHOTS / screenshot))
    return len(blocks)


def reference_page() -> str:
    pages = sorted((PROJECT_ROOT / "docs" / "reference").glob("*.md"))
    assert pages, "docs/reference/ has no page to check"
    preferred = PROJECT_ROOT / "docs" / "reference" / "slot-sizing.md"
    return f"reference/{(preferred if preferred in pages else pages[0]).stem}/"


def test_home_page_renders(browser, site_url):
    from selenium.webdriver.common.by import By

    browser.get(site_url + "/")
    heading = wait_for(browser, "article.md-content__inner h1")[0]
    assert "Real-Time Mode" in heading.text
    assert browser.find_elements(By.CSS_SELECTOR, "nav.md-nav a.md-nav__link"), "no navigation rendered"
    browser.save_screenshot(str(SCREENSHOTS / "home.png"))


def test_get_started_shows_the_pipeline_with_copy_buttons(browser, site_url):
    assert code_blocks_with_copy_buttons(browser, site_url + "/get-started/", "get-started.png") >= 2
    assert "start_pipeline" in browser.page_source


def test_reference_page_shows_code_with_copy_buttons(browser, site_url):
    assert code_blocks_with_copy_buttons(browser, f"{site_url}/{reference_page()}", "reference.png") >= 1


def test_search_finds_slot(browser, site_url):
    browser.get(site_url + "/")
    wait_for(browser, "article.md-content__inner h1")
    # At this window width the search box sits in the header; typing into it is what a reader does.
    box = wait_for(browser, "input.md-search__input")[0]
    box.click()
    box.send_keys("slot")
    results = wait_for(browser, "li.md-search-result__item")
    assert any("slot" in r.text.lower() for r in results), [r.text for r in results]
    browser.save_screenshot(str(SCREENSHOTS / "search.png"))
