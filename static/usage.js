// Usage page: a stacked bar chart of cost per group (day, week, month, project, model, agent or session), one stack
// per model or agent, from the data the figure carries (#usage-chart[data-chart], views/usage.py chart_data).
// Drawn as SVG with presentation attributes only: the CSP forbids inline script and style. An agent's colour is its
// profile's (--agent-<name>, the served agents.css); models take the timeline's series colours (--series-N).
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var SERIES = [["--series-1", "#2563eb"], ["--series-2", "#15803d"], ["--series-3", "#7c3aed"], ["--series-4", "#0e7490"],
    ["--series-5", "#b91c1c"], ["--series-6", "#a16207"], ["--series-7", "#be185d"], ["--series-8", "#475569"]];
  var WIDTH = 1000, HEIGHT = 260, LEFT = 64, BOTTOM = 56, TOP = 12;

  function cssVar(name, fallback) {
    var v = getComputedStyle(document.documentElement).getPropertyValue(name);
    return v && v.trim() ? v.trim() : fallback;
  }
  function usd(v) { return "$" + (v > 0 && v < 0.01 ? v.toFixed(4) : v.toFixed(2)); }
  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (parent) parent.appendChild(node);
    return node;
  }
  function colour(series, i) {
    if (series.agent) return cssVar("--agent-" + series.agent, SERIES[i % SERIES.length][1]);
    var pair = SERIES[i % SERIES.length];
    return cssVar(pair[0], pair[1]);
  }

  function draw() {
    var holder = document.getElementById("usage-chart");
    if (!holder || !holder.dataset.chart || holder.dataset.drawn) return;
    var data = JSON.parse(holder.dataset.chart);
    holder.dataset.drawn = "1";
    var groups = data.groups, series = data.series;
    if (!groups.length) return;
    var totals = groups.map(function (_, g) {
      return series.reduce(function (sum, s) { return sum + s.values[g]; }, 0);
    });
    var top = Math.max.apply(null, totals) || 1;
    var svg = el("svg", { viewBox: "0 0 " + WIDTH + " " + HEIGHT, role: "img", class: "usage-bars",
      "aria-label": holder.getAttribute("aria-label") || "Cost" });
    holder.insertBefore(svg, holder.firstChild);
    var plotH = HEIGHT - TOP - BOTTOM, plotW = WIDTH - LEFT - 8;
    var step = plotW / groups.length, bar = Math.max(Math.min(step * 0.7, 48), 1);
    var ink = cssVar("--muted", "#556070"), line = cssVar("--line", "#d9dee5");
    [0, 0.5, 1].forEach(function (f) {
      var y = TOP + plotH * (1 - f);
      el("line", { x1: LEFT, x2: WIDTH - 8, y1: y, y2: y, stroke: line, "stroke-width": 1 }, svg);
      el("text", { x: LEFT - 6, y: y + 4, "text-anchor": "end", "font-size": 11, fill: ink }, svg).textContent = usd(top * f);
    });
    var labelEvery = Math.ceil(groups.length / 24);
    groups.forEach(function (group, g) {
      var x = LEFT + step * g + (step - bar) / 2, y = TOP + plotH;
      var column = el("g", { class: "usage-bar", "data-group": group, "data-total": totals[g].toFixed(6) }, svg);
      series.forEach(function (s, i) {
        var value = s.values[g];
        if (!value) return;
        var h = plotH * value / top;
        y -= h;
        var rect = el("rect", { x: x, y: y, width: bar, height: Math.max(h, 0.5), fill: colour(s, i),
          "data-series": s.name, "data-value": value.toFixed(6) }, column);
        el("title", {}, rect).textContent = group + " · " + s.name + ": " + usd(value);
      });
      if (g % labelEvery === 0) {
        var text = el("text", { x: x + bar / 2, y: TOP + plotH + 14, "text-anchor": "end", "font-size": 11, fill: ink,
          transform: "rotate(-35 " + (x + bar / 2) + " " + (TOP + plotH + 14) + ")" }, svg);
        text.textContent = group.length > 22 ? group.slice(0, 21) + "…" : group;
      }
    });
    var legend = document.createElement("ul");
    legend.className = "legend";
    series.forEach(function (s, i) {
      var item = document.createElement("li");
      var swatch = el("svg", { width: 10, height: 10, "aria-hidden": "true" }, item);
      el("rect", { width: 10, height: 10, rx: 2, fill: colour(s, i) }, swatch);
      item.appendChild(document.createTextNode(" " + s.name + " "));
      var amount = document.createElement("span");
      amount.className = "num";
      amount.textContent = usd(s.values.reduce(function (a, b) { return a + b; }, 0));
      item.appendChild(amount);
      legend.appendChild(item);
    });
    holder.appendChild(legend);
  }

  document.addEventListener("DOMContentLoaded", draw);
  // The filters swap #results through htmx: draw the new data.
  document.addEventListener("htmx:afterSettle", draw);
})();
