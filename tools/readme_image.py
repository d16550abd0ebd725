"""Draw the README's picture of a digest: the golden HTML of Ada's digest (tests/golden/ada.html, what the tests check
the renderer makes) shown by headless Chromium 700 px wide, its first 1,400 px, as docs/images/digest.png.

    .venv/bin/python tools/readme_image.py [--chromium /usr/bin/chromium]

Run it after the golden files change (`UPDATE_GOLDEN=1 .venv/bin/python -m pytest tests/test_golden.py`).
"""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
GOLDEN = ROOT / "tests" / "golden" / "ada.html"
OUT = ROOT / "docs" / "images" / "digest.png"
WIDTH, HEIGHT = 700, 1400
ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--no-first-run"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chromium", default=shutil.which("chromium") or "/usr/bin/chromium")
    args = parser.parse_args()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=args.chromium, args=ARGS)
        page = browser.new_page(viewport={"width": WIDTH, "height": HEIGHT}, color_scheme="light")
        page.set_content(GOLDEN.read_text(encoding="utf-8"))
        OUT.parent.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(OUT), clip={"x": 0, "y": 0, "width": WIDTH, "height": HEIGHT})
        browser.close()
    print(f"{OUT.relative_to(ROOT)}: {OUT.stat().st_size:,} bytes")


if __name__ == "__main__":
    main()
