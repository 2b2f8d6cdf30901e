"""Screenshots and page weights of the built book, for a reader's-eye review and the book issue's closing notes.

    python tools/book_review.py [--html _build/html] [--out _build/review] [PAGE ...]

serves the built HTML locally, opens each PAGE (a path under the book without suffix, default: the introduction,
the scoreboard and the H200 pages) in headless Chromium at 1400 px and 420 px, saves the top 1600 px of each as
``<out>/<page>@<width>.png`` and writes ``<out>/weights.json``: per page the bytes of its HTML and of every local
image, script and stylesheet it loads (what a reader downloads; shared assets count on every page) and its length in
``screens`` (document height / 900 px at 1400 x 900, folded content closed). Output stays under ``_build/`` (never
committed). The browser test (``tests/test_book_html.py``) uses :func:`serve`, :func:`chromium` and :func:`screens`
too.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import json
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urlparse

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_PAGES = (
    "book/intro",
    "book/scoreboard",
    "book/gpu/01_efficiency",
    "book/gpu/02_softcka",
    "book/gpu/03_first_fa",
    "book/gpu/04_lolcats",
    "book/gpu/05_layout_distillation",
)
WIDTHS = (1400, 420)
SCREEN = (1400, 900)  #: the window a page's length is counted in (width, height in px)
ASSETS_JS = """
return Array.from(document.querySelectorAll('img[src], script[src], link[href]'))
  .map(e => e.src || e.href);
"""


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args) -> None:  # no request lines
        pass


@contextlib.contextmanager
def serve(html_root: Path) -> Iterator[str]:
    """The built book over HTTP on a free local port: yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(html_root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()


def chromium():
    """Headless Debian Chromium through selenium, offline-quiet, with the browser console log kept."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    binary, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not (binary and driver_path):
        raise RuntimeError("Debian chromium and chromium-driver are needed: run `make browser`")
    options = webdriver.ChromeOptions()
    options.binary_location = binary
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-quic",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--disable-dev-shm-usage",
        "--hide-scrollbars",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    return webdriver.Chrome(service=Service(driver_path), options=options)


def page_weight(html_root: Path, base: str, urls: list[str], page: str) -> dict[str, int]:
    """Bytes of ``page``'s HTML and of the local files among ``urls`` (its loaded assets), by kind."""
    sizes = {"html": (html_root / f"{page}.html").stat().st_size, "images": 0, "scripts_styles": 0}
    for url in dict.fromkeys(urls):
        if not url.startswith(base):
            continue
        path = html_root / unquote(urlparse(url).path).lstrip("/")
        if path.is_file():
            kind = "images" if path.suffix.lower() in {".png", ".svg", ".jpg", ".gif"} else "scripts_styles"
            sizes[kind] += path.stat().st_size
    return {**sizes, "total": sum(sizes.values())}


def screens(driver, url: str) -> float:
    """The page at ``url``'s length in screens of :data:`SCREEN` (document height / window height)."""
    driver.set_window_size(*SCREEN)
    driver.get(url)
    return driver.execute_script("return document.documentElement.scrollHeight") / SCREEN[1]


def review(html_root: Path, out: Path, pages: list[str]) -> dict[str, dict[str, int]]:
    """Screenshots of ``pages`` at :data:`WIDTHS` into ``out`` and their weights (also ``out/weights.json``)."""
    missing = [p for p in pages if not (html_root / f"{p}.html").is_file()]
    if missing:
        raise FileNotFoundError(f"pages={missing} are not in the build {html_root}")
    out.mkdir(parents=True, exist_ok=True)
    weights = {}
    driver = chromium()
    try:
        with serve(html_root) as base:
            for page in pages:
                for width in WIDTHS:
                    driver.set_window_size(width, 1600)
                    driver.get(f"{base}/{page}.html")
                    driver.save_screenshot(str(out / f"{page.replace('/', '_')}@{width}.png"))
                weights[page] = page_weight(html_root, base, driver.execute_script(ASSETS_JS), page)
                weights[page]["screens"] = round(screens(driver, f"{base}/{page}.html"), 2)
    finally:
        driver.quit()
    (out / "weights.json").write_text(json.dumps(weights, indent=1) + "\n")
    return weights


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("pages", nargs="*", default=list(DEFAULT_PAGES))
    parser.add_argument("--html", type=Path, default=ROOT / "_build" / "html")
    parser.add_argument("--out", type=Path, default=ROOT / "_build" / "review")
    args = parser.parse_args(argv)
    for page, w in review(args.html, args.out, args.pages).items():
        print(
            f"{page}: {w['screens']:.1f} screens, {w['total'] / 1024:.0f} KiB (html {w['html'] / 1024:.0f}, "
            f"images {w['images'] / 1024:.0f})"
        )


if __name__ == "__main__":
    main()
