"""The viewer's page: its HTML skeleton, its CSS and its script, which `harness.report.viewer`
fills with the data (`render_html`). The script draws only the visible rows and columns of
the heat map on a canvas, on each scroll, so 2,000-token texts stay smooth.

    from harness.report.viewer import render_html
"""

PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>__TITLE__</title>
<style>__STYLE__</style>
</head>
<body>
<h1>__TITLE__</h1>
<p id="meta"></p>
<p id="opening"></p>
<div class="controls">
  <label>config <select id="f-config"></select></label>
  <label>outcome <select id="f-outcome">
    <option value="all">all</option><option value="correct">correct</option>
    <option value="wrong">wrong</option></select></label>
  <label>sort <select id="sort">
    <option value="score-desc">score, high first</option>
    <option value="score-asc">score, low first</option>
    <option value="index">config, index</option></select></label>
  <label>instance <select id="instance"></select></label>
</div>
<div class="controls">
  <label>view <select id="view"></select></label>
  <label id="setting-box">setting <select id="setting"></select></label>
  <label id="compare-box"><input type="checkbox" id="compare"> baseline beside it</label>
  <label>cell <input type="range" id="zoom" min="3" max="24" value="14"></label>
  <label><input type="checkbox" id="only-selected"> selected rows only</label>
  <button id="clear-selection" type="button">clear selection</button>
</div>
<div id="summary"></div>
<div id="panes"></div>
<div id="row-info" class="info">Hover a row of the map to see its attention over the keys.</div>
<div id="key-info" class="info">Click a cell to see which rows attend to its key.</div>
<canvas id="key-bars" width="10" height="10" hidden></canvas>
<details><summary>How to read this page</summary>
<p>Rows: the answer tokens (the query that predicts target[i] is the token before it); label
<code>i gold&rarr;predicted</code>, red when wrong (teacher-forced argmax). Columns: the task
text only (instruction, few-shot and template columns are left out). Each row is scaled to its
own maximum; grey cells lie after the row's query (causal). Green outline: the reference
cells. <em>score</em>: the rollout's share on the reference over the task-text columns (the
paper's score, as in attention.json). <em>view share</em>: the same share in the chosen view,
from the 8-bit values. Click a row label to select it; click a cell to pick its key.</p>
<p id="quantisation"></p>
</details>
<p id="coverage"></p>
<table id="config-summary"></table>
<script type="application/json" id="viewer-notes">__NOTES__</script>
<script type="application/json" id="viewer-data">__DATA__</script>
<script>__SCRIPT__</script>
</body>
</html>
"""


STYLE = """
body { font: 13px/1.4 system-ui, sans-serif; margin: 12px 18px; color: #222; }
h1 { font-size: 18px; margin: 0 0 4px; }
.controls { display: flex; flex-wrap: wrap; gap: 10px 16px; margin: 6px 0; align-items: center; }
select { max-width: 420px; }
#summary { margin: 8px 0; font-family: ui-monospace, monospace; white-space: pre-wrap; }
#panes { display: flex; gap: 12px; }
.pane { flex: 1 1 0; min-width: 0; }
.pane-title { font-weight: 600; margin-bottom: 2px; }
.scroller { position: relative; overflow: auto; height: 60vh; border: 1px solid #ccc; }
.scroller canvas { position: absolute; left: 0; top: 0; }
.spacer { position: relative; }
canvas.strip { display: block; width: 100%; height: 64px; border: 1px solid #eee; }
.info { margin: 6px 0; font-family: ui-monospace, monospace; white-space: pre-wrap; }
#key-bars { display: block; border: 1px solid #eee; }
table { border-collapse: collapse; margin-top: 8px; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: right; }
.wrong { color: #c00; }
"""


SCRIPT = r"""
"use strict";
(function () {
const DATA = JSON.parse(document.getElementById("viewer-data").textContent);
const NOTES = JSON.parse(document.getElementById("viewer-notes").textContent);
// Row labels: LABEL_PAD from the left edge, LABEL_GAP clear of the first cell; the gutter
// is as wide as the instance's widest label (state.labelW), longer labels cut with "…".
const LABEL_MIN = 40, LABEL_MAX = 180, LABEL_PAD = 6, LABEL_GAP = 6;
const HEADER_H = 18, REF = [0, 176, 0];
const $ = (id) => document.getElementById(id);
// hoverRow: the row under the mouse; focusRow: the row the panels show otherwise (the first
// wrong answer token of the instance, or a clicked cell's row), so they are never empty.
const state = {inst: -1, view: 0, setting: DATA.settings[DATA.settings.length - 1],
  compare: false, hoverRow: -1, focusRow: -1, key: -1, selected: new Set(),
  onlySelected: false, cell: 14, labelW: LABEL_MIN, panes: [], order: []};
const BASE = DATA.settings[0];
// "[baseline]" says something only beside an intervention.
const tag = (s) => DATA.settings.length > 1 ? `[${s}] ` : "";

function bytesOf(b64) {
  const bin = atob(b64), out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}
// The maps arrive zlib-compressed: the browser's DecompressionStream inflates every block
// once at start (async), after which drawing reads plain arrays.
async function inflate(b64) {
  const stream = new Blob([bytesOf(b64)]).stream()
    .pipeThrough(new DecompressionStream(DATA.encoding));
  return new Uint8Array(await new Response(stream).arrayBuffer());
}
const cache = new Map();
async function load(j, setting) {
  const inst = DATA.instances[j], block = inst.settings[setting];
  const start = [0];
  for (const n of inst.lengths) start.push(start[start.length - 1] + n);
  const [bytes, max] = await Promise.all([inflate(block.maps), inflate(block.row_max)]);
  cache.set(j + "/" + setting, {bytes: bytes, max: new Float32Array(max.buffer), start: start,
    size: start[start.length - 1], rows: inst.lengths.length});
}
function decoded(j, setting) { return cache.get(j + "/" + setting); }
// The byte (0..255, relative to the row max) and the value of one cell.
function cellByte(d, inst, view, row, col) {
  if (col >= inst.lengths[row]) return -1;
  return d.bytes[view * d.size + d.start[row] + col];
}
function rowValues(j, setting, view, row) {
  const inst = DATA.instances[j], d = decoded(j, setting), n = inst.text.length;
  const out = new Float32Array(n), m = d.max[view * d.rows + row];
  for (let c = 0; c < inst.lengths[row]; c++) out[c] = cellByte(d, inst, view, row, c) / 255 * m;
  return out;
}
function viewShare(j, setting, view, row) {
  const inst = DATA.instances[j], ref = inst.mask[row];
  if (!ref.length) return null;
  const v = rowValues(j, setting, view, row);
  let total = 0, on = 0;
  for (let c = 0; c < v.length; c++) total += v[c];
  for (const c of ref) on += v[c];
  return total > 0 ? on / total : null;
}
function mean(xs) { return xs.length ? xs.reduce((a, b) => a + b, 0) / xs.length : null; }
function fmt(x, digits) { return x === null || x === undefined ? "-" : x.toFixed(digits || 4); }
function instScore(inst, setting) {
  return mean(inst.settings[setting].scores.filter((s) => s !== null));
}
function instCorrect(inst, setting) { return inst.settings[setting].correct.every((c) => c); }
function esc(s) { return JSON.stringify(s); }
function h(s) {
  return String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
}

// --- controls ------------------------------------------------------------------------------
function fillSelect(sel, items) {
  sel.innerHTML = "";
  for (const [value, label] of items) {
    const o = document.createElement("option");
    o.value = value; o.textContent = label; sel.appendChild(o);
  }
}
// `prefer`: the instance to show when the current one is filtered out (at start: the opening).
function refreshInstances(prefer) {
  const config = $("f-config").value, outcome = $("f-outcome").value, sort = $("sort").value;
  let order = DATA.instances.map((_, j) => j).filter((j) => {
    const inst = DATA.instances[j], ok = instCorrect(inst, "baseline");
    return (config === "all" || inst.config === config) &&
      (outcome === "all" || (outcome === "correct") === ok);
  });
  const score = (j) => {
    const s = instScore(DATA.instances[j], "baseline");
    return s === null ? -1 : s;
  };
  if (sort === "score-desc") order.sort((a, b) => score(b) - score(a) || a - b);
  if (sort === "score-asc") order.sort((a, b) => score(a) - score(b) || a - b);
  state.order = order;
  fillSelect($("instance"), order.map((j) => {
    const inst = DATA.instances[j];
    const ok = instCorrect(inst, "baseline") ? "correct" : "wrong";
    return [j, `${inst.config} #${inst.index} · ${ok}` +
      ` · score ${fmt(instScore(inst, "baseline"), 3)} · ${inst.target.length} chars`];
  }));
  if (order.length) {
    const keep = order.includes(state.inst) ? state.inst
      : order.includes(prefer) ? prefer : order[0];
    $("instance").value = keep; selectInstance(keep);
  }
  else { state.inst = -1; render(); }
}
function selectInstance(j) {
  j = Number(j);
  if (j !== state.inst) {
    // Show the first wrong answer token (else the first) and its first reference key.
    const inst = DATA.instances[j], wrong = inst.settings[BASE].correct.indexOf(false);
    state.selected.clear(); state.hoverRow = -1; state.focusRow = Math.max(wrong, 0);
    state.key = (inst.mask[state.focusRow] || [-1])[0];
  }
  state.inst = j; render();
}
function shownRow() { return state.hoverRow >= 0 ? state.hoverRow : state.focusRow; }

// --- panes ---------------------------------------------------------------------------------
function makePane(setting) {
  const el = document.createElement("div"); el.className = "pane";
  el.innerHTML = '<div class="pane-title"></div><div class="scroller"><div class="spacer"></div>' +
    '<canvas class="heat"></canvas></div><canvas class="strip"></canvas>';
  const pane = {setting: setting, el: el, title: el.querySelector(".pane-title"),
    scroller: el.querySelector(".scroller"), spacer: el.querySelector(".spacer"),
    canvas: el.querySelector("canvas.heat"), strip: el.querySelector("canvas.strip")};
  pane.scroller.addEventListener("scroll", () => {
    for (const other of state.panes) if (other !== pane) {
      other.scroller.scrollLeft = pane.scroller.scrollLeft;
      other.scroller.scrollTop = pane.scroller.scrollTop;
    }
    draw(pane); drawStrip(pane);
  });
  pane.canvas.addEventListener("mousemove", (e) => {
    const hit = locate(pane, e);
    const row = hit ? hit.row : -1;
    if (row !== state.hoverRow) { state.hoverRow = row; drawAll(); showRow(); }
  });
  pane.canvas.addEventListener("mouseleave", () => {
    if (state.hoverRow >= 0) { state.hoverRow = -1; drawAll(); showRow(); }
  });
  pane.canvas.addEventListener("click", (e) => {
    const hit = locate(pane, e);
    if (!hit || hit.row < 0) return;
    if (hit.col < 0) {
      if (state.selected.has(hit.row)) state.selected.delete(hit.row);
      else state.selected.add(hit.row);
      if (state.onlySelected && !state.selected.size) {
        state.onlySelected = $("only-selected").checked = false;
      }
      layout(); showSummary(); showKey();
    } else { state.key = hit.col; state.focusRow = hit.row; drawAll(); showRow(); showKey(); }
  });
  return pane;
}
function shownRows() {
  const inst = DATA.instances[state.inst];
  const all = inst.lengths.map((_, i) => i);
  return state.onlySelected && state.selected.size ? all.filter((i) => state.selected.has(i)) : all;
}
// Canvas geometry of a cell (relative to the pane's canvas): used by clicks and by the test.
function cellRect(pane, row, col) {
  const rows = shownRows(), k = rows.indexOf(row), cw = state.cell, ch = Math.max(state.cell, 12);
  if (k < 0) return null;
  return {x: state.labelW + col * cw - pane.scroller.scrollLeft,
    y: HEADER_H + k * ch - pane.scroller.scrollTop, w: cw, h: ch};
}
function locate(pane, e) {
  const r = pane.canvas.getBoundingClientRect(), x = e.clientX - r.left, y = e.clientY - r.top;
  const cw = state.cell, ch = Math.max(state.cell, 12), rows = shownRows();
  if (y < HEADER_H) return null;
  const k = Math.floor((y - HEADER_H + pane.scroller.scrollTop) / ch);
  if (k < 0 || k >= rows.length) return null;
  if (x < state.labelW) return {row: rows[k], col: -1};
  const col = Math.floor((x - state.labelW + pane.scroller.scrollLeft) / cw);
  const inst = DATA.instances[state.inst];
  return {row: rows[k], col: col < inst.text.length ? col : -1};
}
function labelFont() {
  return `${Math.min(Math.max(state.cell, 12) - 2, 12)}px ui-monospace, monospace`;
}
function labelText(inst, block, row) {
  const ok = block.correct[row];
  return `${row} ${esc(inst.target[row])}${ok ? "" : "\u2192" + esc(block.predicted[row])}`;
}
// `text`, cut with "…" to at most `room` pixels in g's font.
function fit(g, text, room) {
  if (g.measureText(text).width <= room) return text;
  let n = text.length;
  while (n > 1 && g.measureText(text.slice(0, n) + "\u2026").width > room) n--;
  return text.slice(0, n) + "\u2026";
}
// The label gutter: as wide as the instance's widest label in any pane, within bounds.
function measureLabels() {
  const inst = DATA.instances[state.inst], g = document.createElement("canvas").getContext("2d");
  g.font = labelFont();
  let widest = 0;
  for (const pane of state.panes) {
    const block = inst.settings[pane.setting];
    for (let row = 0; row < inst.lengths.length; row++) {
      widest = Math.max(widest, g.measureText(labelText(inst, block, row)).width);
    }
  }
  const wanted = Math.ceil(widest) + LABEL_PAD + LABEL_GAP;
  state.labelW = Math.min(LABEL_MAX, Math.max(LABEL_MIN, wanted));
}
function layout() {
  const inst = DATA.instances[state.inst], ch = Math.max(state.cell, 12);
  measureLabels();
  for (const pane of state.panes) {
    // The canvas sits at the old scroll offset: move it home first, or it keeps the old
    // scroll area alive and the offset is never clamped to the new size.
    pane.canvas.style.left = "0px"; pane.canvas.style.top = "0px";
    pane.spacer.style.width = (state.labelW + inst.text.length * state.cell) + "px";
    const tall = HEADER_H + shownRows().length * ch;
    pane.spacer.style.height = tall + "px";
    // As tall as the map (plus a scrollbar), at most 60% of the window.
    pane.scroller.style.height = Math.min(tall + 18, Math.round(window.innerHeight * 0.6)) + "px";
  }
  drawAll();
}
function heat(t) {  // white -> dark blue; never green (r and g move together)
  const r = Math.round(255 - 225 * t), b = Math.round(255 - 90 * t);
  return `rgb(${r},${r},${b})`;
}
function draw(pane) {
  const inst = DATA.instances[state.inst], d = decoded(state.inst, pane.setting);
  const block = inst.settings[pane.setting];
  const c = pane.canvas, W = pane.scroller.clientWidth, H = pane.scroller.clientHeight;
  if (c.width !== W || c.height !== H) { c.width = W; c.height = H; }
  const sl = pane.scroller.scrollLeft, st = pane.scroller.scrollTop;
  c.style.left = sl + "px"; c.style.top = st + "px";
  const g = c.getContext("2d"), cw = state.cell, ch = Math.max(state.cell, 12);
  const rows = shownRows(), n = inst.text.length, view = state.view, LW = state.labelW;
  g.fillStyle = "#fff"; g.fillRect(0, 0, W, H);
  // Only the visible window: columns c0..c1-1, rows k0..k1-1 of the shown rows.
  const c0 = Math.max(0, Math.floor(sl / cw));
  const c1 = Math.min(n, Math.ceil((sl + W - LW) / cw) + 1);
  const k0 = Math.max(0, Math.floor(st / ch));
  const k1 = Math.min(rows.length, Math.ceil((st + H - HEADER_H) / ch) + 1);
  const drawn = [], frames = [];
  for (let k = k0; k < k1; k++) {
    const row = rows[k], y = HEADER_H + k * ch - st, refs = new Set(inst.mask[row]);
    for (let col = c0; col < c1; col++) {
      const x = LW + col * cw - sl, b = cellByte(d, inst, view, row, col);
      g.fillStyle = b < 0 ? "#eee" : heat(b / 255);
      g.fillRect(x, y, cw, ch);
      if (refs.has(col)) { drawn.push([row, col]); frames.push([x, y]); }
    }
    if (row === shownRow()) {
      g.strokeStyle = "#f80"; g.lineWidth = 2;
      g.strokeRect(LW + 1, y + 1, Math.min(W - LW, n * cw - sl) - 2, ch - 2);
    }
  }
  if (state.key >= 0) {
    const x = LW + state.key * cw - sl;
    g.strokeStyle = "#c0f"; g.lineWidth = 2; g.strokeRect(x + 1, HEADER_H, cw - 2, H - HEADER_H);
  }
  // The reference last, on top of the hover and key outlines: a 2-pixel green frame.
  g.fillStyle = `rgb(${REF})`;
  for (const [x, y] of frames) {
    g.fillRect(x, y, cw, 2); g.fillRect(x, y + ch - 2, cw, 2);
    g.fillRect(x, y, 2, ch); g.fillRect(x + cw - 2, y, 2, ch);
  }
  // Fixed gutters: the row labels and the key characters.
  g.fillStyle = "#fafafa"; g.fillRect(0, 0, LW, H); g.fillRect(0, 0, W, HEADER_H);
  g.font = labelFont(); g.textBaseline = "middle";
  const labels = [];
  for (let k = k0; k < k1; k++) {
    const row = rows[k], y = HEADER_H + k * ch - st;
    if (y + ch < HEADER_H) continue;
    if (state.selected.has(row)) { g.fillStyle = "#fd0"; g.fillRect(0, y, 4, ch); }
    const text = fit(g, labelText(inst, block, row), LW - LABEL_PAD - LABEL_GAP);
    g.fillStyle = block.correct[row] ? "#222" : "#c00";
    g.fillText(text, LABEL_PAD, y + ch / 2);
    labels.push({row: row, text: text, x: LABEL_PAD, w: g.measureText(text).width, y: y, h: ch});
  }
  if (cw >= 7) {
    g.font = `${Math.min(cw, 12)}px ui-monospace, monospace`; g.textAlign = "center";
    for (let col = c0; col < c1; col++) {
      const x = LW + col * cw - sl + cw / 2;
      if (x - cw / 2 < LW) continue;  // a key partly under the label gutter
      g.fillStyle = col < inst.prompt.length ? "#222" : "#06c";
      g.fillText(inst.text[col] === " " ? "\u2423" : inst.text[col], x, HEADER_H / 2);
    }
    g.textAlign = "start";
  }
  pane.drawn = drawn; pane.labels = labels;
}
function drawStrip(pane) {
  const inst = DATA.instances[state.inst], c = pane.strip;
  const W = pane.scroller.clientWidth, H = 64;
  if (c.width !== W || c.height !== H) { c.width = W; c.height = H; }
  const g = c.getContext("2d"); g.fillStyle = "#fff"; g.fillRect(0, 0, W, H);
  const row = shownRow();
  if (row < 0) return;
  const v = rowValues(state.inst, pane.setting, state.view, row);
  let top = 0; for (const x of v) top = Math.max(top, x);
  const refs = new Set(inst.mask[row]), cw = state.cell, sl = pane.scroller.scrollLeft;
  for (let col = 0; col < v.length; col++) {
    const x = state.labelW + col * cw - sl;
    if (x + cw < state.labelW || x > W) continue;
    const h = top > 0 ? v[col] / top * (H - 4) : 0;
    g.fillStyle = refs.has(col) ? `rgb(${REF})` : "#36c";
    g.fillRect(x, H - h, Math.max(cw - 1, 1), h);
  }
  g.fillStyle = "#222"; g.font = "11px ui-monospace, monospace";
  g.fillText(`row ${row}: max ${top.toPrecision(3)}`, 4, 12);
}
function drawAll() { for (const pane of state.panes) { draw(pane); drawStrip(pane); } }

// --- text panels ---------------------------------------------------------------------------
function showRow() {
  const box = $("row-info"), row = shownRow();
  if (row < 0 || state.inst < 0) {
    box.textContent = "Hover a row of the map to see its attention over the keys.";
    return;
  }
  const inst = DATA.instances[state.inst], lines = [];
  if (state.hoverRow < 0) {
    const first = inst.settings[BASE].correct.indexOf(false);
    const which = row === first ? "the first wrong answer token"
      : first < 0 && row === 0 ? "the first answer token (none is wrong)" : "the clicked row";
    lines.push(`Row ${row}, ${which}; hover a row to see another, click a cell to keep it.`);
  }
  for (const pane of state.panes) {
    const block = inst.settings[pane.setting];
    const v = rowValues(state.inst, pane.setting, state.view, row);
    let total = 0; for (const x of v) total += x;
    const top = Array.from(v.keys()).sort((a, b) => v[b] - v[a]).slice(0, 5)
      .map((c) => `${esc(inst.text[c])}@${c} ${fmt(total > 0 ? v[c] / total : 0, 3)}`);
    lines.push(`${tag(pane.setting)}row ${row}: gold ${h(esc(inst.target[row]))} -> predicted ` +
      `${h(esc(block.predicted[row]))} (${block.correct[row] ? "correct" : "wrong"})` +
      ` · score <span class="score" data-setting="${pane.setting}">` +
      `${fmt(block.scores[row])}</span>` +
      ` · view share ${fmt(viewShare(state.inst, pane.setting, state.view, row))}` +
      ` · reference ${JSON.stringify(inst.mask[row])} · top keys ${h(top.join(", "))}`);
  }
  box.innerHTML = lines.join("\n");
}
function showKey() {
  const box = $("key-info"), c = $("key-bars"), col = state.key;
  c.hidden = col < 0 || state.inst < 0;  // no empty box before a key is chosen
  if (c.hidden) {
    box.textContent = "Click a cell to see which rows attend to its key.";
    return;
  }
  const inst = DATA.instances[state.inst], pane = state.panes[state.panes.length - 1];
  const rows = shownRows(), shares = rows.map((row) => {
    const v = rowValues(state.inst, pane.setting, state.view, row);
    let total = 0; for (const x of v) total += x;
    return total > 0 ? v[col] / total : 0;
  });
  const order = rows.map((r, k) => k).sort((a, b) => shares[b] - shares[a]).slice(0, 8);
  const where = `${tag(pane.setting) && pane.setting + ", "}${DATA.views[state.view].name}`;
  box.textContent = `key ${col} ${esc(inst.text[col])} [${where}]: ` +
    `attended by ${order.map((k) => `row ${rows[k]} ${fmt(shares[k], 3)}`).join(", ")}`;
  const bw = Math.max(3, Math.min(16, Math.floor(800 / Math.max(rows.length, 1))));
  c.width = Math.max(200, rows.length * bw + 8); c.height = 60;
  const g = c.getContext("2d"); g.fillStyle = "#fff"; g.fillRect(0, 0, c.width, c.height);
  const top = Math.max(...shares, 1e-12);
  rows.forEach((row, k) => {
    const h = shares[k] / top * 56;
    g.fillStyle = inst.mask[row].includes(col) ? `rgb(${REF})` : "#36c";
    g.fillRect(4 + k * bw, 58 - h, bw - 1, h);
  });
}
function showSummary() {
  const box = $("summary");
  if (state.inst < 0) { box.textContent = "no instance matches"; return; }
  const inst = DATA.instances[state.inst], lines = [h(`${inst.config} #${inst.index}: ` +
    `${esc(inst.prompt)} -> ${esc(inst.target)}`)];
  for (const s of DATA.settings) {
    const block = inst.settings[s];
    const sel = [...state.selected].sort((a, b) => a - b);
    const chosen = (sel.length ? sel : inst.lengths.map((_, i) => i))
      .map((i) => block.scores[i]).filter((x) => x !== null);
    const right = block.correct.filter((c) => c).length;
    lines.push(`${tag(s)}predicted ${h(esc(block.predicted.join("")))} · ${right}/` +
      `${block.correct.length} correct · mean score ${sel.length ? "(selected rows) " : ""}` +
      `<span class="mean-score" data-setting="${s}">${fmt(mean(chosen))}</span>`);
  }
  box.innerHTML = lines.join("\n");
}
function configSummary() {
  const t = $("config-summary"), configs = [...new Set(DATA.instances.map((x) => x.config))];
  const many = DATA.settings.length > 1, scored = (DATA.meta || {}).scored;
  let rows = `<tr><th>config</th><th>instances</th>${many ? "<th>setting</th>" : ""}` +
    "<th>score, correct tokens</th><th>n</th><th>score, wrong tokens</th><th>n</th></tr>";
  for (const cfg of configs) for (const s of DATA.settings) {
    const good = [], bad = [];
    let held = 0;
    for (const inst of DATA.instances) if (inst.config === cfg) {
      const b = inst.settings[s];
      held++;
      b.scores.forEach((x, i) => { if (x !== null) (b.correct[i] ? good : bad).push(x); });
    }
    const of = scored ? ` of ${scored.instances}` : "";
    rows += `<tr data-config="${cfg}" data-setting="${s}"><td>${cfg}</td>` +
      `<td class="instances">${held}${of}</td>${many ? `<td>${s}</td>` : ""}` +
      `<td class="mean-correct">${fmt(mean(good))}</td><td class="n-correct">${good.length}</td>` +
      `<td class="mean-wrong">${fmt(mean(bad))}</td><td class="n-wrong">${bad.length}</td></tr>`;
  }
  t.innerHTML = "<caption>Teacher-forced rollout score over the instances in this file " +
    "(attention.json's <code>rollout</code> block for the same instances)</caption>" + rows;
}
function render() {
  const host = $("panes"); host.innerHTML = ""; state.panes = [];
  if (state.inst >= 0) {
    const both = state.compare && state.setting !== "baseline";
    const names = both ? ["baseline", state.setting] : [state.setting];
    for (const s of names) { const p = makePane(s); host.appendChild(p.el); state.panes.push(p);
      p.title.textContent = `${tag(s) && s + " · "}${DATA.views[state.view].name}`; }
    layout();
  }
  showSummary(); showRow(); showKey();
}

// --- start ---------------------------------------------------------------------------------
async function start() {
  await Promise.all(DATA.instances.flatMap((_, j) => DATA.settings.map((s) => load(j, s))));
  const configs = [...new Set(DATA.instances.map((x) => x.config))];
  fillSelect($("f-config"), [["all", "all"], ...configs.map((c) => [c, c])]);
  fillSelect($("view"), DATA.views.map((v, i) => [i, v.name]));
  fillSelect($("setting"), DATA.settings.map((s) => [s, s]));
  $("setting").value = state.setting;
  if (DATA.settings.length < 2) {
    $("setting-box").style.display = "none"; $("compare-box").style.display = "none";
  }
  const m = DATA.meta || {};
  $("meta").textContent = [m.model && `model ${m.model}`, m.prompt && `prompt: ${m.prompt}`,
    `${DATA.instances.length} instances, teacher-forced`,
    `${DATA.layers} layers x ${DATA.heads} heads`,
    `${DATA.views.length - 1 - DATA.layers} heads kept`].filter(Boolean).join(" · ");
  $("quantisation").textContent = `Storage: ${DATA.quantisation}; only each row's causal part.`;
  $("opening").textContent = NOTES.opening.why;
  $("coverage").textContent = NOTES.coverage || "";
  $("coverage").hidden = !NOTES.coverage;
  for (const id of ["f-config", "f-outcome", "sort"]) {
    $(id).addEventListener("change", () => refreshInstances());
  }
  $("instance").addEventListener("change", (e) => selectInstance(e.target.value));
  $("view").addEventListener("change", (e) => { state.view = Number(e.target.value); render(); });
  $("setting").addEventListener("change", (e) => { state.setting = e.target.value; render(); });
  $("compare").addEventListener("change", (e) => { state.compare = e.target.checked; render(); });
  $("zoom").addEventListener("input", (e) => {
    state.cell = Number(e.target.value); layout(); showKey();
  });
  $("only-selected").addEventListener("change", (e) => {
    state.onlySelected = e.target.checked; layout(); showKey();
  });
  $("clear-selection").addEventListener("click", () => {
    state.selected.clear(); layout(); showSummary(); showKey();
  });
  window.addEventListener("resize", drawAll);
  configSummary();
  refreshInstances(NOTES.opening.index);
  window.attentionViewer = {state: state, data: DATA, notes: NOTES, cellRect: cellRect,
    rowValues: rowValues, drawn: (k) => state.panes[k].drawn,
    labels: (k) => state.panes[k].labels, ready: true};
}
start().catch((e) => { $("summary").textContent = `could not read the data: ${e}`; throw e; });
})();
"""
