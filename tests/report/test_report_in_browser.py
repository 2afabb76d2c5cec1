"""The HTML report as a person sees it: Debian's Chromium, headless, a real screenshot."""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"]
#: matplotlib's tab10 colours of pytorch and onnxruntime, as the plots draw them
PLOT_COLOURS = {"pytorch": (31, 119, 180), "onnxruntime": (214, 39, 40)}


def test_table_and_plots_are_visible(report_dir: Path, tmp_path: Path) -> None:
    if not Path(CHROMIUM).exists():
        pytest.skip("Debian's chromium is not installed (make test installs it with apt-get)")
    sync_api = pytest.importorskip("playwright.sync_api", reason="playwright is a dev extra")
    from PIL import Image

    shot = tmp_path / "report.png"
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.goto((report_dir / "report.html").as_uri())
            table = page.locator("table.comparison").first
            assert table.is_visible()
            assert "pytorch" in table.inner_text() and "tensorflow" in table.inner_text()
            images = page.locator("figure img")
            assert images.count() >= 6
            for i in range(images.count()):
                image = images.nth(i)
                image.scroll_into_view_if_needed()
                assert image.is_visible()
                width = image.evaluate("img => img.complete ? img.naturalWidth : 0")
                assert width > 300, f"plot {i} did not render"
            page.screenshot(path=str(shot), full_page=True)
        finally:
            browser.close()
    picture = Image.open(io.BytesIO(shot.read_bytes())).convert("RGB")
    assert picture.width >= 1280 and picture.height > 3000  # tables and every plot, one page
    colours = {c for _, c in picture.getcolors(maxcolors=1 << 24)}
    for system, rgb in PLOT_COLOURS.items():
        assert any(sum(abs(a - b) for a, b in zip(c, rgb, strict=True)) < 12 for c in colours), (
            f"no {system} line colour on screen")
