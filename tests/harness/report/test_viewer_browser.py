"""attention.html in a real browser (headless Chromium): pick an instance and a head, hover a
row, and check what the page shows against the data and `attentionspan attention`'s numbers.

Skips (with the reason) where Chromium, chromedriver or selenium is missing; CI installs them
(.ci/run). Run alone: python -m pytest -m browser tests/harness/report/test_viewer_browser.py
"""

from __future__ import annotations

import json

import pytest

from tests.browser import browser_missing, console_errors, open_browser, open_page
from tests.harness.report.test_viewer import long_page, tokenizer  # noqa: F401, F811 (fixtures)

pytestmark = pytest.mark.browser
MISSING = browser_missing()
N = 6  # instances per config


@pytest.fixture(scope="module")
def attn_tokenizer():
    import string

    from harness.tokenization import make_char_tokenizer

    return make_char_tokenizer(string.printable)


@pytest.fixture(scope="module")
def page(tmp_path_factory, attn_tokenizer):
    """(path, data, analysis results) for a tiny model on reversal_id and reversal_ood, with
    an intervention (L1H0, C = 1) beside the baseline."""
    if MISSING:
        pytest.skip(MISSING)
    import torch

    from harness.attention.analysis import AnalysisConfig, analyse_model, load_instances
    from harness.attention.viewer_data import build_viewer_data
    from harness.engine.capture import Intervention
    from harness.report.viewer import write_html
    from tests.harness.attention_models import build_tiny

    model = build_tiny("llama", attn_tokenizer)
    configs = ["reversal_id", "reversal_ood"]
    # `results` is what attention.json holds under "configs".
    results, _ = analyse_model(
        model,
        attn_tokenizer,
        AnalysisConfig(configs=configs, num=N, batch_size=8, modes=("teacher_forced",)),
    )
    instances = [x for c in configs for x in load_instances(c, N, 1234, "test")]
    heads = torch.zeros(2, 4, dtype=torch.bool)
    heads[1, 0] = True
    data = build_viewer_data(
        model, attn_tokenizer, instances, setting=Intervention(heads=heads, strength=1.0)
    )
    path = write_html(data, tmp_path_factory.mktemp("viewer") / "attention.html")
    return path, data, results


PIXEL_JS = """
const [k, rows, cols] = arguments;
const v = window.attentionViewer, pane = v.state.panes[k];
const g = pane.canvas.getContext('2d'), out = [];
for (let row = 0; row < rows; row++) for (let col = 0; col < cols; col++) {
  const r = v.cellRect(pane, row, col), px = g.getImageData(r.x + 1, r.y + 1, 1, 1).data;
  out.push([row, col, px[0], px[1], px[2]]);
}
return out;
"""


def _green(px) -> bool:
    return px[0] == 0 and px[1] == 176 and px[2] == 0


def _hover(driver, pane: int, row: int, col: int) -> None:
    from selenium.webdriver.common.action_chains import ActionChains

    canvas = driver.find_elements("css selector", "canvas.heat")[pane]
    rect = driver.execute_script(
        "const v = window.attentionViewer; return v.cellRect(v.state.panes[arguments[0]], "
        "arguments[1], arguments[2]);",
        pane,
        row,
        col,
    )
    # Selenium 4 offsets are from the element's centre.
    dx = rect["x"] + rect["w"] / 2 - canvas.size["width"] / 2
    dy = rect["y"] + rect["h"] / 2 - canvas.size["height"] / 2
    ActionChains(driver).move_to_element_with_offset(canvas, int(dx), int(dy)).perform()


def _drawn(driver, pane: int) -> set:
    """The reference cells the page drew in the pane's visible window."""
    return {tuple(x) for x in driver.execute_script(f"return window.attentionViewer.drawn({pane})")}


def _zoom(driver, cell: int) -> None:
    driver.execute_script(
        "const z = document.getElementById('zoom'); z.value = arguments[0];"
        "z.dispatchEvent(new Event('input'));",
        cell,
    )


def _check_reference_pixels(driver, pane: int, inst) -> None:
    """Every cell of the map: outlined green exactly when it is a reference cell."""
    drawn = _drawn(driver, pane)
    mask = {(r, c) for r, cols in enumerate(inst["mask"]) for c in cols}
    assert drawn == mask
    pixels = driver.execute_script(PIXEL_JS, pane, len(inst["target"]), len(inst["text"]))
    assert len(pixels) == len(inst["target"]) * len(inst["text"])
    for row, col, *px in pixels:
        assert _green(px) == ((row, col) in mask), (row, col, px)


def test_page_shows_the_data_and_the_analysis_numbers(page):
    from selenium.webdriver.support.ui import Select, WebDriverWait

    path, data, results = page
    with open_browser(1600, 1400) as driver:
        open_page(driver, path)

        # The config table: attention.json's teacher-forced rollout means and counts.
        for config, result in results.items():
            row = driver.find_element(
                "css selector",
                f'#config-summary tr[data-config="{config}"][data-setting="baseline"]',
            )
            for group, cls in (("correct", "correct"), ("error", "wrong")):
                expected = result["rollout"][group]
                shown = row.find_element("css selector", f".mean-{cls}").text
                n = int(row.find_element("css selector", f".n-{cls}").text)
                assert n == expected["n"]
                if expected["mean"] is None:
                    assert shown == "-"
                else:
                    assert float(shown) == pytest.approx(expected["mean"], abs=6e-5)

        # Pick the OOD instance with the longest answer, then a head.
        Select(driver.find_element("id", "f-config")).select_by_value("reversal_ood")
        j = max(
            (i for i, x in enumerate(data["instances"]) if x["config"] == "reversal_ood"),
            key=lambda i: len(data["instances"][i]["target"]),
        )
        Select(driver.find_element("id", "instance")).select_by_value(str(j))
        Select(driver.find_element("id", "setting")).select_by_value("baseline")
        Select(driver.find_element("id", "view")).select_by_visible_text("L1H2")
        inst = data["instances"][j]
        block = inst["settings"]["baseline"]
        # Large cells: the map scrolls, and only the visible window is drawn.
        _zoom(driver, 24)
        last = len(inst["target"]) - 1
        assert (last, inst["mask"][last][0]) not in _drawn(driver, 0)
        driver.execute_script(
            "const s = document.querySelector('.scroller'); s.scrollTop = s.scrollHeight;"
        )
        WebDriverWait(driver, 5).until(lambda d: (last, inst["mask"][last][0]) in _drawn(d, 0))
        assert (0, inst["mask"][0][0]) not in _drawn(driver, 0)
        _zoom(driver, 6)  # small cells: the whole map in view
        title = driver.find_element("css selector", ".pane-title").text
        assert title == "baseline · L1H2"
        _check_reference_pixels(driver, 0, inst)

        # Hover a row: its score (the analysis number) and its gold -> predicted.
        row = len(inst["target"]) - 1
        _hover(driver, 0, row, 0)
        info = driver.find_element("id", "row-info")
        score = info.find_element("css selector", '.score[data-setting="baseline"]').text
        assert float(score) == pytest.approx(block["scores"][row], abs=5e-5)
        assert f"row {row}: gold {inst['target'][row]!r}".replace("'", '"') in info.text
        assert ("(correct)" if block["correct"][row] else "(wrong)") in info.text
        assert f"-> predicted {json.dumps(block['predicted'][row])} " in info.text

        # Click a key cell: who attends to it.
        key = inst["mask"][row][0]
        from selenium.webdriver.common.action_chains import ActionChains

        _hover(driver, 0, row, key)
        ActionChains(driver).click().perform()
        assert driver.find_element("id", "key-info").text.startswith(f"key {key} ")

        # Select two rows by their labels: the summary's mean is over those rows.
        for chosen in (0, row):
            _hover(driver, 0, chosen, 0)
            canvas = driver.find_element("css selector", "canvas.heat")
            ActionChains(driver).move_to_element_with_offset(
                canvas, -canvas.size["width"] // 2 + 20, 0
            ).perform()
            rect = driver.execute_script(
                "const v = window.attentionViewer; return v.cellRect(v.state.panes[0], "
                "arguments[0], 0);",
                chosen,
            )
            dy = rect["y"] + rect["h"] / 2 - canvas.size["height"] / 2
            ActionChains(driver).move_to_element_with_offset(
                canvas, -canvas.size["width"] // 2 + 20, int(dy)
            ).click().perform()
        assert driver.execute_script(
            "return [...window.attentionViewer.state.selected].sort()"
        ) == [
            0,
            row,
        ]
        shown = driver.find_element("css selector", '.mean-score[data-setting="baseline"]').text
        chosen = [s for s in (block["scores"][0], block["scores"][row]) if s is not None]
        assert float(shown) == pytest.approx(sum(chosen) / len(chosen), abs=5e-5)
        driver.find_element("id", "only-selected").click()
        assert driver.execute_script("return window.attentionViewer.drawn(0).length") == len(
            inst["mask"][0]
        ) + len(inst["mask"][row])
        driver.find_element("id", "clear-selection").click()

        # The intervention beside the baseline: two panes, the same reference cells.
        Select(driver.find_element("id", "setting")).select_by_value("intervention")
        driver.find_element("id", "compare").click()
        titles = [e.text for e in driver.find_elements("css selector", ".pane-title")]
        assert titles == ["baseline · L1H2", "intervention · L1H2"]
        _check_reference_pixels(driver, 1, inst)
        _hover(driver, 1, row, 0)
        score = driver.find_element("css selector", '.score[data-setting="intervention"]').text
        expected = inst["settings"]["intervention"]["scores"][row]
        assert float(score) == pytest.approx(expected, abs=5e-5)

        assert console_errors(driver) == []


def test_a_2000_token_page_renders_and_answers_at_its_far_end(long_page):  # noqa: F811
    """Scrolled to the last column of a 2,000-token text, the page still draws the reference
    and hovering a row shows its score, with no console error."""
    from selenium.webdriver.support.ui import WebDriverWait

    if MISSING:
        pytest.skip(MISSING)
    path, data, _ = long_page
    inst = data["instances"][0]
    with open_browser() as driver:
        open_page(driver, path)
        row = len(inst["target"]) - 1
        cell = (row, inst["mask"][row][0])
        assert cell not in _drawn(driver, 0)  # far to the right: not drawn yet
        driver.execute_script(
            "const s = document.querySelector('.scroller'); s.scrollLeft = arguments[0];",
            88 + cell[1] * 14 - 200,
        )
        WebDriverWait(driver, 5).until(lambda d: cell in _drawn(d, 0))
        pixels = driver.execute_script(
            "const v = window.attentionViewer, p = v.state.panes[0], r = v.cellRect(p, "
            "arguments[0], arguments[1]); return Array.from(p.canvas.getContext('2d')"
            ".getImageData(r.x + 1, r.y + 1, 1, 1).data);",
            *cell,
        )
        assert _green(pixels)
        _hover(driver, 0, row, cell[1])
        score = driver.find_element("css selector", '.score[data-setting="baseline"]').text
        assert float(score) == pytest.approx(inst["settings"]["baseline"]["scores"][row], abs=5e-5)
        assert console_errors(driver) == []
