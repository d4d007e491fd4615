"""The `matrix --html` page in a real headless browser: Debian's chromium, driven by Selenium
through Debian's chromedriver.

The page comes from a real grid (the wheels of helpers.matrix_projects, as in
tests/commands/test_matrix.py, on a loopback index), loaded from a file:// URL; so does the
page of a grid of two extensions on two Pythons, whose filters are clicked. Where chromium,
chromedriver or selenium is missing the test fails under CI (the `CI` variable set, as `.ci/run`
runs: it installs them) and is skipped elsewhere, saying what to install. The screenshot of the
page, with a failing cell open, is kept under the test's tmp directory; its path is printed.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from helpers import (
    CHECK_IMPL_INT,
    CHECK_IMPL_UNSIGNED,
    MATRIX_GRID,
    MATRIX_PYTHONS_GRID,
    matrix_binaries,
    matrix_projects,
    run_grid,
    run_matrix,
)
from httpserver import LoopbackIndex, Projects

if TYPE_CHECKING:
    from selenium.webdriver.remote.webdriver import WebDriver

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

INSTALL = ("apt-get install -y chromium chromium-driver (Debian) and pip install selenium "
           "(the `test` extra)")


def _in_ci() -> bool:
    return os.environ.get("CI", "").lower() not in ("", "0", "false", "no")


def _missing() -> str | None:
    """What of the browser set-up is missing, None when nothing is."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "the selenium package is not installed"
    for tool in ("chromium", "chromedriver"):
        if shutil.which(tool) is None:
            return f"{tool} is not on PATH"
    return None


@pytest.fixture(scope="module")
def index_projects(tmp_path_factory: pytest.TempPathFactory) -> Projects:
    """What `loopback_index` (conftest.py) serves to this module: the matrix grid's wheels."""
    return matrix_projects(matrix_binaries(tmp_path_factory.mktemp("matrix-browser")))


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[WebDriver]:
    """Headless chromium with its console log kept; a failure in CI, a skip elsewhere, when it
    cannot be had."""
    missing = _missing()
    if missing is not None:
        if _in_ci():
            pytest.fail(f"{missing}: CI must install it ({INSTALL}; .ci/run does)")
        pytest.skip(f"{missing}; install {INSTALL} to run the browser test")
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(shutil.which("chromium"))
    profile = tmp_path_factory.mktemp("chromium-profile")
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu",
                     "--disable-dev-shm-usage", "--window-size=1400,1100",
                     f"--user-data-dir={profile}"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(shutil.which("chromedriver"))),
                              options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_the_page_renders_and_a_failing_cell_opens(
        browser: WebDriver, loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The grid has a row per extpkg release and a cell per hostpkg wheel; the fitting cells
    are highlighted (their computed background differs from a failing one's); a failing cell
    opens on a click to the demangled symbol and the parameter that changed; the script's
    button opens every failing cell; the console has no error."""
    from selenium.webdriver.common.by import By

    page = tmp_path / "matrix.html"
    code, _out, _err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path / "cache",
                                  *MATRIX_GRID, "--html", str(page))
    assert code == 0
    browser.get(page.as_uri())
    assert browser.title == "extpkg against hostpkg"

    rows = browser.find_elements(By.CSS_SELECTOR, "table.grid tbody tr")
    assert [r.find_element(By.CSS_SELECTOR, "th[scope=row]").text.split()[0] for r in rows] \
        == ["2.0", "1.0"]
    assert [len(r.find_elements(By.TAG_NAME, "td")) for r in rows] == [4, 4]
    sub_columns = browser.find_elements(By.CSS_SELECTOR, "table.grid thead tr:nth-child(2) th")
    assert [th.text for th in sub_columns] == ["plain", "+cu130", "plain", "plain"]

    fits = browser.find_elements(By.CSS_SELECTOR, "td.fits")
    assert len(fits) == 3 and all(f.text.endswith("fits") for f in fits)
    fails = browser.find_elements(By.CSS_SELECTOR, "td.fails")
    assert len(fails) == 5
    fit_colour = fits[0].value_of_css_property("background-color")
    assert fit_colour == "rgba(218, 251, 225, 1)"
    assert fails[0].value_of_css_property("background-color") != fit_colour

    target = browser.find_element(By.CSS_SELECTOR, ".box.target").text
    assert "3.11 (cp311)" in target and "linux_x86_64" in target
    words = [s.text for s in browser.find_elements(By.CSS_SELECTOR, "ul.legend li .swatch")]
    assert words == ["✓fits", "◐degraded", "✗fails", "!error", "—not checked"]

    cell = browser.find_element(By.CSS_SELECTOR,
                                'td.fails[title="extpkg 1.0 with hostpkg 2.0"]')
    detail = cell.find_element(By.CSS_SELECTOR, ".detail")
    assert not detail.is_displayed()
    cell.find_element(By.TAG_NAME, "summary").click()
    assert detail.is_displayed()
    text = detail.text
    assert CHECK_IMPL_INT in text and CHECK_IMPL_UNSIGNED in text
    assert "parameter 4: int → unsigned int" in text
    assert "int hostlib::pick<char>(char const&, int)" in text  # escaped, shown as written
    assert "hostpkg 2.0 (hostpkg/lib/libhost.so) defines" in text

    browser.execute_script("arguments[0].scrollIntoView({block: 'center'})", cell)
    shot = tmp_path / "matrix.png"
    assert browser.save_screenshot(str(shot))
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with capsys.disabled():
        print(f"\nscreenshot of the matrix page: {shot}")

    browser.find_element(By.CSS_SELECTOR, ".tools button[data-open='1']").click()
    assert all(d.get_attribute("open") is not None
               for d in browser.find_elements(By.CSS_SELECTOR, "td.fails details"))
    severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []
    command = browser.find_element(By.CSS_SELECTOR, ".command code").text
    assert command.startswith("abifit matrix ") and f"--html {page}" in command
    assert_fits_a_phone(browser)


def assert_fits_a_phone(browser: WebDriver) -> None:
    """At a phone's width (390 CSS pixels) the page does not scroll sideways: only the
    table's own box does. The window is made wide again after."""
    browser.set_window_size(390, 844)
    try:
        width = browser.execute_script("return window.innerWidth")
        page_width = browser.execute_script("return document.documentElement.scrollWidth")
        assert width <= 420 and page_width <= width, (page_width, width)
    finally:
        browser.set_window_size(1400, 1100)


def _shown(browser: WebDriver, css: str) -> list[str]:
    """The `title` (else the text) of each element `css` selects that is displayed."""
    from selenium.webdriver.common.by import By

    return [e.get_attribute("title") or e.text for e in browser.find_elements(By.CSS_SELECTOR, css)
            if e.is_displayed()]


def _click(browser: WebDriver, name: str, value: str) -> None:
    from selenium.webdriver.common.by import By

    browser.find_element(By.CSS_SELECTOR,
                         f"form.filters input[name='{name}'][value='{value}']").click()


def test_the_grid_page_filters_by_package_release_variant_and_python(
        browser: WebDriver, loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The page of extpkg and otherpkg on CPython 3.11 and 3.12: a section per matrix; the
    filters hide and show them: a Python or a package unchecked hides its matrices, a variant
    its sub-columns (the release's heading then spans the one left), a host release its
    cells; checked again, everything is back. A failing cell of the grid opens to the
    parameter that changed, and the console has no error. Without the script the filters stay
    hidden and every cell is shown."""
    from selenium.webdriver.common.by import By

    page = tmp_path / "grid.html"
    code, _out, err = run_grid(capsys, monkeypatch, loopback_index, tmp_path / "cache",
                               *MATRIX_PYTHONS_GRID, "--html", str(page))
    assert code == 0, err
    browser.get(page.as_uri())
    assert browser.title == "extpkg, otherpkg against hostpkg"
    headings = ["extpkg on Python 3.11", "extpkg on Python 3.12", "otherpkg on Python 3.11",
                "otherpkg on Python 3.12"]
    assert _shown(browser, "section.matrix h2") == headings
    assert browser.find_element(By.CSS_SELECTOR, "form.filters").is_displayed()
    assert len(_shown(browser, "table.grid td")) == 18
    counted = browser.find_element(By.CSS_SELECTOR, "form.filters output")
    assert counted.text == "4 of 4 matrices shown"
    fits = [(td.find_element(By.XPATH, "ancestor::section").find_element(By.TAG_NAME, "h2").text,
             td.get_attribute("title")) for td in browser.find_elements(By.CSS_SELECTOR, "td.fits")]
    assert ("otherpkg on Python 3.11", "otherpkg 1.0 with hostpkg 1.0") in fits
    assert ("otherpkg on Python 3.12", "otherpkg 1.0 with hostpkg 2.0+cu130") in fits
    assert ("otherpkg on Python 3.12", "otherpkg 1.0 with hostpkg 1.0") not in fits

    _click(browser, "python", "3.12")
    assert _shown(browser, "section.matrix h2") == [headings[0], headings[2]]
    assert len(_shown(browser, "table.grid td")) == 9
    assert counted.text == "2 of 4 matrices shown"
    _click(browser, "python", "3.12")
    assert _shown(browser, "section.matrix h2") == headings

    _click(browser, "variant", "cu130")
    shown = _shown(browser, "table.grid td")
    assert len(shown) == 12 and not any(t.endswith("+cu130") for t in shown)
    first = browser.find_element(By.CSS_SELECTOR, "section.matrix")
    release = first.find_element(By.CSS_SELECTOR,
                                 "thead th[data-release='2.0']:not([data-variant])")
    assert release.get_attribute("colspan") == "1" and release.text == "hostpkg 2.0"
    _click(browser, "release", "1.0")
    shown = _shown(browser, "table.grid td")
    assert len(shown) == 6 and all(t.endswith("with hostpkg 2.0") for t in shown)
    _click(browser, "package", "otherpkg")
    assert _shown(browser, "section.matrix h2") == headings[:2]
    assert len(_shown(browser, "table.grid td")) == 4
    for name, value in (("package", "otherpkg"), ("release", "1.0"), ("variant", "cu130")):
        _click(browser, name, value)
    assert len(_shown(browser, "table.grid td")) == 18
    assert release.get_attribute("colspan") == "2"

    section = browser.find_elements(By.CSS_SELECTOR, "section.matrix")[2]
    cell = section.find_element(By.CSS_SELECTOR, 'td.fails[title="otherpkg 1.0 with hostpkg 2.0"]')
    detail = cell.find_element(By.CSS_SELECTOR, ".detail")
    assert not detail.is_displayed()
    cell.find_element(By.TAG_NAME, "summary").click()
    assert detail.is_displayed()
    assert CHECK_IMPL_INT in detail.text and "parameter 4: int → unsigned int" in detail.text
    severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []
    shot = tmp_path / "grid.png"
    assert browser.save_screenshot(str(shot))
    with capsys.disabled():
        print(f"\nscreenshot of the grid page: {shot}")
    assert_fits_a_phone(browser)

    html = page.read_text("utf-8")
    assert "<script>" in html and not re.search(r"\b(src|href)=|@import|url\(", html)
    plain = tmp_path / "grid-without-script.html"
    plain.write_text(html[:html.index("<script>")] + html[html.index("</script>") + 9:], "utf-8")
    browser.get(plain.as_uri())
    assert not browser.find_element(By.CSS_SELECTOR, "form.filters").is_displayed()
    assert _shown(browser, "section.matrix h2") == headings
    assert len(_shown(browser, "table.grid td")) == 18


def test_the_resolve_page_renders_and_a_package_opens_to_its_rejections(
        browser: WebDriver, loopback_index: LoopbackIndex, tmp_path: Path,
        capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """`resolve --html` over the same wheels: the chosen releases are highlighted, a package
    whose newer releases were not chosen opens on a click to each with its reason (the
    parameter that changed), and the console has no error."""
    from selenium.webdriver.common.by import By

    page = tmp_path / "resolve.html"
    code, out, err = run_matrix(capsys, monkeypatch, loopback_index, tmp_path / "cache", "resolve",
                                "extpkg==1.0", "hostpkg", "--html", str(page))
    assert code == 0, err
    browser.get(page.as_uri())
    assert browser.title == "abifit resolve extpkg==1.0 hostpkg"
    chosen = {r.find_element(By.CSS_SELECTOR, "th[scope=row]").text.split()[0]:
              r.find_element(By.CSS_SELECTOR, "td.fits").text.splitlines()[0].lstrip("✓ ")
              for r in browser.find_elements(By.CSS_SELECTOR, "table.grid tbody tr")}
    assert chosen["hostpkg"] == "1.0" and chosen["extpkg"] == "1.0"
    assert "hostpkg==1.0" in out  # the page says what the text says
    fit = browser.find_element(By.CSS_SELECTOR, "td.fits")
    assert fit.value_of_css_property("background-color") == "rgba(218, 251, 225, 1)"
    [row] = [r for r in browser.find_elements(By.CSS_SELECTOR, "table.grid tbody tr")
             if r.find_element(By.CSS_SELECTOR, "th[scope=row]").text.startswith("hostpkg")]
    rejected = row.find_element(By.CSS_SELECTOR, "td.fails")
    detail = rejected.find_element(By.CSS_SELECTOR, ".detail")
    assert not detail.is_displayed()
    rejected.find_element(By.TAG_NAME, "summary").click()
    assert detail.is_displayed()
    assert "hostlib::pick<char>(char const&, int) (parameter 2: int → unsigned int)" in \
        detail.text
    assert "3.0: " in detail.text and "libhost.so: cannot open shared object file" in detail.text
    shot = tmp_path / "resolve.png"
    assert browser.save_screenshot(str(shot))
    with capsys.disabled():
        print(f"\nscreenshot of the resolve page: {shot}")
    severe = [e for e in browser.get_log("browser") if e.get("level") == "SEVERE"]
    assert severe == []
    # the requested packages first: in the summary at the top and in the table
    summary = browser.find_element(By.CSS_SELECTOR, "section.summary").text
    assert "extpkg 1.0" in summary and "hostpkg 1.0" in summary
    first = [r.find_element(By.CSS_SELECTOR, "th[scope=row]").text.split()[0]
             for r in browser.find_elements(By.CSS_SELECTOR, "table.grid tbody tr")][:2]
    assert sorted(first) == ["extpkg", "hostpkg"]
    command = browser.find_element(By.CSS_SELECTOR, ".command code").text
    assert command.startswith("abifit resolve extpkg==1.0 hostpkg ")
    assert_fits_a_phone(browser)
