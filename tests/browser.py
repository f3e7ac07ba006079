"""A minimal W3C WebDriver client for headless Chromium (Debian's chromium + chromium-driver).

Why not Selenium: the test needs five endpoints (new session, navigate, execute script, browser
log, screenshot); plain HTTP to a local chromedriver keeps the test free of a driver manager that
would try to download browsers. The flags are the ones this closed network needs (without them
Chromium's own background connections are refused and logged as errors).
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--window-size=1400,1000",
]


def find() -> tuple[str, str] | None:
    """(chromium, chromedriver) paths, or None when either is missing."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver") or (
        "/usr/bin/chromedriver" if os.path.exists("/usr/bin/chromedriver") else None
    )
    return (browser, driver) if browser and driver else None


def require() -> tuple[str, str]:
    """(chromium, chromedriver), or skip the test (fail it in CI, where both are installed)."""
    import pytest

    found = find()
    if found is None:
        if os.environ.get("CI") == "true":
            pytest.fail(
                "Chromium and chromedriver are required in CI (.ci/run installs Debian's chromium, chromium-driver)"
            )
        pytest.skip(
            "browser test skipped: Chromium/chromedriver not installed (apt-get install chromium chromium-driver)"
        )
    return found


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    def __init__(self, browser: str, driver: str, *, profile: Path) -> None:
        self.port = _free_port()
        self.proc = subprocess.Popen(
            [driver, f"--port={self.port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        self.base = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 30
        while True:
            try:
                self._call("GET", "/status")
                break
            except OSError:
                if time.monotonic() > deadline:
                    self.proc.kill()
                    raise
                time.sleep(0.2)
        caps = {
            "capabilities": {
                "alwaysMatch": {
                    "browserName": "chrome",
                    "goog:chromeOptions": {"binary": browser, "args": [*FLAGS, f"--user-data-dir={profile}"]},
                    "goog:loggingPrefs": {"browser": "ALL"},
                }
            }
        }
        self.session = self._call("POST", "/session", caps)["sessionId"]

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=120) as resp:
            return json.loads(resp.read() or b"{}").get("value") or {}

    def _s(self, method: str, path: str, body: dict | None = None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, url: str) -> None:
        self._s("POST", "/url", {"url": url})

    def script(self, js: str):
        return self._s("POST", "/execute/sync", {"script": js, "args": []})

    def console(self) -> list[dict]:
        return self._s("POST", "/se/log", {"type": "browser"}) or []

    def screenshot(self, path: Path, full_height: int | None = None) -> None:
        if full_height:
            self._s("POST", "/window/rect", {"width": 1400, "height": full_height})
        path.write_bytes(base64.b64decode(self._s("GET", "/screenshot")))

    def close(self) -> None:
        try:
            self._call("DELETE", f"/session/{self.session}")
        finally:
            self.proc.terminate()
            self.proc.wait(timeout=10)
