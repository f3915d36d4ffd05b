// Token timeline: uPlot chart of context per API call, markers, threshold lines; click opens a call's detail.
(function () {
  "use strict";
  var COLORS = ["#2a5db0", "#c2410c", "#15803d", "#7c3aed", "#b91c1c", "#0e7490", "#a16207", "#be185d"];
  var MARKER_COLORS = { compaction: "#d97706", microcompact: "#65a30d", prune: "#65a30d", overflow: "#dc2626",
    api_error: "#dc2626", cache_miss: "#64748b", idle_gap: "#94a3b8", subagent_spawn: "#7c3aed" };
  var REPLAY_COLORS = { "claude-code": "#0f766e", "klaude-code": "#9333ea", khaelor: "#db2777" };
  var LINES = [["window", "#111827"], ["blocking", "#dc2626"], ["autocompact", "#d97706"], ["warning", "#ca8a04"]];

  // Calls are whole: ticks only at integers, however short the session.
  var INTEGER_STEPS = [1, 2, 5, 10, 20, 25, 50, 100, 200, 250, 500, 1000, 2000, 2500, 5000, 10000, 20000, 50000, 100000];

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

  // x is the main-chain API call number (selectors.call_axis): a subagent's calls run on from its spawn call.
  function buildData(tl) {
    var agents = Object.keys(tl.series).sort(function (a, b) { return a === "main" ? -1 : b === "main" ? 1 : a < b ? -1 : 1; });
    var tables = [], meta = [];
    agents.forEach(function (agent) {
      var pts = tl.series[agent];
      tables.push([pts.map(function (p) { return p.x; }), pts.map(function (p) { return p.context; })]);
      meta.push({ agent: agent, estimate: false, points: pts });
    });
    Object.keys(tl.replays || {}).forEach(function (name) {
      var r = tl.replays[name];
      if (!r.points || !r.points.length) return;
      tables.push([r.points.map(function (p) { return p.x; }), r.points.map(function (p) { return p.context; })]);
      meta.push({ agent: name, replay: true, points: r.points, events: r.events || [] });
    });
    Object.keys(tl.estimates || {}).forEach(function (agent) {
      var pts = tl.estimates[agent];
      if (!pts.length) return;
      tables.push([pts.map(function (p) { return p.x; }), pts.map(function (p) { return p.estimate; })]);
      meta.push({ agent: agent, estimate: true, points: pts });
    });
    var cost = (tl.cost && tl.cost.points) || [];
    if (cost.length) {
      tables.push([cost.map(function (p) { return p.x; }), cost.map(function (p) { return p.cumulative_usd; })]);
      meta.push({ agent: "cost", cost: true, points: cost });
    }
    return { data: tables.length ? uPlot.join(tables) : [[], []], meta: meta };
  }

  function drawOverlays(u, tl) {
    var ctx = u.ctx, left = u.bbox.left, width = u.bbox.width, top = u.bbox.top, height = u.bbox.height;
    ctx.save();
    ctx.font = 11 * devicePixelRatio + "px system-ui, sans-serif";
    ctx.textAlign = "left"; // uPlot leaves the axes' alignment on the context
    ctx.textBaseline = "alphabetic";
    // Lines with the same value share one stroke and one label ("window = blocking 200,000").
    var drawn = {};
    LINES.forEach(function (line) {
      var v = tl.thresholds[line[0]];
      if (!v) return;
      if (drawn[v]) { drawn[v].names.push(line[0]); return; }
      drawn[v] = { names: [line[0]], color: line[1] };
    });
    Object.keys(drawn).forEach(function (value) {
      var d = drawn[value], v = Number(value);
      var y = u.valToPos(v, "y", true);
      if (y < top || y > top + height) return;
      ctx.strokeStyle = d.color; ctx.setLineDash([6, 4]); ctx.lineWidth = devicePixelRatio;
      ctx.beginPath(); ctx.moveTo(left, y); ctx.lineTo(left + width, y); ctx.stroke();
      ctx.fillStyle = d.color;
      ctx.fillText(d.names.join(" = ") + " " + v.toLocaleString(), left + 6, y - 3);
    });
    ctx.setLineDash([]);
    var labelRow = -1;
    Object.keys(tl.replays || {}).forEach(function (name) {
      (tl.replays[name].events || []).forEach(function (ev) {
        if (ev.x == null) return;
        var x = u.valToPos(ev.x, "x", true), y = u.valToPos(ev.tokens_before, "y", true);
        ctx.fillStyle = REPLAY_COLORS[name] || "#0f766e";
        ctx.beginPath(); ctx.arc(x, y, 4 * devicePixelRatio, 0, 2 * Math.PI); ctx.fill();
      });
    });
    var hidden = hiddenMarkerKinds();
    tl.markers.forEach(function (m) {
      if (hidden[m.kind]) return;
      var x = u.valToPos(m.x, "x", true);
      if (x < left || x > left + width) return;
      ctx.strokeStyle = MARKER_COLORS[m.kind] || "#334155";
      ctx.lineWidth = (m.kind === "compaction" || m.kind === "overflow" ? 2 : 1) * devicePixelRatio;
      ctx.beginPath(); ctx.moveTo(x, top); ctx.lineTo(x, top + height); ctx.stroke();
      if (m.kind === "compaction" || m.kind === "microcompact" || m.kind === "overflow" || m.kind === "prune") {
        ctx.fillStyle = ctx.strokeStyle;
        var text = m.kind + (m.pre_tokens ? " " + m.pre_tokens.toLocaleString() : "");
        var w = ctx.measureText(text).width;
        // Labels go right of their line, or left of it near the right edge; stacked so neighbours don't collide.
        var tx = x + 3 + w > left + width ? x - 3 - w : x + 3;
        labelRow = (labelRow + 1) % 3;
        ctx.fillText(text, tx, top + (12 + 13 * labelRow) * devicePixelRatio);
      }
    });
    ctx.restore();
  }

  function nearestCall(u, meta, idx) {
    // Prefer a recorded series with a point at this x; the main chain first.
    for (var s = 1; s < u.series.length; s++) {
      var m = meta[s - 1];
      if (!m.estimate && !m.replay && !m.cost && u.data[s][idx] != null) {
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

  function initTimeline() {
    var el = document.getElementById("chart");
    var tl = readJSON("timeline-data");
    if (!el || !tl || typeof uPlot === "undefined") return;
    var built = buildData(tl);
    var series = [{ label: "call", value: function (u, v) { return v == null ? "–" : "call " + v.toLocaleString(); } }];
    // One colour per agent: its recorded line and its estimate line share it.
    var agentColor = {}, nextColor = 1;
    built.meta.forEach(function (m, i) {
      if (!(m.agent in agentColor)) agentColor[m.agent] = m.agent === "main" ? COLORS[0] : COLORS[1 + (nextColor++ - 1) % (COLORS.length - 1)];
      var color = agentColor[m.agent];
      if (m.replay) color = REPLAY_COLORS[m.agent] || "#0f766e";
      if (m.cost) {
        // Hidden until the "cumulative cost" box is ticked; dollars on their own axis.
        series.push({ label: "cumulative cost", stroke: "#059669", width: 2, scale: "usd", show: false, spanGaps: true,
          points: { show: false }, value: function (u, v) { return v == null ? "–" : "$" + v.toFixed(2); } });
        return;
      }
      var costByX = {};
      if (!m.replay && !m.estimate) m.points.forEach(function (p) { if (p.cost_usd != null) costByX[p.x] = p.cost_usd; });
      series.push({
        label: m.replay ? "replay: " + m.agent : (m.agent === "main" ? "main chain" : m.agent) + (m.estimate ? " (estimate)" : " context"),
        stroke: color, width: m.estimate ? 1 : 2, dash: m.estimate ? [4, 4] : (m.replay ? [10, 3] : undefined),
        spanGaps: true, points: { show: !m.estimate, size: 5 },
        value: function (u, v, si, di) {
          if (v == null) return "–";
          var c = di == null ? undefined : costByX[u.data[0][di]];
          return v.toLocaleString() + (c === undefined ? "" : " · $" + (c < 0.01 ? c.toFixed(4) : c.toFixed(2)));
        },
      });
    });
    var top = Math.max(tl.thresholds.window || 0, 1);
    tl.markers.forEach(function (m) { if (m.pre_tokens && m.kind !== "microcompact") top = Math.max(top, m.pre_tokens); });
    var opts = {
      width: el.clientWidth || 1000, height: 380, series: series,
      scales: { x: { time: false }, y: { range: function (u, lo, hi) { return [0, Math.max(hi, top) * 1.05]; } } },
      axes: [{ label: "main-chain API call", incrs: INTEGER_STEPS, values: function (u, vals) { return vals.map(function (v) { return Number.isInteger(v) ? v.toLocaleString() : ""; }); } }, { label: "tokens", size: 70, values: function (u, vals) { return vals.map(function (v) { return v >= 1000 ? v / 1000 + "k" : v; }); } },
        { scale: "usd", side: 1, size: 60, grid: { show: false }, values: function (u, vals) { return vals.map(function (v) { return "$" + v; }); } }],
      cursor: { drag: { x: true, y: false } },
      hooks: { draw: [function (u) { drawOverlays(u, tl); }], ready: [wheelZoom] },
    };
    var u = new uPlot(opts, built.data, el);
    el.uplot = u;
    u.over.addEventListener("dblclick", function () { u.setScale("x", { min: u.data[0][0], max: u.data[0][u.data[0].length - 1] }); });
    u.over.addEventListener("click", function () {
      var idx = u.cursor.idx;
      if (idx == null) return;
      var hit = nearestCall(u, built.meta, idx);
      if (!hit || typeof htmx === "undefined") return;
      htmx.ajax("GET", el.dataset.turnUrl + "?agent=" + encodeURIComponent(hit.agent) + "&call=" + hit.call, { target: "#turn", swap: "innerHTML" });
    });
    document.querySelectorAll("#marker-legend input[data-kind]").forEach(function (box) {
      box.addEventListener("change", function () { u.redraw(false); });
    });
    var costBox = document.getElementById("show-cost");
    if (costBox) {
      var costIndex = built.meta.findIndex(function (m) { return m.cost; }) + 1;
      costBox.disabled = costIndex === 0;
      costBox.addEventListener("change", function () { if (costIndex) u.setSeries(costIndex, { show: costBox.checked }); });
    }
  }

  function initComposition(root) {
    var holder = (root || document).querySelector(".composition-chart");
    var parts = holder && holder.dataset.parts ? JSON.parse(holder.dataset.parts) : null;
    if (!holder || !parts || !parts.length || typeof uPlot === "undefined") return;
    var xs = parts.map(function (_, i) { return i; });
    var ys = parts.map(function (p) { return p.tokens; });
    var bars = uPlot.paths && uPlot.paths.bars ? uPlot.paths.bars({ size: [0.7, 60] }) : null;
    new uPlot({
      width: holder.clientWidth || 600, height: 220,
      series: [{}, { label: "tokens", fill: "#93c5fd", stroke: "#2a5db0", paths: bars, points: { show: false } }],
      scales: { x: { time: false, range: [-0.5, parts.length - 0.5] } },
      axes: [{ values: function (u, vals) { return vals.map(function (v) { return parts[v] ? parts[v].part.slice(0, 18) : ""; }); }, size: 50, rotate: 0 },
             { size: 60 }],
      legend: { show: true },
    }, [xs, ys], holder);
  }

  window.addEventListener("resize", function () {
    var el = document.getElementById("chart");
    if (el && el.uplot) el.uplot.setSize({ width: el.clientWidth, height: 380 });
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
        if (el.uplot) { el.uplot.destroy(); el.uplot = null; }
        initTimeline();
      });
  });

  document.addEventListener("DOMContentLoaded", function () { initTimeline(); initComposition(); });
  document.addEventListener("htmx:afterSwap", function (e) { if (e.detail.target && e.detail.target.id === "turn") initComposition(e.detail.target); });
})();
