"""attention.html in a real browser (headless Chromium): pick an instance and a head, hover a
row, and check what the page shows against the data and `attentionspan attention`'s numbers.

Skips (with the reason) where Chromium, chromedriver or selenium is missing; CI installs them
(.ci/run). Run alone: python -m pytest -m browser tests/harness/report/test_viewer_browser.py
"""

from __future__ import annotations

import json

import pytest

from tests.browser import browser_missing, console_errors, open_browser, open_page
from tests.harness.report.test_viewer import (  # noqa: F401, F811 (fixtures)
    SCORED,
    SPECIAL,
    SPECS,
    long_page,
    synthetic_data,
    tokenizer,
)

pytestmark = pytest.mark.browser
MISSING = browser_missing()
N = 6  # instances per config


@pytest.fixture(scope="module")
def attn_tokenizer():
    import string

    from harness.foundation.tokenization import make_char_tokenizer

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


@pytest.fixture(scope="module")
def plain_page(tmp_path_factory):
    """(path, data) of the synthetic instances of test_viewer (no model, no intervention),
    as `attentionspan attention` writes them: 2 and 3 of 200 instances per config."""
    if MISSING:
        pytest.skip(MISSING)
    from harness.report.viewer import write_html

    data = synthetic_data(SPECS, meta={"scored": SCORED, "model": "tiny"})
    return write_html(data, tmp_path_factory.mktemp("plain") / "attention.html"), data


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

        # Beside an intervention, the summary names each setting.
        summary = driver.find_element("id", "summary").text
        assert "[baseline] predicted" in summary and "[intervention] predicted" in summary

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
            "const s = document.querySelector('.scroller'); s.scrollLeft = arguments[0] + "
            "window.attentionViewer.state.labelW;",
            cell[1] * 14 - 200,
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


def _painted(driver, selector: str) -> int:
    """How many pixels of a canvas are not white."""
    return driver.execute_script(
        "const c = document.querySelector(arguments[0]), px = c.getContext('2d')"
        ".getImageData(0, 0, c.width, c.height).data; let n = 0;"
        "for (let i = 0; i < px.length; i += 4) if (px[i] < 250 || px[i + 2] < 250) n++;"
        "return n;",
        selector,
    )


def test_it_opens_on_a_wrong_ood_instance_with_its_panels_filled(plain_page):
    """No intervention: the page opens where the notes say (the shortest OOD instance the
    model got wrong) and says so; the row and key panels show its first wrong token and that
    token's reference key before any hover; no "[baseline]" anywhere; the table says how many
    of attention.md's instances it covers."""
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import Select

    from harness.report.viewer import notes

    path, data = plain_page
    expected = notes(data)
    with open_browser() as driver:
        open_page(driver, path)
        j = expected["opening"]["index"]
        assert j == 4 and driver.execute_script("return window.attentionViewer.state.inst") == j
        assert Select(driver.find_element("id", "instance")).first_selected_option.text.startswith(
            "reversal_ood #2 · wrong"
        )
        assert driver.find_element("id", "opening").text == expected["opening"]["why"]

        # Before any hover: row 0 (the first wrong token) in the strip and the row panel, its
        # reference key 0 in the key panel, the key's bars drawn.
        inst = data["instances"][j]
        row_info = driver.find_element("id", "row-info").text
        assert row_info.startswith("Row 0, the first wrong answer token; hover a row")
        assert f'row 0: gold "{inst["target"][0]}" -> predicted "z" (wrong)' in row_info
        assert _painted(driver, "canvas.strip") > 100
        assert driver.find_element("id", "key-info").text.startswith(f"key {inst['mask'][0][0]} ")
        assert driver.find_element("id", "key-bars").is_displayed()
        assert _painted(driver, "#key-bars") > 100

        # One setting: no "[baseline]", no setting in the pane title or the table.
        for where in ("summary", "row-info", "key-info"):
            assert "[baseline" not in driver.find_element("id", where).text
        assert driver.find_element("css selector", ".pane-title").text == "rollout"
        heads = [e.text for e in driver.find_elements("css selector", "#config-summary th")]
        assert "setting" not in heads and "instances" in heads

        # Fewer instances than attention.md: said above the table and in each row.
        assert driver.find_element("id", "coverage").text == expected["coverage"]
        for config, held in (("reversal_id", 2), ("reversal_ood", 3)):
            cell = driver.find_element(
                "css selector", f'#config-summary tr[data-config="{config}"] .instances'
            )
            assert cell.text == f"{held} of 200"

        # Hovering shows another row; leaving the map returns to the first wrong one.
        _hover(driver, 0, 5, 3)
        assert driver.find_element("id", "row-info").text.startswith("row 5: gold")
        ActionChains(driver).move_to_element(driver.find_element("id", "opening")).perform()
        assert driver.find_element("id", "row-info").text.startswith("Row 0, the first wrong")
        # Another instance without a wrong token: its first row, and no empty key box when
        # that row has a reference (every synthetic row has one).
        Select(driver.find_element("id", "instance")).select_by_value("0")
        assert driver.find_element("id", "row-info").text.startswith(
            "Row 0, the first answer token (none is wrong)"
        )
        assert driver.find_element("id", "key-bars").is_displayed()
        assert console_errors(driver) == []


LABEL_JS = """
const v = window.attentionViewer, pane = v.state.panes[0], g = pane.canvas.getContext('2d');
// The labels drawn whole inside the canvas (the last one may hang below its edge).
return v.labels(0).filter((b) => b.y >= 0 && b.y + b.h <= pane.canvas.height).map((b) => {
  const cell = v.cellRect(pane, b.row, 0), gap = [];
  // The 6-pixel gap left of the first cell: the gutter's colour unless a label ran on.
  const px = g.getImageData(cell.x - 6, b.y + 1, 6, b.h - 2).data;
  for (let i = 0; i < px.length; i += 4) gap.push([px[i], px[i + 1], px[i + 2]]);
  return {row: b.row, text: b.text, end: b.x + b.w, cell: cell.x, gap: gap};
});
"""


@pytest.mark.parametrize("cell", [3, 8, 14, 24])
def test_row_labels_stay_clear_of_the_first_column(plain_page, cell):
    """The longest instance's labels (rows past 100, a wrong row whose prediction is a long
    special token): each label ends before the first cell, at every cell size, at the top and
    at the bottom of the map; the label too long for the gutter is cut with an ellipsis."""
    from selenium.webdriver.support.ui import Select, WebDriverWait

    path, data = plain_page
    j = max(range(len(data["instances"])), key=lambda i: len(data["instances"][i]["target"]))
    with open_browser() as driver:
        open_page(driver, path)
        Select(driver.find_element("id", "instance")).select_by_value(str(j))
        _zoom(driver, cell)
        seen = {}
        last = len(data["instances"][j]["target"]) - 1
        for scroll, row in (("0", 0), ("s.scrollHeight", last)):
            driver.execute_script(
                f"const s = document.querySelector('.scroller'); s.scrollTop = {scroll};"
            )
            # The scroll event redraws on the next frame.
            WebDriverWait(driver, 5).until(
                lambda d, row=row: row in [b["row"] for b in d.execute_script(LABEL_JS)]
            )
            for box in driver.execute_script(LABEL_JS):
                assert box["end"] <= box["cell"], box
                assert all(px == [250, 250, 250] for px in box["gap"]), box
                seen[box["row"]] = box["text"]
        assert {0, 105, last} <= set(seen)
        target = data["instances"][j]["target"]
        assert seen[3] == f'3 "{target[3]}"\u2192"q"'
        assert seen[105].endswith("\u2026") and seen[105].startswith(
            f'105 "{target[105]}"\u2192"<|'
        )
        assert SPECIAL not in seen[105]
        assert console_errors(driver) == []
