// Token timeline: uPlot chart of context per main-chain API call, markers, threshold lines; click opens a call's
// detail. A toggle swaps the context lines for a stacked area of what filled the context at every call (the worker's
// stored split, the same numbers as the call panel). uPlot's own legend is off: our legend, tooltip and labels.
(function () {
  "use strict";

  // Colours come from the palette's custom properties (static/app.css); the second value is a fallback only.
  function cssVar(name, fallback) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name);
    return v && v.trim() ? v.trim() : fallback;
  }
  // Subagents: hues apart from every agent's own colour, so a subagent never reads as the main chain.
  var SERIES_COLORS = [["--series-1", "#2563eb"], ["--series-2", "#15803d"], ["--series-3", "#7c3aed"], ["--series-4", "#0e7490"],
    ["--series-5", "#b91c1c"], ["--series-6", "#a16207"], ["--series-7", "#be185d"], ["--series-8", "#475569"]];
  // Each agent's own colour and its replay's: --agent-<name> and --replay-<name>, generated from the agents'
  // profiles (agents.css); a name without them falls back to the accent.
  function agentVar(name) { return ["--agent-" + name, cssVar("--accent", "#2a5db0")]; }
  function replayColor(name) { return cssVar("--replay-" + name, "#475569"); }
  // Each marker kind: its colour, its dash (so kinds differ without colour) and its label glyph.
  var MARKERS = {
    compaction: { color: ["--mark-compaction", "#d97706"], dash: [], width: 2, glyph: "▼", label: true },
    microcompact: { color: ["--mark-microcompact", "#65a30d"], dash: [6, 3], width: 1.5, glyph: "◆", label: true },
    prune: { color: ["--mark-microcompact", "#65a30d"], dash: [6, 3], width: 1.5, glyph: "◆", label: true },
    overflow: { color: ["--mark-overflow", "#dc2626"], dash: [], width: 3, glyph: "✕", label: true },
    api_error: { color: ["--mark-overflow", "#dc2626"], dash: [1, 2], width: 3, glyph: "!", label: false },
    subagent_spawn: { color: ["--mark-spawn", "#7c3aed"], dash: [2, 3], width: 1.5, glyph: "↳", label: false },
    idle_gap: { color: ["--mark-idle", "#94a3b8"], dash: [8, 4], width: 1, glyph: "‖", label: false },
    cache_miss: { color: ["--mark-cache-miss", "#64748b"], dash: [1, 3], width: 1, glyph: "○", label: false },
  };
  var PART_VARS = { system: ["--part-system", "#64748b"], unlogged: ["--part-unlogged", "#cbd5e1"], user: ["--part-user", "#2563eb"],
    assistant: ["--part-assistant", "#16a34a"], thinking: ["--part-thinking", "#9333ea"], "tool-calls": ["--part-tool-calls", "#0891b2"],
    "tool-results": ["--part-tool-results", "#ea580c"], summary: ["--part-summary", "#ca8a04"] };
  var LINES = [["window", "--line-window", "#111827", []], ["blocking", "--mark-overflow", "#dc2626", [2, 2]],
    ["autocompact", "--mark-compaction", "#d97706", [6, 4]], ["warning", "--line-warning", "#ca8a04", [2, 4]]];
  var HEIGHT = 380, LANE_HEIGHT = 160;
  // Calls are whole: ticks only at integers, however short the session.
  var INTEGER_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000];

  function color(pair) { return cssVar(pair[0], pair[1]); }
  function fmt(v) { return v == null ? "–" : Math.round(v).toLocaleString("en-US"); }
  function usd(v) { return v == null ? "–" : "$" + (v < 0.01 ? v.toFixed(4) : v.toFixed(2)); }
  function withAlpha(hex, alpha) {
    var m = /^#([0-9a-f]{6})$/i.exec(hex);
    if (!m) return hex;
    var n = parseInt(m[1], 16);
    return "rgba(" + (n >> 16) + "," + ((n >> 8) & 255) + "," + (n & 255) + "," + alpha + ")";
  }

  // The legend's marker checkboxes (#marker-legend input[data-kind]) hide or show each kind.
  function hiddenMarkerKinds() {
    var hidden = {};
    document.querySelectorAll("#marker-legend input[data-kind]").forEach(function (box) { if (!box.checked) hidden[box.dataset.kind] = true; });
    return hidden;
  }

  function readJSON(id) {
    var el = document.getElementById(id);
    return el ? JSON.parse(el.textContent) : null;
  }

  // x is the main-chain API call number (selectors.timeline.call_axis): a subagent's calls run on from its spawn call.
  function buildData(tl, agents) {
    var tables = [], meta = [];
    agents.forEach(function (agent) {
      var pts = tl.series[agent];
      tables.push([pts.map(function (p) { return p.x; }), pts.map(function (p) { return p.context; })]);
      meta.push({ agent: agent, estimate: false, points: pts });
    });
    if (agents.indexOf("main") >= 0 || !agents.length) {
      Object.keys(tl.replays || {}).forEach(function (name) {
        var r = tl.replays[name];
        if (!r.points || !r.points.length) return;
        tables.push([r.points.map(function (p) { return p.x; }), r.points.map(function (p) { return p.context; })]);
        meta.push({ agent: name, replay: true, points: r.points, events: r.events || [] });
      });
    }
    Object.keys(tl.estimates || {}).forEach(function (agent) {
      var pts = tl.estimates[agent];
      if (!pts.length || (agents.length && agents.indexOf(agent) < 0) || (!agents.length && agent !== "main")) return;
      tables.push([pts.map(function (p) { return p.x; }), pts.map(function (p) { return p.estimate; })]);
      meta.push({ agent: agent, estimate: true, points: pts });
    });
    var cost = (tl.cost && tl.cost.points) || [];
    if (cost.length && (agents.indexOf("main") >= 0 || !agents.length)) {
      tables.push([cost.map(function (p) { return p.x; }), cost.map(function (p) { return p.cumulative_usd; })]);
      meta.push({ agent: "cost", cost: true, points: cost });
    }
    return { data: tables.length ? uPlot.join(tables) : [[], []], meta: meta };
  }

  // The stacked composition: one cumulative series per part, bottom first, painted top first so each covers the rest.
  function buildStack(comp) {
    var xs = comp.calls.slice(), running = xs.map(function () { return 0; }), cumulative = [];
    comp.parts.forEach(function (p) {
      running = running.map(function (v, i) { return v + p.tokens[i]; });
      cumulative.push(running.slice());
    });
    var order = comp.parts.map(function (_, i) { return i; }).reverse();
    return { data: [xs].concat(order.map(function (i) { return cumulative[i]; })), order: order };
  }

  function agentColors(tl) {
    var agents = Object.keys(tl.series).concat(Object.keys(tl.estimates || {}));
    var colors = {}, next = 1;
    agents.sort(function (a, b) { return a === "main" ? -1 : b === "main" ? 1 : a < b ? -1 : 1; }).forEach(function (agent) {
      if (agent in colors) return;
      colors[agent] = agent === "main" ? color(agentVar(tl.format)) : color(SERIES_COLORS[(next++ - 1) % SERIES_COLORS.length]);
    });
    return colors;
  }

  // Two labels collide when they overlap (with a small gap); a label crosses a threshold line when the line runs through it.
  function collides(placed, b, gap) {
    return placed.some(function (o) { return b.x < o.x + o.w + gap && o.x < b.x + b.w + gap && b.y < o.y + o.h && o.y < b.y + b.h; });
  }
  function crosses(lineYs, b) {
    return lineYs.some(function (ly) { return b.y < ly && ly < b.y + b.h; });
  }

  // The first candidate spot that overlaps no label and crosses no threshold line; failing that, the first that overlaps
  // no label (lines too close together to keep a label off them); failing that, none.
  function placeLabel(placed, candidates, lineYs, gap) {
    var box = null;
    [true, false].some(function (strict) {
      box = candidates.find(function (b) { return !collides(placed, b, gap) && !(strict && crosses(lineYs, b)); }) || null;
      return box !== null;
    });
    if (box) placed.push(box);
    return box;
  }

  function drawOverlays(u, tl, el) {
    var ctx = u.ctx, dpr = devicePixelRatio, left = u.bbox.left, width = u.bbox.width, top = u.bbox.top, height = u.bbox.height;
    var placed = [], boxes = [], lineBoxes = [];
    ctx.save();
    ctx.font = 11 * dpr + "px system-ui, sans-serif";
    ctx.textAlign = "left"; // uPlot leaves the axes' alignment on the context
    ctx.textBaseline = "top";
    var lineHeight = 14 * dpr;
    function text(str, box, fill) {
      ctx.fillStyle = cssVar("--bg", "#ffffff");
      ctx.globalAlpha = 0.85; ctx.fillRect(box.x - 1, box.y, box.w + 2, box.h); ctx.globalAlpha = 1;
      ctx.fillStyle = fill; ctx.fillText(str, box.x, box.y + dpr);
      boxes.push({ text: str, left: box.x / dpr, top: box.y / dpr, width: box.w / dpr, height: box.h / dpr });
    }
    // Lines with the same value share one stroke and one label ("window = blocking 200,000 tokens").
    var drawn = {};
    if (tl.thresholds) LINES.forEach(function (line) {
      var v = tl.thresholds[line[0]];
      if (!v) return;
      if (drawn[v]) { drawn[v].names.push(line[0]); return; }
      drawn[v] = { names: [line[0]], color: cssVar(line[1], line[2]), dash: line[3] };
    });
    // Top line first, so each label finds the room left above its line before a lower line's label claims it.
    var lines = Object.keys(drawn).map(function (value) {
      var d = drawn[value];
      return { names: d.names, color: d.color, dash: d.dash, value: Number(value), y: u.valToPos(Number(value), "y", true) };
    }).filter(function (l) { return l.y >= top && l.y <= top + height; }).sort(function (a, b) { return a.y - b.y; });
    var lineYs = lines.map(function (l) { return l.y; });
    var pad = 6 * dpr, gap = 4 * dpr;
    // Every line first, every label after, so no line is stroked through a label.
    lines.forEach(function (line) {
      ctx.strokeStyle = line.color; ctx.setLineDash(line.dash.map(function (n) { return n * dpr; })); ctx.lineWidth = dpr;
      ctx.beginPath(); ctx.moveTo(left, line.y); ctx.lineTo(left + width, line.y); ctx.stroke();
    });
    ctx.setLineDash([]);
    Object.keys(tl.replays || {}).forEach(function (name) {
      (tl.replays[name].events || []).forEach(function (ev) {
        if (ev.x == null || el.dataset.mode === "composition") return;
        var x = u.valToPos(ev.x, "x", true), y = u.valToPos(ev.tokens_before, "y", true);
        ctx.fillStyle = replayColor(name);
        ctx.beginPath(); ctx.arc(x, y, 4 * dpr, 0, 2 * Math.PI); ctx.fill();
      });
    });
    var hidden = hiddenMarkerKinds(), lane = el.dataset.lane, markerLabels = [];
    tl.events.forEach(function (m) {
      if (hidden[m.kind] || (lane && m.agent !== lane) || (!lane && el.dataset.lanes === "1" && m.agent !== "main")) return;
      var style = MARKERS[m.kind] || { color: ["--muted", "#334155"], dash: [], width: 1, glyph: "", label: false };
      var x = u.valToPos(m.x, "x", true);
      if (x < left || x > left + width) return;
      var c = color(style.color);
      ctx.strokeStyle = c; ctx.lineWidth = style.width * dpr;
      ctx.setLineDash(style.dash.map(function (n) { return n * dpr; }));
      ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
      ctx.setLineDash([]);
      if (style.label && !lane) markerLabels.push({ x: x, color: c, text: style.glyph + " " + m.kind.replace("_", " ") + (m.pre_tokens ? " " + fmt(m.pre_tokens) : "") });
    });
    lines.forEach(function (line) {
      var str = line.names.join(" = ") + " " + fmt(line.value) + " tokens", w = ctx.measureText(str).width;
      // Next to its own line: above it at the right end; else below it; else at the left end, above then below; else
      // anywhere along it. Never across another line while a spot off every line exists.
      var above = line.y - lineHeight - dpr, below = line.y + dpr, right = left + width - w - pad, xs = [right, left + pad];
      for (var x = right - w - gap; x > left + pad; x -= w / 2) xs.push(x);
      var candidates = [];
      xs.forEach(function (x) {
        [above, below].forEach(function (y) {
          if (y >= 0 && y + lineHeight <= top + height) candidates.push({ x: Math.max(left, x), y: y, w: w, h: lineHeight });
        });
      });
      var box = placeLabel(placed, candidates, lineYs.filter(function (ly) { return ly !== line.y; }), gap);
      if (box) text(str, box, line.color);
      lineBoxes.push({ names: line.names, value: line.value, y: line.y / dpr, label: box ? boxes[boxes.length - 1] : null });
    });
    markerLabels.forEach(function (m) {
      var w = ctx.measureText(m.text).width, rightOf = m.x + 3 * dpr, leftOf = m.x - 3 * dpr - w;
      // Right of its line, or left of it near the right edge; the other side, then rows below, when a neighbour is in
      // the way, down to the foot of the plot.
      var sides = rightOf + w > left + width ? [leftOf] : leftOf >= left ? [rightOf, leftOf] : [rightOf];
      var rows = [];
      for (var y = top + 2 * dpr; y + lineHeight <= top + height; y += lineHeight + 2 * dpr) {
        sides.forEach(function (x) { rows.push({ x: x, y: y, w: w, h: lineHeight }); });
      }
      var box = placeLabel(placed, rows, lineYs, gap);
      if (box) text(m.text, box, m.color);
    });
    ctx.restore();
    el.labelBoxes = boxes; // read by the browser tests: no two labels overlap
    el.thresholdLines = lineBoxes; // and each threshold line has its label next to it
  }

  function nearestCall(u, meta, idx) {
    // Prefer a recorded series with a point at this x; the main chain first.
    for (var s = 1; s < u.series.length; s++) {
      var m = meta[s - 1];
      if (m && !m.estimate && !m.replay && !m.cost && u.data[s][idx] != null) {
        var x = u.data[0][idx];
        for (var i = 0; i < m.points.length; i++) if (m.points[i].x === x) return { agent: m.agent, call: m.points[i].call };
      }
    }
    return null;
  }

  function wheelZoom(u) {
    u.over.addEventListener("wheel", function (e) {
      e.preventDefault();
      var min = u.scales.x.min, max = u.scales.x.max, range = max - min;
      var at = u.posToVal(e.offsetX, "x");
      var factor = e.deltaY < 0 ? 0.75 : 1.33;
      var nmin = at - (at - min) * factor, nmax = nmin + range * factor;
      var lo = u.data[0][0], hi = u.data[0][u.data[0].length - 1];
      u.setScale("x", { min: Math.max(lo, nmin), max: Math.min(hi, nmax) });
    }, { passive: false });
  }

  // The y axis is as wide as its widest label ("150,000"), so no label is clipped.
  function axisSize(u, values, axisIdx, cycleNum) {
    var axis = u.axes[axisIdx];
    if (cycleNum > 1) return axis._size;
    var size = axis.ticks.size + axis.gap + (axis.label ? 18 : 0);
    if (values && values.length) {
      u.ctx.save();
      u.ctx.font = axis.font[0];
      var widest = values.reduce(function (w, v) { return Math.max(w, u.ctx.measureText(String(v)).width); }, 0);
      u.ctx.restore();
      size += widest / devicePixelRatio;
    }
    return Math.ceil(size) + 4;
  }

  function tooltip(el) {
    var tip = el.parentNode.querySelector(".chart-tooltip");
    if (!tip) {
      tip = document.createElement("div");
      tip.className = "chart-tooltip";
      tip.hidden = true;
      tip.setAttribute("role", "status");
      el.parentNode.appendChild(tip);
    }
    return tip;
  }

  function row(key, label, value) {
    var tr = document.createElement("tr");
    var k = document.createElement("td"), l = document.createElement("td"), v = document.createElement("td");
    if (key) { var sw = document.createElement("span"); sw.className = "key"; sw.style.setProperty("--swatch", key); k.appendChild(sw); }
    l.textContent = label; v.textContent = value; v.className = "num";
    tr.appendChild(k); tr.appendChild(l); tr.appendChild(v);
    return tr;
  }

  // Hover: "call N" and each series' value at that call, with units and separators (the cost of the call too).
  function showTip(u, el, describe) {
    var tip = tooltip(el), idx = u.cursor.idx;
    if (idx == null || u.cursor.left < 0) { tip.hidden = true; return; }
    var x = u.data[0][idx];
    tip.replaceChildren();
    var head = document.createElement("strong");
    head.textContent = "call " + fmt(x);
    tip.appendChild(head);
    var table = document.createElement("table");
    describe(idx).forEach(function (r) { table.appendChild(row(r[0], r[1], r[2])); });
    tip.appendChild(table);
    tip.hidden = false;
    var box = el.getBoundingClientRect(), over = u.over.getBoundingClientRect(), parent = el.parentNode.getBoundingClientRect();
    var leftPx = over.left - parent.left + u.cursor.left + 14;
    if (leftPx + tip.offsetWidth > box.right - parent.left) leftPx = over.left - parent.left + u.cursor.left - tip.offsetWidth - 14;
    tip.style.left = Math.max(0, leftPx) + "px";
    tip.style.top = over.top - parent.top + 8 + "px";
  }

  function seriesLegend(el, entries) {
    var list = document.getElementById("series-legend");
    if (!list) return;
    list.replaceChildren();
    entries.forEach(function (e) {
      var li = document.createElement("li"), sample = document.createElement("span");
      sample.className = e.area ? "key" : "line-sample" + (e.dashed ? " dashed" : "");
      sample.style.setProperty("--swatch", e.color);
      li.appendChild(sample);
      li.appendChild(document.createTextNode(" " + e.label));
      list.appendChild(li);
    });
  }

  function baseOpts(el, tl, height, yLabel) {
    return {
      width: el.clientWidth || 1000, height: height, legend: { show: false },
      scales: { x: { time: false } },
      axes: [
        { label: "main-chain API call", incrs: INTEGER_STEPS, values: function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) ? fmt(v) : ""; }); } },
        { label: yLabel, size: axisSize, values: function (u, vals) { return vals.map(fmt); } },
      ],
      cursor: { drag: { x: true, y: false }, sync: { key: "timeline-" + tl.session } },
    };
  }

  function lineChart(el, tl, agents, height, lane, main) {
    var built = buildData(tl, agents);
    var colors = agentColors(tl);
    var series = [{}], legend = [];
    built.meta.forEach(function (m) {
      var c = colors[m.agent];
      if (m.replay) c = replayColor(m.agent);
      if (m.cost) {
        // Hidden until the "cumulative cost" box is ticked; dollars on their own axis.
        series.push({ label: "cumulative cost", stroke: cssVar("--cost", "#059669"), width: 2, scale: "usd", show: false, spanGaps: true, points: { show: false } });
        return;
      }
      // An estimate counts the transcript's text only (no system prompt or tools): said in its name, as it runs
      // below the recorded context.
      var label = m.replay ? "replay: " + m.agent : (m.agent === "main" ? "main chain" : m.agent) + (m.estimate ? " text (estimate)" : " context");
      series.push({ label: label, stroke: c, width: m.estimate ? 1 : 2, dash: m.estimate ? [4, 4] : (m.replay ? [10, 3] : undefined),
        spanGaps: true, points: { show: !m.estimate, size: 5 } });
      legend.push({ label: label, color: c, dashed: m.estimate || m.replay });
    });
    var top = Math.max((tl.thresholds && tl.thresholds.window) || 0, 1);
    tl.events.forEach(function (m) { if (m.pre_tokens && m.kind !== "microcompact") top = Math.max(top, m.pre_tokens); });
    var opts = baseOpts(el, tl, height, lane ? "tokens" : "tokens (context per call)");
    opts.series = series;
    opts.scales.y = { range: function (u, lo, hi) { return [0, Math.max(hi, lane ? 1 : top) * 1.05]; } };
    if (main) opts.scales.x.range = function () { return [main.scales.x.min, main.scales.x.max]; };
    if (!lane) opts.axes.push({ scale: "usd", side: 1, size: axisSize, grid: { show: false }, label: "US$ (cumulative)", values: function (u, vals) { return vals.map(function (v) { return "$" + v.toLocaleString("en-US"); }); } });
    opts.hooks = { draw: [function (u) { drawOverlays(u, lane ? { events: tl.events, replays: {} } : tl, el); }], ready: [wheelZoom],
      setCursor: [function (u) {
        showTip(u, el, function (idx) {
          var rows = [];
          built.meta.forEach(function (m, i) {
            var v = u.data[i + 1][idx];
            if (v == null || !u.series[i + 1].show) return;
            if (m.cost) { rows.push([u.series[i + 1].stroke(), "cumulative cost", usd(v)]); return; }
            var point = m.points.find(function (p) { return p.x === u.data[0][idx]; });
            var cost = point && point.cost_usd != null && !m.estimate && !m.replay ? " · " + usd(point.cost_usd) : "";
            rows.push([u.series[i + 1].stroke(), u.series[i + 1].label, fmt(v) + " tokens" + cost]);
          });
          return rows;
        });
      }] };
    var u = new uPlot(opts, built.data, el);
    u.meta = built.meta;
    if (!lane) seriesLegend(el, legend);
    return u;
  }

  function stackChart(el, tl) {
    var comp = tl.composition, stack = buildStack(comp);
    var counts = {};
    var series = [{}], legend = [];
    var styles = comp.parts.map(function (p) {
      var n = counts[p.kind] = (counts[p.kind] || 0) + 1;
      var base = color(PART_VARS[p.kind] || PART_VARS.user);
      return { color: base, fill: withAlpha(base, [0.9, 0.7, 0.5, 0.35][(n - 1) % 4]) };
    });
    stack.order.forEach(function (i) {
      series.push({ label: comp.parts[i].part, stroke: styles[i].color, width: 1, fill: styles[i].fill, points: { show: false } });
    });
    comp.parts.forEach(function (p, i) { legend.push({ label: p.part, color: styles[i].fill, area: true }); });
    var top = Math.max((tl.thresholds && tl.thresholds.window) || 0, 1);
    var opts = baseOpts(el, tl, HEIGHT, "tokens (what filled the context)");
    opts.series = series;
    opts.scales.y = { range: function (u, lo, hi) { return [0, Math.max(hi, top) * 1.05]; } };
    opts.hooks = { draw: [function (u) { drawOverlays(u, tl, el); }], ready: [wheelZoom],
      setCursor: [function (u) {
        showTip(u, el, function (idx) {
          var rows = comp.parts.map(function (p, i) { return [styles[i].fill, p.part, fmt(p.tokens[idx]) + " tokens"]; })
            .filter(function (r, i) { return comp.parts[i].tokens[idx] > 0; }).reverse();
          rows.push(["", "context" + (comp.estimated[idx] ? " (estimate)" : ""), fmt(comp.context[idx]) + " tokens"]);
          return rows;
        });
      }] };
    var u = new uPlot(opts, stack.data, el);
    u.meta = comp.calls.map(function (c) { return { agent: "main", call: c }; });
    seriesLegend(el, legend.reverse());
    return u;
  }

  function destroy(el) {
    if (el.uplot) { el.uplot.destroy(); el.uplot = null; }
    var lanes = document.getElementById("lanes");
    if (lanes) { lanes.querySelectorAll(".lane").forEach(function (l) { if (l.uplot) l.uplot.destroy(); }); lanes.replaceChildren(); }
  }

  function render(el, tl) {
    destroy(el);
    var mode = el.dataset.mode = currentMode();
    var useLanes = el.dataset.lanes = document.getElementById("own-lanes") && document.getElementById("own-lanes").checked ? "1" : "0";
    var agents = Object.keys(tl.series).sort(function (a, b) { return a === "main" ? -1 : b === "main" ? 1 : a < b ? -1 : 1; });
    var status = document.getElementById("composition-status");
    var u;
    if (mode === "composition" && tl.composition && tl.composition.calls && tl.composition.calls.length) {
      u = stackChart(el, tl);
      if (status) status.textContent = "Main chain only: each band is one part of the context at that call (the call panel's split); they add up to the recorded context.";
    } else {
      if (mode === "composition" && status) status.textContent = tl.composition_status === "computing"
        ? "Computing: the worker splits every call's context after the token estimates. Showing the context lines meanwhile."
        : tl.composition_status === "too_large" ? tl.composition_refused + " Showing the context lines."
        : "No call to split.";
      else if (status) status.textContent = "";
      u = lineChart(el, tl, useLanes === "1" ? agents.filter(function (a) { return a === "main"; }) : agents, HEIGHT, null);
    }
    el.uplot = u;
    var lanes = document.getElementById("lanes");
    if (lanes && useLanes === "1") {
      agents.filter(function (a) { return a !== "main"; }).forEach(function (agent) {
        var holder = document.createElement("div");
        holder.className = "lane";
        holder.dataset.lane = agent;
        holder.setAttribute("aria-label", "Subagent " + agent + " context per call");
        var title = document.createElement("p");
        title.className = "small muted lane-title";
        title.textContent = "Subagent " + agent;
        lanes.appendChild(title);
        lanes.appendChild(holder);
        // A lane shares the main chart's x range, so a subagent sits under the calls it ran beside.
        holder.uplot = lineChart(holder, tl, [agent], LANE_HEIGHT, agent, u);
      });
    }
    u.hooks.setScale = (u.hooks.setScale || []).concat([function (main, key) {
      if (key !== "x") return;
      document.querySelectorAll("#lanes .lane").forEach(function (l) { if (l.uplot) l.uplot.setScale("x", { min: main.scales.x.min, max: main.scales.x.max }); });
    }]);
    u.over.addEventListener("mouseleave", function () { tooltip(el).hidden = true; });
    u.over.addEventListener("dblclick", function () { u.setScale("x", { min: u.data[0][0], max: u.data[0][u.data[0].length - 1] }); });
    u.over.addEventListener("click", function () {
      var idx = u.cursor.idx;
      if (idx == null) return;
      var hit = mode === "composition" && tl.composition && u.meta[idx] && u.meta[idx].call !== undefined && !u.meta[idx].points
        ? u.meta[idx] : nearestCall(u, u.meta, idx);
      if (!hit || typeof htmx === "undefined") return;
      // The call opened goes into the address (with the page's own strategy and replays), so a reload or a copied
      // link opens the same call: the turn URL serves the whole page when asked without htmx.
      var query = new URLSearchParams(window.location.search);
      query.set("agent", hit.agent);
      query.set("call", hit.call);
      htmx.ajax("GET", el.dataset.turnUrl + "?" + query.toString(), { target: "#turn", swap: "innerHTML", push: "true" });
    });
    var costBox = document.getElementById("show-cost");
    if (costBox) {
      var costIndex = u.series.findIndex(function (s) { return s.label === "cumulative cost"; });
      costBox.disabled = costIndex < 0;
      if (costIndex > 0) u.setSeries(costIndex, { show: costBox.checked });
    }
  }

  function currentMode() {
    var checked = document.querySelector("input[name=chart-mode]:checked");
    return checked ? checked.value : "context";
  }

  function initTimeline() {
    var el = document.getElementById("chart");
    var tl = readJSON("timeline-data");
    if (!el || !tl || typeof uPlot === "undefined") return;
    el.timeline = tl; // the chart's data, read by the browser tests
    render(el, tl);
  }

  function redrawAll() {
    var el = document.getElementById("chart");
    if (el && el.uplot) el.uplot.redraw(false);
    document.querySelectorAll("#lanes .lane").forEach(function (l) { if (l.uplot) l.uplot.redraw(false); });
  }

  document.addEventListener("change", function (e) {
    var t = e.target, el = document.getElementById("chart");
    if (!el || !el.timeline) return;
    if (t.matches("#marker-legend input[data-kind]")) redrawAll();
    else if (t.matches("input[name=chart-mode], #own-lanes")) render(el, el.timeline);
    else if (t.id === "show-cost" && el.uplot) {
      var i = el.uplot.series.findIndex(function (s) { return s.label === "cumulative cost"; });
      if (i > 0) el.uplot.setSeries(i, { show: t.checked });
    }
  });

  window.addEventListener("resize", function () {
    var el = document.getElementById("chart");
    if (el && el.uplot) el.uplot.setSize({ width: el.clientWidth, height: HEIGHT });
    document.querySelectorAll("#lanes .lane").forEach(function (l) { if (l.uplot) l.uplot.setSize({ width: l.clientWidth, height: LANE_HEIGHT }); });
  });

  // A live session: the live-status region raises session-grew; fetch the data again and redraw the chart.
  document.addEventListener("session-grew", function () {
    var el = document.getElementById("chart"), holder = document.getElementById("timeline-data");
    if (!el || !holder || !el.dataset.jsonUrl) return;
    fetch(el.dataset.jsonUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        holder.textContent = text;
        initTimeline();
      });
  });

  document.addEventListener("DOMContentLoaded", initTimeline);
  // Back or Forward over a clicked call (its address pushed): htmx puts the page back by fetching it (base.html keeps
  // no history cache) and drops its <script> elements (allowScriptTags false), the chart's data among them; the data
  // is fetched again from the JSON twin and the chart drawn.
  document.addEventListener("htmx:historyRestore", function () {
    var el = document.getElementById("chart");
    if (!el || !el.dataset.jsonUrl) return;
    fetch(el.dataset.jsonUrl, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (text) {
        if (!text) return;
        var holder = document.getElementById("timeline-data");
        if (!holder) {
          holder = document.createElement("script");
          holder.type = "application/json";
          holder.id = "timeline-data";
          el.parentNode.appendChild(holder);
        }
        holder.textContent = text;
        el.replaceChildren();
        initTimeline();
      });
  });
})();
