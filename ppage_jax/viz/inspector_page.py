"""The inspector's page: its HTML, style and script, and :func:`inspector_page`, which fills it.

The page holds everything inline and fetches nothing; the episode arrives as one JSON object
(built by :func:`ppage_jax.viz.inspector.episode_html`) in a ``<script type="application/json">``
element that the script reads on load.
"""

from __future__ import annotations

import html
import json
from typing import Any


def inspector_page(title: str, data: dict[str, Any]) -> str:
    """The self-contained page titled ``title`` (HTML-escaped here) that replays ``data``,
    the episode as a JSON-serialisable dict (no NaN or infinities)."""
    # Inline JSON: escape the characters that could close the script element.
    payload = (
        json.dumps(data, separators=(",", ":"), allow_nan=False)
        .replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
    )
    return (
        _PAGE.replace("__TITLE__", html.escape(title))
        .replace("__STYLE__", _STYLE)
        .replace("__SCRIPT__", _SCRIPT)
        .replace("__DATA__", payload)
    )


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>__TITLE__</title>
<style>__STYLE__</style>
</head>
<body>
<header><h1 id="title"></h1><p id="summary"></p></header>
<main>
<section id="replay">
  <canvas id="board" aria-label="grid"></canvas>
  <p id="cell-info">&nbsp;</p>
  <div id="controls">
    <button id="play" type="button">Play</button>
    <select id="speed" aria-label="speed"></select>
    <span id="status"></span>
  </div>
  <input id="step" type="range" min="0" max="0" value="0" step="1" aria-label="step">
  <canvas id="timeline" aria-label="timeline"></canvas>
  <ul id="legend"></ul>
</section>
<section id="agents"></section>
</main>
<script type="application/json" id="episode-data">__DATA__</script>
<script>__SCRIPT__</script>
</body>
</html>
"""

_STYLE = """
body { font: 14px/1.4 system-ui, -apple-system, "Segoe UI", sans-serif; margin: 16px;
       color: #222; background: #fafafa; }
header h1 { font-size: 18px; margin: 0 0 2px; }
header p { margin: 0 0 12px; color: #555; }
main { display: flex; flex-wrap: wrap; gap: 20px; align-items: flex-start; }
#replay { flex: 0 0 auto; }
#board { display: block; border: 1px solid #ccc; background: #fff; }
#cell-info { margin: 4px 0; color: #555; min-height: 1.4em; }
#controls { display: flex; align-items: center; gap: 8px; margin-bottom: 4px;
            min-height: 2.8em; }
#status { font-variant-numeric: tabular-nums; }
#step { display: block; margin: 0; padding: 0; }
#timeline { display: block; margin: 0 0 8px; cursor: pointer; }
#legend { list-style: none; padding: 0; margin: 0; display: flex; flex-wrap: wrap;
          gap: 4px 14px; color: #444; }
#legend span, .dot { display: inline-block; width: 12px; height: 12px; border-radius: 50%;
                     vertical-align: -2px; margin-right: 4px; }
#legend .square { border-radius: 0; }
#agents { flex: 1 1 360px; display: grid; gap: 12px;
          grid-template-columns: repeat(auto-fill, minmax(370px, 1fr)); }
.agent { background: #fff; border: 1px solid #ddd; border-radius: 6px; padding: 8px 10px; }
.agent h2 { font-size: 15px; margin: 0 0 4px; }
.agent .badge { font-size: 12px; font-weight: normal; color: #1e5a2d; background: #dcefdf;
                border-radius: 3px; padding: 0 4px; margin-left: 6px; }
.agent table { border-collapse: collapse; width: 100%; font-size: 13px;
               font-variant-numeric: tabular-nums; }
.agent th, .agent td { padding: 1px 4px; text-align: right; }
.agent th:first-child, .agent td:first-child { text-align: left; }
.agent th, .agent td:first-child { white-space: nowrap; }
.agent th { font-weight: 600; color: #555; border-bottom: 1px solid #ddd; }
.agent tr.total td { border-top: 1px solid #ddd; font-weight: 600; }
.swatch { display: inline-block; width: 10px; height: 3px; vertical-align: 3px;
          margin-right: 5px; }
td.pos { color: #17803d; } td.neg { color: #c0392b; }
.chart { display: block; margin-top: 6px; }
"""

_SCRIPT = r"""
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("episode-data").textContent);
  const C = D.colours;
  const T = D.rewards.length, A = D.agents.length, K = D.terms.length;
  const TERM_COLOURS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2",
                        "#17becf", "#bcbd22", "#7f7f7f", "#d62728"];
  const termColour = (k) => TERM_COLOURS[k % TERM_COLOURS.length];
  const num = (v) => (v === null ? NaN : v);
  const el = (id) => document.getElementById(id);
  const make = (tag, props, parent) => {
    const node = Object.assign(document.createElement(tag), props || {});
    if (parent) parent.appendChild(node);
    return node;
  };
  const short = (v) => String(Number(v.toPrecision(3)));
  const fmt = (v) => {
    if (!Number.isFinite(v)) return String(v);
    const a = Math.abs(v);
    return a !== 0 && (a >= 1e5 || a < 1e-3) ? v.toExponential(2) : v.toFixed(3);
  };

  // Cumulative per-term returns cum[t][a][k] (t = 0..T) and their totals.
  const cum = [D.agents.map(() => new Array(K).fill(0))];
  for (let t = 0; t < T; t++) {
    cum.push(cum[t].map((row, a) => row.map((c, k) => c + num(D.rewards[t][a][k]))));
  }
  const sum = (row) => row.reduce((s, v) => s + v, 0);
  // Captures: the turns at which prey became captured, and when each prey was.
  const captures = [], capturedAt = new Array(A).fill(null);
  for (let t = 1; t <= T; t++) {
    const who = [];
    for (let a = 0; a < A; a++) {
      if (D.captured[t][a] && !D.captured[t - 1][a]) { who.push(a); capturedAt[a] = t; }
    }
    if (who.length) captures.push({ turn: t, agents: who });
  }
  const roleIndex = D.agents.map((_, a) =>
    D.isPredator.slice(0, a + 1).filter((p) => p === D.isPredator[a]).length);

  function setupCanvas(canvas, w, h) {
    const r = window.devicePixelRatio || 1;
    canvas.width = Math.round(w * r);
    canvas.height = Math.round(h * r);
    canvas.style.width = w + "px";
    canvas.style.height = h + "px";
    const ctx = canvas.getContext("2d");
    ctx.setTransform(r, 0, 0, r, 0, 0);
    return ctx;
  }

  // ------------------------------------------------------------------ header and legend
  el("title").textContent = D.title;
  const nPred = D.isPredator.filter((p) => p).length;
  const ending = { terminated: "terminated", truncated: "truncated (max_steps)",
                   cut: "cut at the recording's step cap" }[D.end];
  el("summary").textContent = nPred + " predator(s) vs " + (A - nPred) + " prey on a " +
    D.size + "\u00d7" + D.size + " grid; " + T + " turns, " + ending + "; " +
    captures.reduce((s, c) => s + c.agents.length, 0) + " capture(s). Rewards are " +
    "weighted per-term rewards (info[\"reward_terms\"]).";
  const legend = el("legend");
  [["predator", "predator"], ["prey", "prey"], ["captured_prey", "captured prey"],
   ["obstacle", "obstacle"]].forEach(([key, text]) => {
    const item = make("li", {}, legend);
    make("span", { className: key === "obstacle" ? "square" : "" }, item)
      .style.background = C[key];
    item.appendChild(document.createTextNode(text));
  });
  make("li", { textContent: "labels: index within the role" }, legend);

  // ------------------------------------------------------------------ board
  const board = el("board");
  const cell = Math.max(8, Math.min(48, Math.floor(560 / D.size)));
  const side = D.size * cell + 1;
  const bctx = setupCanvas(board, side, side);
  el("replay").style.width = side + 2 + "px";
  board.dataset.cellPx = String(cell);
  const rank = (a, cap) => (D.isPredator[a] ? 2 : cap[a] ? 0 : 1);

  function agentsByCell(t) {
    const cells = new Map(), cap = D.captured[t];
    const order = D.agents.map((_, a) => a).sort((a, b) => rank(a, cap) - rank(b, cap) || a - b);
    order.forEach((a) => {
      const key = D.positions[t][a].join(",");
      if (!cells.has(key)) cells.set(key, []);
      cells.get(key).push(a);
    });
    return cells;
  }

  function drawAgent(ctx, a, captured, x, y, r) {
    const kind = D.isPredator[a] ? "predator" : captured ? "captured_prey" : "prey";
    ctx.fillStyle = C[kind];
    ctx.beginPath();
    ctx.arc(x, y, r, 0, 2 * Math.PI);
    ctx.fill();
    if (captured) {
      const d = r * 0.75;
      ctx.strokeStyle = C.captured_mark;
      ctx.lineWidth = Math.max(1, r / 6);
      ctx.beginPath();
      ctx.moveTo(x - d, y - d); ctx.lineTo(x + d, y + d);
      ctx.moveTo(x - d, y + d); ctx.lineTo(x + d, y - d);
      ctx.stroke();
    }
    ctx.fillStyle = captured ? C.captured_label : C.label;
    ctx.font = "bold " + Math.max(7, Math.round(r * 1.05)) + "px sans-serif";
    ctx.textAlign = "center";
    ctx.textBaseline = "middle";
    ctx.fillText(String(roleIndex[a]), x, y + 0.5);
  }

  function drawBoard(t) {
    const ctx = bctx;
    ctx.fillStyle = C.background;
    ctx.fillRect(0, 0, side, side);
    ctx.fillStyle = C.obstacle;
    D.obstacles.forEach(([x, y]) => ctx.fillRect(x * cell + 1, y * cell + 1, cell - 1, cell - 1));
    ctx.strokeStyle = C.grid;
    ctx.lineWidth = 1;
    ctx.beginPath();
    for (let i = 0; i <= D.size; i++) {
      const p = i * cell + 0.5;
      ctx.moveTo(p, 0); ctx.lineTo(p, side);
      ctx.moveTo(0, p); ctx.lineTo(side, p);
    }
    ctx.stroke();
    agentsByCell(t).forEach((agents, key) => {
      const [x, y] = key.split(",").map(Number);
      const m = Math.ceil(Math.sqrt(agents.length)), sub = (cell - 1) / m;
      const rows = Math.ceil(agents.length / m), top = (m - rows) * sub / 2;
      agents.forEach((a, i) => {
        const cx = x * cell + 1 + sub * ((i % m) + 0.5);
        const cy = y * cell + 1 + top + sub * (Math.floor(i / m) + 0.5);
        drawAgent(ctx, a, D.captured[t][a], cx, cy, 0.4 * sub);
      });
    });
  }

  board.addEventListener("mousemove", (ev) => {
    const rect = board.getBoundingClientRect();
    const x = Math.floor((ev.clientX - rect.left) / cell);
    const y = Math.floor((ev.clientY - rect.top) / cell);
    if (x < 0 || y < 0 || x >= D.size || y >= D.size) return;
    const here = agentsByCell(step()).get(x + "," + y) || [];
    const names = here.map((a) => D.agents[a] + (D.captured[step()][a] ? " (captured)" : ""));
    const wall = D.obstacles.some(([ox, oy]) => ox === x && oy === y);
    el("cell-info").textContent = "cell (" + x + ", " + y + "): " +
      (names.length ? names.join(", ") : wall ? "obstacle" : "empty");
  });
  board.addEventListener("mouseleave", () => { el("cell-info").innerHTML = "&nbsp;"; });

  // ------------------------------------------------------------------ controls, timeline
  const slider = el("step"), playButton = el("play"), speed = el("speed");
  slider.max = String(T);
  slider.style.width = side + "px";
  [1, 2, 4, 8, 16].concat([D.fps]).filter((v, i, all) => all.indexOf(v) === i)
    .sort((a, b) => a - b).forEach((v) => {
      make("option", { value: String(v), textContent: v + " steps/s", selected: v === D.fps },
           speed);
    });
  const step = () => Number(slider.value);
  const timeline = el("timeline");
  const tlWidth = side, tlHeight = 26;
  const tctx = setupCanvas(timeline, tlWidth, tlHeight);
  const tlX = (t) => 8 + (tlWidth - 16) * (T ? t / T : 0);

  function drawTimeline(t) {
    const ctx = tctx;
    ctx.clearRect(0, 0, tlWidth, tlHeight);
    ctx.fillStyle = "#ddd";
    ctx.fillRect(8, 11, tlWidth - 16, 3);
    ctx.fillStyle = "#2b6cb0";
    ctx.fillRect(8, 11, tlX(t) - 8, 3);
    captures.forEach((c) => {
      const x = tlX(c.turn);
      ctx.fillStyle = C.captured_mark;
      ctx.beginPath();
      ctx.moveTo(x, 9); ctx.lineTo(x - 5, 1); ctx.lineTo(x + 5, 1);
      ctx.fill();
      ctx.fillRect(x - 1, 9, 2, 8);
    });
    ctx.fillStyle = "#222";
    ctx.fillRect(tlX(t) - 1, 5, 2, 16);
    ctx.font = "10px sans-serif";
    ctx.textBaseline = "alphabetic";
    ctx.textAlign = "left";
    ctx.fillText("0", 8, tlHeight - 1);
    ctx.textAlign = "right";
    ctx.fillText(String(T), tlWidth - 8, tlHeight - 1);
  }
  timeline.title = captures.length
    ? "captures: " + captures.map((c) => "turn " + c.turn + " (" +
      c.agents.map((a) => D.agents[a]).join(", ") + ")").join("; ")
    : "no captures";
  timeline.addEventListener("click", (ev) => {
    const rect = timeline.getBoundingClientRect();
    const f = (ev.clientX - rect.left - 8) / (tlWidth - 16);
    setStep(Math.round(Math.min(1, Math.max(0, f)) * T));
  });

  // ------------------------------------------------------------------ agent panels
  const agentsBox = el("agents"), panels = [];
  const chartW = 340, chartH = 96;
  D.agents.forEach((name, a) => {
    const box = make("div", { className: "agent" }, agentsBox);
    box.dataset.agent = name;
    const h = make("h2", {}, box);
    const kind = D.isPredator[a] ? "predator" : "prey";
    make("span", { className: "dot" }, h).style.background = C[kind];
    h.appendChild(document.createTextNode(name));
    const badge = make("span", { className: "badge" }, h);
    badge.hidden = true;
    const table = make("table", {}, box);
    const head = make("tr", {}, make("thead", {}, table));
    ["term"].concat(D.weights ? ["weight"] : [], ["this turn", "return"])
      .forEach((text) => make("th", { textContent: text }, head));
    const body = make("tbody", {}, table);
    const cells = [];
    D.terms.concat(["total"]).forEach((term, k) => {
      const row = make("tr", { className: k === K ? "total" : "" }, body);
      row.dataset.term = term;
      const first = make("td", {}, row);
      if (k < K) make("span", { className: "swatch" }, first).style.background = termColour(k);
      first.appendChild(document.createTextNode(term));
      if (D.weights) make("td", { textContent: k < K ? fmt(num(D.weights[k])) : "" }, row);
      const pair = ["step", "return"].map((kind) => {
        const td = make("td", { className: "value" }, row);
        Object.assign(td.dataset, { agent: name, term: term, kind: kind });
        return td;
      });
      cells.push(pair);
    });
    const chart = make("canvas", { className: "chart" }, box);
    chart.title = "cumulative return per term (total dashed); capture turns marked";
    const ctx = setupCanvas(chart, chartW, chartH);
    const series = D.terms.map((_, k) => cum.map((row) => row[a][k]))
      .concat([cum.map((row) => sum(row[a]))]);
    const finite = series.flat().filter(Number.isFinite).concat([0]);
    let lo = Math.min(...finite), hi = Math.max(...finite);
    if (hi - lo < 1e-9) { lo -= 1; hi += 1; }
    panels.push({ a, badge, cells, ctx, series, lo, hi });
  });

  function setValue(td, v) {
    td.dataset.value = v === null ? "" : String(v);
    td.textContent = v === null ? "\u2014" : fmt(v);
    td.className = "value" + (v > 0 ? " pos" : v < 0 ? " neg" : "");
  }

  function drawChart(p, t) {
    const ctx = p.ctx, L = 40, R = 6, top = 6, bottom = 14;
    const x = (i) => L + (chartW - L - R) * (T ? i / T : 0);
    const y = (v) => top + (chartH - top - bottom) * (p.hi - v) / (p.hi - p.lo);
    ctx.clearRect(0, 0, chartW, chartH);
    ctx.font = "10px sans-serif";
    ctx.fillStyle = "#666";
    ctx.textAlign = "right";
    ctx.textBaseline = "middle";
    ctx.fillText(short(p.hi), L - 3, y(p.hi));
    ctx.fillText(short(p.lo), L - 3, y(p.lo));
    ctx.strokeStyle = "#bbb";
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(L, y(0)); ctx.lineTo(chartW - R, y(0));
    ctx.stroke();
    ctx.strokeStyle = C.captured_mark;
    ctx.setLineDash([2, 3]);
    captures.forEach((c) => {
      ctx.beginPath();
      ctx.moveTo(x(c.turn), top); ctx.lineTo(x(c.turn), chartH - bottom);
      ctx.stroke();
    });
    p.series.forEach((s, k) => {
      ctx.strokeStyle = k < K ? termColour(k) : "#222";
      ctx.setLineDash(k < K ? [] : [5, 3]);
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      s.forEach((v, i) => (i ? ctx.lineTo(x(i), y(v)) : ctx.moveTo(x(i), y(v))));
      ctx.stroke();
    });
    ctx.setLineDash([]);
    ctx.strokeStyle = "#222";
    ctx.lineWidth = 1;
    ctx.beginPath();
    ctx.moveTo(x(t) + 0.5, top); ctx.lineTo(x(t) + 0.5, chartH - bottom);
    ctx.stroke();
    p.series.forEach((s, k) => {
      if (!Number.isFinite(s[t])) return;
      ctx.fillStyle = k < K ? termColour(k) : "#222";
      ctx.beginPath();
      ctx.arc(x(t), y(s[t]), 2.5, 0, 2 * Math.PI);
      ctx.fill();
    });
    ctx.fillStyle = "#666";
    ctx.textBaseline = "alphabetic";
    ctx.textAlign = "left";
    ctx.fillText("turn 0", L, chartH - 2);
    ctx.textAlign = "right";
    ctx.fillText(String(T), chartW - R, chartH - 2);
  }

  function updatePanels(t) {
    panels.forEach((p) => {
      const a = p.a;
      p.cells.forEach(([stepCell, returnCell], k) => {
        if (k < K) {
          setValue(stepCell, t ? D.rewards[t - 1][a][k] : null);
          setValue(returnCell, cum[t][a][k]);
        } else {
          setValue(stepCell, t ? sum(D.rewards[t - 1][a].map(num)) : null);
          setValue(returnCell, sum(cum[t][a]));
        }
      });
      const at = capturedAt[a];
      p.badge.hidden = !(at !== null && at <= t);
      p.badge.textContent = "captured at turn " + at;
      drawChart(p, t);
    });
  }

  // ------------------------------------------------------------------ stepping
  function setStep(t) {
    t = Math.max(0, Math.min(T, Math.round(t)));
    slider.value = String(t);
    drawBoard(t);
    drawTimeline(t);
    updatePanels(t);
    const sofar = captures.filter((c) => c.turn <= t).reduce((s, c) => s + c.agents.length, 0);
    const now = captures.find((c) => c.turn === t);
    el("status").textContent = "step " + t + " / " + T + " \u00b7 captures so far: " + sofar +
      (now ? " \u00b7 captured now: " + now.agents.map((a) => D.agents[a]).join(", ") : "") +
      (t === T ? " \u00b7 end: " + D.end : "");
  }

  let timer = null;
  function pause() {
    if (timer !== null) clearInterval(timer);
    timer = null;
    playButton.textContent = "Play";
  }
  function play() {
    if (step() >= T) setStep(0);
    timer = setInterval(() => {
      if (step() >= T) { pause(); return; }
      setStep(step() + 1);
    }, 1000 / Number(speed.value));
    playButton.textContent = "Pause";
  }
  playButton.addEventListener("click", () => (timer === null ? play() : pause()));
  speed.addEventListener("change", () => { if (timer !== null) { pause(); play(); } });
  slider.addEventListener("input", () => setStep(step()));
  document.addEventListener("keydown", (ev) => {
    if (ev.target === slider || ev.target === speed) return;
    if (ev.key === " ") { ev.preventDefault(); playButton.click(); }
    else if (ev.key === "ArrowRight") setStep(step() + 1);
    else if (ev.key === "ArrowLeft") setStep(step() - 1);
  });
  setStep(0);
})();
"""
