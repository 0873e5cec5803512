"""Headless Chromium for the tests that open a page (Debian's `chromium` and
`chromium-driver`, driven by selenium), and the reason to skip where they are absent.

    from tests.browser import browser_missing, open_browser
    reason = browser_missing()          # None, or why no browser test can run here
    with open_browser() as driver:
        driver.get(path.as_uri())
        driver.get_log("browser")       # the console, for "no JavaScript error"

The paths are explicit so that selenium's manager neither searches nor sends telemetry.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


def browser_missing() -> str | None:
    """Why the browser tests cannot run here, or None when they can."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install -e '.[dev]')"
    for path, package in ((CHROMIUM, "chromium"), (CHROMEDRIVER, "chromium-driver")):
        if not os.access(path, os.X_OK):
            return f"no {path}: apt-get install -y {package} to run the browser tests"
    return None


@contextlib.contextmanager
def open_browser(width: int = 1400, height: int = 1000) -> Iterator:
    """A headless Chromium WebDriver that records the console (quit on exit)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    # --disable-dev-shm-usage: CI containers often give /dev/shm only 64 MB.
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        f"--window-size={width},{height}",
    ):
        options.add_argument(arg)
    # Device pixels equal CSS pixels, so canvas coordinates are screen coordinates.
    options.add_argument("--force-device-scale-factor=1")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    try:
        yield driver
    finally:
        driver.quit()


def open_page(driver, path, timeout: float = 20.0) -> None:
    """Load a local page and wait until its script says it is ready
    (`window.attentionViewer.ready`: the data is inflated and the first map drawn)."""
    from selenium.webdriver.support.ui import WebDriverWait

    driver.get(path.resolve().as_uri())
    ready = "return !!(window.attentionViewer && window.attentionViewer.ready)"
    try:
        WebDriverWait(driver, timeout).until(lambda d: d.execute_script(ready))
    except Exception as error:
        raise AssertionError(f"page not ready: console {driver.get_log('browser')}") from error


def console_errors(driver) -> list[dict]:
    """The console entries of level SEVERE (JavaScript errors, failed loads)."""
    return [e for e in driver.get_log("browser") if e.get("level") == "SEVERE"]
