"""Build the book with warnings as errors, then check every TOC page in headless Chromium.

Each page must load with its title, show every figure its notebook stored (no broken image), and reference
no local asset that is missing from the build.
"""

import functools
import http.server
import json
import shutil
import subprocess
import sys
import threading
from pathlib import Path
from urllib.parse import urlparse

import pytest
import yaml

from hybridlib.paths import REPO_ROOT


def toc_files() -> list[str]:
    toc = yaml.safe_load((REPO_ROOT / "_toc.yml").read_text())
    files = [toc["root"]]
    for part in toc["parts"]:
        for entry in part["chapters"]:
            files.append(entry["file"])
            files += [s["file"] for s in entry.get("sections", [])]
    return files


def expected_title(doc: str) -> str:
    source = REPO_ROOT / doc
    if source.with_suffix(".ipynb").exists():
        first = json.loads(source.with_suffix(".ipynb").read_text())["cells"][0]["source"]
        text = "".join(first)
    else:
        text = source.with_suffix(".md").read_text()
    return next(line[2:].strip() for line in text.splitlines() if line.startswith("# "))


def stored_figures(doc: str) -> int:
    path = (REPO_ROOT / doc).with_suffix(".ipynb")
    if not path.exists():
        return 0
    cells = json.loads(path.read_text())["cells"]
    return sum("image/png" in o.get("data", {}) or "image/svg+xml" in o.get("data", {})
               for c in cells if c["cell_type"] == "code" for o in c.get("outputs", []))


@pytest.fixture(scope="module")
def html_root(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("book")
    jb = Path(sys.executable).with_name("jupyter-book")
    proc = subprocess.run([str(jb), "build", "-W", "-n", "--keep-going", "--path-output", str(out), str(REPO_ROOT)],
                          check=False, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, f"jupyter-book build -W failed:\n{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    return out / "_build" / "html"


@pytest.fixture(scope="module")
def server(html_root):
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html_root))
    handler.log_message = lambda *a, **k: None
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()


@pytest.fixture(scope="module")
def browser():
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    assert chromium and driver_path, "Debian chromium and chromium-driver are needed: run `make browser`"
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--disable-dev-shm-usage"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(driver_path), options=options)
    yield driver
    driver.quit()


ASSETS_JS = """
return Array.from(document.querySelectorAll('img[src], script[src], link[href]'))
  .map(e => e.src || e.href);
"""
IMAGES_JS = "return Array.from(document.images).map(i => [i.src, i.complete && i.naturalWidth > 0]);"


@pytest.mark.parametrize("doc", toc_files())
def test_page_loads_with_title_figures_and_assets(doc, server, browser, html_root):
    browser.get(f"{server}/{doc}.html")
    h1 = browser.find_element("css selector", "article h1").text.replace("#", "").strip()
    assert h1 == expected_title(doc)
    assert expected_title(doc) in browser.title
    images = browser.execute_script(IMAGES_JS)
    broken = [src for src, ok in images if not ok]
    assert not broken, f"broken images on {doc}: {broken}"
    content_images = [src for src, _ in images if "/_images/" in src]
    assert len(content_images) >= stored_figures(doc), f"{doc}: figures stored in the notebook are missing"
    for url in browser.execute_script(ASSETS_JS):
        parsed = urlparse(url)
        if parsed.netloc != urlparse(server).netloc:
            continue
        assert (html_root / parsed.path.lstrip("/")).exists(), f"{doc} references a missing asset {parsed.path}"
