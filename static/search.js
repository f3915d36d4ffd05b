// Search across every session from every page (progressive enhancement: without this file the header's
// search field is a plain form that opens the search page). Ctrl+K / Cmd+K focuses the field; results
// drop down as you type (htmx fetches the search page's results partial); arrows move through them,
// Escape closes. On the session list, the search stays within the list's current filters.
(function () {
  "use strict";
  var SCOPE = ["agent", "project", "model", "since", "until", "has_compaction", "overflowed", "compaction_failed"];

  function field() { return document.getElementById("quick-search-q"); }
  function panel() { return document.getElementById("quick-results"); }

  // The list's filters as they are now (htmx may have changed them since the page loaded).
  function syncScope() {
    var listForm = document.querySelector("form.filters");
    var form = field() && field().form;
    if (!listForm || !form) return;
    form.querySelectorAll("input[type=hidden]").forEach(function (input) { input.remove(); });
    new FormData(listForm).forEach(function (value, name) {
      if (SCOPE.indexOf(name) < 0 || !value) return;
      var input = document.createElement("input");
      input.type = "hidden";
      input.name = name;
      input.value = value;
      form.insertBefore(input, field());
    });
  }

  function links() { return Array.prototype.slice.call(panel().querySelectorAll("a")); }
  function show() { var p = panel(); if (p && field().value.trim() && p.children.length) p.hidden = false; }
  function hide() { var p = panel(); if (p) p.hidden = true; }

  document.addEventListener("keydown", function (evt) {
    if (!field()) return;
    if ((evt.ctrlKey || evt.metaKey) && !evt.altKey && !evt.shiftKey && (evt.key === "k" || evt.key === "K")) {
      evt.preventDefault();
      field().focus();
      field().select();
      show();
      return;
    }
    var p = panel();
    if (!p || p.hidden || !evt.target.closest || !evt.target.closest(".quick-search")) return;
    if (evt.key === "Escape") {
      evt.preventDefault(); // a search field would also clear itself: keep the query for the next Ctrl+K
      hide();
      field().focus();
      return;
    }
    if (evt.key !== "ArrowDown" && evt.key !== "ArrowUp") return;
    var all = links();
    if (!all.length) return;
    evt.preventDefault();
    var at = all.indexOf(document.activeElement);
    var next = evt.key === "ArrowDown" ? at + 1 : at - 1;
    if (next < 0) field().focus();
    else all[Math.min(next, all.length - 1)].focus();
  });

  document.addEventListener("htmx:configRequest", function (evt) {
    if (evt.detail.elt !== field()) return;
    syncScope();
    var form = field().form;
    form.querySelectorAll("input[type=hidden]").forEach(function (input) {
      evt.detail.parameters[input.name] = input.value;
    });
  });
  document.addEventListener("submit", function (evt) {
    if (field() && evt.target === field().form) syncScope();
  });
  document.addEventListener("htmx:afterSwap", function (evt) {
    if (evt.detail.target !== panel()) return;
    if (field().value.trim()) show();
    else hide();
  });
  document.addEventListener("focusin", function (evt) {
    if (evt.target === field()) show();
  });
  document.addEventListener("click", function (evt) {
    if (!evt.target.closest || !evt.target.closest(".quick-search")) hide();
  });
})();
