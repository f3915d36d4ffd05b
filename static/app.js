// Progressive enhancement only: every page works without this file except the charts.
(function () {
  "use strict";
  // Upload progress for large files (htmx fires htmx:xhr:progress while the request body is sent).
  document.addEventListener("htmx:xhr:progress", function (evt) {
    var bar = document.getElementById("upload-progress");
    var status = document.getElementById("upload-status");
    if (!bar || !evt.detail.lengthComputable) return;
    bar.hidden = false;
    var pct = Math.round((evt.detail.loaded / evt.detail.total) * 100);
    bar.value = pct;
    if (status) status.textContent = pct < 100 ? "Uploading… " + pct + "%" : "Importing…";
  });
  document.addEventListener("htmx:afterRequest", function (evt) {
    var status = document.getElementById("upload-status");
    if (status && evt.detail.elt && evt.detail.elt.id === "upload-form") {
      status.textContent = evt.detail.successful ? "Done." : "The import failed: see the report.";
      var bar = document.getElementById("upload-progress");
      if (bar) bar.hidden = true;
    }
  });
  // Search matches in a transcript: "previous" / "next" (or n / N outside a field) step through the marks.
  var currentMatch = -1;
  function stepMatch(delta) {
    var marks = document.querySelectorAll("#transcript mark.hit");
    if (!marks.length) return;
    if (marks[currentMatch]) marks[currentMatch].classList.remove("current");
    currentMatch = (currentMatch + delta + marks.length) % marks.length;
    marks[currentMatch].classList.add("current");
    marks[currentMatch].scrollIntoView({ block: "center" });
    var counter = document.getElementById("match-counter");
    if (counter) counter.textContent = currentMatch + 1 + " / " + marks.length;
  }
  document.addEventListener("click", function (evt) {
    var button = evt.target.closest && evt.target.closest("[data-step-match]");
    if (button) stepMatch(Number(button.dataset.stepMatch));
  });
  // Between a transcript's records: j (next) and k (previous) outside a field move the focus and scroll to it.
  function stepRecord(delta) {
    var records = Array.prototype.slice.call(document.querySelectorAll("#transcript ol.messages > li.msg"));
    if (!records.length) return;
    var at = records.indexOf(document.querySelector("#transcript li.msg.current"));
    var next = at < 0 ? (delta > 0 ? 0 : records.length - 1) : Math.min(Math.max(at + delta, 0), records.length - 1);
    if (at >= 0) records[at].classList.remove("current");
    records[next].classList.add("current");
    records[next].focus({ preventScroll: true });
    records[next].scrollIntoView({ block: "start" });
  }
  // o opens the current record's folded tool calls, or folds them again when they are all open.
  function toggleCalls() {
    var record = document.querySelector("#transcript li.msg.current");
    if (!record) return;
    var calls = Array.prototype.slice.call(record.querySelectorAll("details.tool-use, details.injected-text"));
    var open = calls.some(function (d) { return !d.open; });
    calls.forEach(function (d) { d.open = open; });
  }
  // htmx changed the address (a filter chip, a search, a page of the transcript): the JSON twin's link and the session
  // search's filter field follow it; they sit outside the region swapped and kept the state the page was loaded with.
  document.addEventListener("htmx:pushedIntoHistory", function () {
    var query = new URLSearchParams(window.location.search);
    document.querySelectorAll("a[data-twin]").forEach(function (a) { a.search = window.location.search; });
    document.querySelectorAll("form[data-keeps-show] input[name=show]").forEach(function (input) {
      input.value = query.get("show") || "";
      input.disabled = !input.value;
    });
  });

  document.addEventListener("keydown", function (evt) {
    if (evt.target.closest && evt.target.closest("input, textarea, select, [contenteditable]")) return;
    if (evt.ctrlKey || evt.metaKey || evt.altKey) return;
    if (evt.key === "n") stepMatch(1);
    else if (evt.key === "N") stepMatch(-1);
    else if (evt.key === "j") stepRecord(1);
    else if (evt.key === "k") stepRecord(-1);
    else if (evt.key === "o") toggleCalls();
  });
})();
