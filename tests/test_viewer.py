"""The viewer in a real headless Chromium (Debian's, driven by Playwright) against a real ``cubeslab
view`` server: each canvas shows the plane the engine reads, pixel by pixel after the colour map;
sliders, the keyboard and clicks move the linked views; zooming fetches a finer overview level; the
cursor shows the value and the labels; an MSI store shows its ion image (checked against pyimzML's
reading of the file) and the spectrum at a clicked pixel. Screenshots go into the test's folder."""

from __future__ import annotations

import re
import shutil
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from playwright.sync_api import Error as PlaywrightError
from starlette.testclient import TestClient

import cubeslab
from cubeslab.synthetic import SyntheticSurvey, write_segy
from cubeslab.viewer.app import make_app
from cubeslab_bench.viewer_server import viewer_server

CLI = Path(sys.executable).parent / "cubeslab"
WIDTH, HEIGHT = 480, 360


def chromium() -> str:
    for name in ("chromium-headless-shell", "chromium"):
        if path := shutil.which(name):
            return path
    pytest.fail("no Chromium on PATH: `make test` installs chromium-headless-shell")


@pytest.fixture(scope="module")
def stores(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("view")
    write_segy(folder / "survey.sgy", SyntheticSurvey(40, 50, 60), sample_format=5)
    cubeslab.ingest(folder / "survey.sgy", folder / "survey.zarr")
    # A wide, shallow volume whose time slice is larger than the canvas: drawn from an overview level.
    rng = np.random.default_rng(3)
    wide = rng.normal(size=(720, 960, 8)).astype(np.float32)
    coords = {"inline": np.arange(720), "crossline": np.arange(960), "time": np.arange(8) * 4.0}
    with cubeslab.create(folder / "wide.zarr", wide.shape, dims=tuple(coords), coords=coords) as cube:
        cube.amplitude[...] = wide
    cubeslab.build_pyramid(folder / "wide.zarr", axes=["inline", "crossline"], max_side=256)
    imzml = Path(__file__).parent / "data" / "imzml" / "Example_Continuous.imzML"
    cubeslab.ingest(imzml, folder / "msi.zarr")
    # A 5 x 5 survey without the trace at inline position 2, crossline position 2.
    cubeslab.ingest(Path(__file__).parent / "data" / "segy" / "small_hole.sgy", folder / "hole.zarr")
    names = ("survey", "wide", "msi", "hole")
    return {name: folder / f"{name}.zarr" for name in names}


@pytest.fixture(scope="module")
def server(stores):
    with viewer_server(stores[name] for name in ("survey", "wide", "msi", "hole")) as (_, base):
        yield f"{base}/"


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=chromium(), args=["--no-sandbox"])
        yield launched
        launched.close()


@pytest.fixture
def page(browser, server):
    opened = browser.new_page(viewport={"width": 1600, "height": 640})
    problems: list[str] = []
    opened.on("pageerror", lambda error: problems.append(str(error)))
    opened.goto(server)
    opened.evaluate("window.viewer.ready")
    yield opened
    opened.close()
    assert not problems, problems


def canvas_pixels(page, view: int) -> np.ndarray:
    data = page.evaluate(
        """(view) => Array.from(window.viewer.views[view].canvas.getContext('2d')
            .getImageData(0, 0, arguments_width, arguments_height).data)""".replace(
            "arguments_width", str(WIDTH)
        ).replace("arguments_height", str(HEIGHT)),
        view,
    )
    return np.array(data, dtype=np.uint8).reshape(HEIGHT, WIDTH, 4)


def expected_colours(page, view: int, plane: np.ndarray) -> np.ndarray:
    """``plane`` (rows x cols as the engine reads it) through the page's colour map and clip, as numpy
    computes it: index = round(255 * clip01((v - lo) / (hi - lo)))."""
    lo, hi = page.evaluate("(view) => window.viewer.views[view].clip", view)
    name = page.evaluate("window.viewer.state.colormap")
    table = np.array(page.evaluate("(name) => Array.from(window.viewer.lut(name))", name), np.uint8).reshape(
        256, 3
    )
    t = np.clip((plane.astype(np.float64) - lo) / (hi - lo), 0, 1)
    return table[np.floor(t * 255 + 0.5).astype(int)]


def assert_canvas_shows(page, view: int, plane: np.ndarray, across_is_rows: bool) -> None:
    """Every sample's centre pixel on the canvas has the sample's colour (crosshair pixels aside)."""
    pixels = canvas_pixels(page, view)
    colours = expected_colours(page, view, plane)
    image = np.transpose(colours, (1, 0, 2)) if across_is_rows else colours  # (down, across, rgb)
    down, across = image.shape[:2]
    ys = ((np.arange(down) + 0.5) * HEIGHT / down).astype(int)
    xs = ((np.arange(across) + 0.5) * WIDTH / across).astype(int)
    shown = pixels[np.ix_(ys, xs)][..., :3]
    crosshair = np.all(shown == shown, axis=2) & False
    state = page.evaluate("window.viewer.state.pos")
    layout = [(1, 2), (0, 2), (1, 0)][view]
    crosshair[:, [state[layout[0]]]] = True  # the crosshair's column and row
    crosshair[[state[layout[1]]], :] = True
    mismatched = np.any(shown != image, axis=2) & ~crosshair
    assert not mismatched.any(), f"{mismatched.sum()} of {mismatched.size} samples differ"


def test_each_view_shows_the_plane_the_engine_reads(page, stores, tmp_path):
    cube = cubeslab.open(stores["survey"])
    i, j, k = page.evaluate("window.viewer.state.pos")
    assert (i, j, k) == (20, 25, 30)
    assert_canvas_shows(page, 0, cube.amplitude[i], across_is_rows=True)
    assert_canvas_shows(page, 1, cube.amplitude[:, j], across_is_rows=True)
    assert_canvas_shows(page, 2, cube.amplitude[:, :, k], across_is_rows=False)
    page.screenshot(path=tmp_path / "viewer.png")
    assert (tmp_path / "viewer.png").stat().st_size > 10_000


def test_sliders_and_keys_step_through_the_survey(page, stores):
    cube = cubeslab.open(stores["survey"])
    page.evaluate("""() => { const s = window.viewer.views[0].slider; s.value = '7';
                             s.dispatchEvent(new Event('input')); }""")
    page.wait_for_function("window.viewer.views[0].canvas.dataset.index === '7'")
    assert_canvas_shows(page, 0, cube.amplitude[7], across_is_rows=True)
    page.focus("#views .view:nth-child(2) canvas")
    page.keyboard.press("ArrowUp")
    page.wait_for_function("window.viewer.views[1].canvas.dataset.index === '26'")
    page.keyboard.press("PageDown")
    page.wait_for_function("window.viewer.views[1].canvas.dataset.index === '16'")
    assert_canvas_shows(page, 1, cube.amplitude[:, 16], across_is_rows=True)


def test_a_click_in_one_view_moves_the_other_two(page, stores):
    canvas = page.locator("#views .view:nth-child(1) canvas")
    # The inline view: crosslines across (50 over 480 px), time down (60 over 360 px).
    canvas.click(position={"x": 10 * 9.6 + 4, "y": 45 * 6 + 2})
    page.wait_for_function("window.viewer.views[1].canvas.dataset.index === '10'")
    page.wait_for_function("window.viewer.views[2].canvas.dataset.index === '45'")
    cube = cubeslab.open(stores["survey"])
    assert_canvas_shows(page, 2, cube.amplitude[:, :, 45], across_is_rows=False)


def test_the_cursor_shows_the_value_and_labels(page, stores):
    page.locator("#views .view:nth-child(3) canvas").hover(position={"x": 3 * 9.6 + 4, "y": 5 * 9 + 4})
    page.wait_for_function("document.getElementById('readout').textContent.includes('crossline ')")
    text = page.inner_text("#readout")
    cube = cubeslab.open(stores["survey"])
    value = cube.amplitude[5, 3, 30]
    assert f"inline {cube.coords['inline'][5]}" in text and f"crossline {cube.coords['crossline'][3]}" in text
    assert f"value {value:.6g}"[:12] in text and "cdp_x" in text


def test_a_sample_where_the_survey_has_no_trace_is_answered_with_nulls(stores):
    client = TestClient(make_app([str(stores["hole"])]), base_url="http://127.0.0.1")
    [listed] = client.get("/api/stores").json()
    response = client.get(f"/api/stores/{listed['id']}/sample?i=2&j=2&k=0")
    assert response.status_code == 200, response.text
    found = response.json()
    assert found["value"] is None and found["cdp_x"] is None and found["cdp_y"] is None
    assert found["labels"]["inline"] == cubeslab.open(stores["hole"]).coords["inline"][2]


def test_the_cursor_over_a_missing_trace_says_no_trace(page):
    page.select_option("#store", label="hole.zarr")
    page.wait_for_function("window.viewer.state.meta.name === 'hole.zarr' && window.viewer.drawn() >= 6")
    time_slice = page.locator("#views .view:nth-child(3) canvas")  # crosslines across, inlines down
    time_slice.hover(position={"x": 1.5 * WIDTH / 5, "y": 1.5 * HEIGHT / 5})
    page.wait_for_function("document.getElementById('readout').textContent.includes('cdp_x')")
    assert "no trace" not in page.inner_text("#readout")
    time_slice.hover(position={"x": 2.5 * WIDTH / 5, "y": 2.5 * HEIGHT / 5})
    page.wait_for_function("document.getElementById('readout').textContent.includes('no trace')")
    text = page.inner_text("#readout")
    assert "cdp_x" not in text and "NaN" not in text, text


def test_off_loopback_the_page_starts_from_the_url_printed(browser, stores):
    with viewer_server([stores["survey"]], "--host", "0.0.0.0", wait=False) as (process, _):
        assert process.stderr is not None
        url = re.search(r"http://\S+", process.stderr.readline())
        assert url, "no URL printed"
        opened = browser.new_page(viewport={"width": 1600, "height": 640})
        problems: list[str] = []
        opened.on("pageerror", lambda error: problems.append(str(error)))
        for _ in range(100):  # until the server answers
            try:
                opened.goto(url.group(0))
                break
            except PlaywrightError:
                time.sleep(0.1)
        opened.evaluate("window.viewer.ready")
        opened.wait_for_function("window.viewer.drawn() >= 3")
        opened.close()
        assert not problems, problems


def test_zooming_in_fetches_a_finer_level(page, stores):
    page.select_option("#store", label="wide.zarr")
    page.wait_for_function("window.viewer.state.meta.name === 'wide.zarr' && window.viewer.drawn() >= 6")
    time_slice = page.locator("#views .view:nth-child(3) canvas")
    assert time_slice.get_attribute("data-factor") == "2"  # 960 x 720 samples on 480 x 360 pixels
    for _ in range(4):
        time_slice.hover(position={"x": 240, "y": 180})
        page.mouse.wheel(0, -100)
    page.wait_for_function("window.viewer.views[2].canvas.dataset.factor === '1'")
    view = page.evaluate("window.viewer.views[2].ranges")
    assert view[0][1] - view[0][0] < 720 and view[1][1] - view[1][0] < 960


def test_an_msi_store_shows_its_ion_image_and_the_spectrum_at_a_clicked_pixel(page, stores, tmp_path):
    from pyimzml.ImzMLParser import ImzMLParser

    page.select_option("#store", label="msi.zarr")
    page.wait_for_function("window.msiView.view.drawn >= 1")
    assert page.locator("#msi").is_visible() and not page.locator("#views").is_visible()
    view = "window.msiView.view"
    mz = page.evaluate(f"{view}.image.mz")
    # The oracle: pyimzML's spectra, summed within mz ± 10 ppm.
    parser = ImzMLParser(Path(__file__).parent / "data" / "imzml" / "Example_Continuous.imzML")
    nx, ny = page.evaluate(f"[{view}.image.nx, {view}.image.ny]")
    expected = np.zeros((nx, ny))
    spectra = {}
    for index, (x, y, _) in enumerate(parser.coordinates):
        mzs, intensities = parser.getspectrum(index)
        spectra[x, y] = intensities
        near = np.abs(mzs - mz) <= mz * 10e-6
        expected[x - 1, y - 1] = intensities[near].sum()
    np.testing.assert_allclose(
        np.array(page.evaluate(f"Array.from({view}.image.values)")).reshape(nx, ny), expected, rtol=1e-5
    )
    lo, hi = page.evaluate(f"{view}.clip")
    table = np.array(page.evaluate("Array.from(window.viewer.lut('viridis'))"), np.uint8).reshape(256, 3)
    colours = table[np.floor(np.clip((expected - lo) / (hi - lo), 0, 1) * 255 + 0.5).astype(int)]
    pixels = np.array(
        page.evaluate(
            "Array.from(document.getElementById('ion').getContext('2d').getImageData(0, 0, 480, 360).data)"
        ),
        np.uint8,
    ).reshape(360, 480, 4)
    for i in range(nx):
        for j in range(ny):
            centre = pixels[int((j + 0.5) * 360 / ny), int((i + 0.5) * 480 / nx), :3]
            assert (centre == colours[i, j]).all(), (i, j)
    # A click on pixel (x=2, y=3) plots its spectrum.
    page.locator("#ion").click(position={"x": 1.5 * 480 / nx, "y": 2.5 * 360 / ny})
    page.wait_for_function(f"{view}.spectrum !== null")
    np.testing.assert_allclose(page.evaluate(f"Array.from({view}.spectrum)"), spectra[2, 3], rtol=1e-6)
    assert page.inner_text("#spectrum-title") == "spectrum at x=2, y=3"
    # A click on the plot picks that m/z for the ion image.
    page.locator("#spectrum").click(position={"x": 60 + 0.25 * 648, "y": 100})
    page.wait_for_function(f"{view}.image.mz !== {mz}")
    page.screenshot(path=tmp_path / "msi.png")
