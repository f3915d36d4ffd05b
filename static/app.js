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
})();
