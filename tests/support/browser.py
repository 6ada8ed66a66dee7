"""A real browser for the tests of the live page: Debian's Chromium, headless, driven by Selenium
through Debian's chromedriver. Both come from the `chromium` and `chromium-driver` packages
(`make test` installs them); nothing is downloaded, Selenium Manager is never asked for a driver.

``page_server`` runs ``ptc elastic ui NAME`` (the workstation's local server of the page) and
gives its URL; ``chromium`` a WebDriver; screenshots go to ``ARTIFACTS`` (the run's kept files).
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
# Beside the checkout's results, not in ./state: a test removes ./state when it made it.
ARTIFACTS = Path(os.environ.get("PTC_TEST_ARTIFACTS", REPO / "results" / "test-artifacts"))
_URL = re.compile(r"http://127\.0\.0\.1:\d+/ui")


@contextmanager
def page_server(name: str, timeout: float = 120.0) -> Iterator[str]:
    """``ptc elastic ui NAME`` running; its page's URL. Stopped when the block ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "elastic.cli", "elastic", "ui", name, "--port", "0"],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, cwd=REPO,
        env={**os.environ, "COLUMNS": "200"},
    )  # fmt: skip
    said: list[str] = []
    ready = threading.Event()

    def read() -> None:  # until it ends: a full pipe would stop the server
        assert proc.stdout is not None
        for line in proc.stdout:
            said.append(line)
            if _URL.search(line):
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    try:
        ready.wait(timeout)
        found = [m.group(0) for line in said if (m := _URL.search(line))]
        assert found, f"ptc elastic ui gave no URL: {''.join(said)[-3000:]}"
        yield found[0]
    finally:
        proc.terminate()
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(30)


@contextmanager
def chromium(width: int = 1400, height: int = 2200) -> Iterator[Any]:
    """A headless Chromium under Selenium; quit when the block ends."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert CHROMIUM.exists() and CHROMEDRIVER.exists(), "apt install chromium chromium-driver"
    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                f"--window-size={width},{height}", "--no-first-run", "--disable-extensions"):  # fmt: skip
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def node_rows(driver: Any) -> dict[str, tuple[str, str, str]]:
    """The live page's nodes table now: node -> (power, Slurm state, jobs), read in one script
    (the page redraws its rows with each event, so elements found one by one go stale)."""
    found = driver.execute_script(
        "return [...document.querySelectorAll('#nodes tbody tr[data-node]')].map(r =>"
        " [r.dataset.node, r.dataset.power, r.dataset.state, r.cells[5].textContent]);"
    )
    return {node: (power, state, jobs) for node, power, state, jobs in found}


def screenshot(driver: Any, name: str) -> Path:
    """The whole window as PNG under ARTIFACTS; its path."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path
