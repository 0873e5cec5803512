"""Size and build time of attention.html, and the screenshot in docs/figures.

    OMP_NUM_THREADS=1 python benchmarks/attention_viewer.py --model smollm2-135m-instruct \\
        --configs reversal_ood -n 50 --output /tmp/viewer-smollm2
    OMP_NUM_THREADS=1 python benchmarks/attention_viewer.py --model runs/rev/final \\
        --configs reversal_id reversal_ood -n 25 --output /tmp/viewer-rev \\
        --screenshot docs/figures/attention-viewer.png

Target: at most 5 MB for 50 reversal_ood instances of SmolLM2-135M (30 layers x 9
heads: the rollout, 30 layer means and the top 8 heads, `harness.attention.viewer_data`).
Prints one JSON line: bytes, seconds to build (measurement and writing), views, instances,
and the target beside them (`target_megabytes`, `target`: "met" or "missed"; it is set for
the 50-instance SmolLM2 page, so other pages are measured against it only as a guide).

`--screenshot` opens the page in the browser tests' headless Chromium (`tests/browser.py`),
picks the first wrong OOD instance (else the first), the best kept head, hovers a wrong row
(else the last) and clicks its first reference key, then saves the window as a PNG.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

TARGET_MEGABYTES = 5.0  # 50 reversal_ood instances of SmolLM2-135M


def build(args) -> tuple[Path, dict, float]:
    from attentionspan_datasets.generation import DEFAULT_SEED
    from harness.attention.analysis import load_instances
    from harness.attention.viewer_data import build_viewer_data
    from harness.foundation.models import load_model
    from harness.foundation.runs import read_run_file, saved_prompt
    from harness.report.viewer import VIEWER_FILE, write_html

    model, tokenizer = load_model(args.model)
    model.eval()
    info = read_run_file(args.model) if Path(args.model).is_dir() else None
    prompt = saved_prompt(info, args.model)
    instances = [x for c in args.configs for x in load_instances(c, args.num, DEFAULT_SEED, "test")]
    ranking = setting = None
    started = time.perf_counter()
    if args.top:
        from attentionspan_datasets import presets
        from harness.attention.heads import rank_heads
        from harness.attention.sweep import Setting

        # The paper's ranking on 30 ID validation instances of the first config's task.
        id_config = presets.pair(args.configs[0])[0].name
        ranked = load_instances(id_config, 30, DEFAULT_SEED, "validation")
        ranking = rank_heads(model, tokenizer, ranked, prompt)
        setting = Setting(heads="top", n=args.top, strength=args.strength)
    data = build_viewer_data(
        model,
        tokenizer,
        instances,
        prompt,
        ranking=ranking,
        setting=setting,
        batch_size=args.batch_size,
        meta={
            "model": args.label or args.model,
            "prompt": f"instruction {prompt.instruction!r}"
            if prompt.instruction
            else "no instruction",
        },
    )
    title = f"Attention on reference tokens: {args.label or args.model}"
    path = write_html(data, Path(args.output) / VIEWER_FILE, title=title)
    return path, data, time.perf_counter() - started


def screenshot(path: Path, data: dict, out: Path) -> None:
    from selenium.webdriver.common.action_chains import ActionChains
    from selenium.webdriver.support.ui import Select

    from tests.browser import browser_missing, console_errors, open_browser, open_page

    missing = browser_missing()
    if missing:
        raise SystemExit(missing)
    instances = data["instances"]

    def wrong(x):
        return not all(x["settings"]["baseline"]["correct"])

    from attentionspan_datasets import presets

    ood = [j for j, x in enumerate(instances) if presets.get(x["config"]).role == "ood"] or [0]
    j = next((j for j in ood if wrong(instances[j]) and len(instances[j]["target"]) <= 16), ood[0])
    inst = instances[j]
    block = inst["settings"]["baseline"]
    row = next((i for i, ok in enumerate(block["correct"]) if not ok), len(block["correct"]) - 1)
    # The head with the largest mean share on the reference over the file's instances.
    from harness.attention.viewer_data import decode_maps

    heads = [v for v, view in enumerate(data["views"]) if view["kind"] == "head"]
    share = dict.fromkeys(heads, 0.0)
    for k in range(len(instances)):
        maps = decode_maps(data, k)["baseline"]
        for v in heads:
            for i, cols in enumerate(instances[k]["mask"]):
                total = maps[v, i].sum()
                share[v] += maps[v, i, cols].sum() / total if total > 0 else 0.0
    head = data["views"][max(heads, key=share.get)]["name"]
    with open_browser(1500, 1000) as driver:
        open_page(driver, path)
        Select(driver.find_element("id", "instance")).select_by_value(str(j))
        Select(driver.find_element("id", "view")).select_by_visible_text(head)
        if len(data["settings"]) > 1:
            driver.find_element("id", "compare").click()
        canvas = driver.find_element("css selector", "canvas.heat")
        for col in (inst["mask"][row][0] if inst["mask"][row] else 0, 0):
            rect = driver.execute_script(
                "const v = window.attentionViewer; return v.cellRect(v.state.panes[0], "
                "arguments[0], arguments[1]);",
                row,
                col,
            )
            dx = rect["x"] + rect["w"] / 2 - canvas.size["width"] / 2
            dy = rect["y"] + rect["h"] / 2 - canvas.size["height"] / 2
            chain = ActionChains(driver).move_to_element_with_offset(canvas, int(dx), int(dy))
            (chain.click() if col else chain).perform()
        errors = console_errors(driver)
        if errors:
            raise SystemExit(f"console errors: {errors}")
        out.parent.mkdir(parents=True, exist_ok=True)
        driver.save_screenshot(str(out))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--configs", nargs="+", default=["reversal_ood"])
    parser.add_argument("-n", "--num", type=int, default=50, help="instances per config")
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--output", required=True)
    parser.add_argument("--screenshot", default=None, help="save a PNG of the page here")
    parser.add_argument(
        "--top", type=int, default=0, help="also show the top-N heads reinforced (0: none)"
    )
    parser.add_argument("--strength", type=float, default=1.0, help="C of that intervention")
    parser.add_argument("--label", default=None, help="the model's name on the page")
    args = parser.parse_args()
    path, data, seconds = build(args)
    size = path.stat().st_size
    result = {
        "model": args.model,
        "configs": args.configs,
        "instances": len(data["instances"]),
        "views": len(data["views"]),
        "bytes": size,
        "megabytes": round(size / 1e6, 3),
        "seconds": round(seconds, 1),
        "threads": os.environ.get("OMP_NUM_THREADS"),
        "target_megabytes": TARGET_MEGABYTES,
        "target": "met" if size <= TARGET_MEGABYTES * 1e6 else "missed",
    }
    print(json.dumps(result))
    if args.screenshot:
        screenshot(path, data, Path(args.screenshot))


if __name__ == "__main__":
    main()
