/* The task page's diff, drawn by the vendored diff2html (with highlight.js) from the unified
   patch the review panel embeds as JSON (#review-patch). The server-side coloured text stays in
   the page (hidden once diff2html has drawn) and is what shows when this script or the library
   fails to load or throws. Runs at load and after every live refresh of the review panel. */
(function () {
  "use strict";
  function draw() {
    var src = document.getElementById("review-patch");
    var target = document.getElementById("review-diff2html");
    var plain = document.getElementById("review-plain");
    if (!src || !target || !plain || !window.Diff2HtmlUI) { return; }
    try {
      var patch = JSON.parse(src.textContent || '""');
      if (!patch) { return; }
      var ui = new window.Diff2HtmlUI(target, patch, {
        drawFileList: false,
        matching: "lines",
        outputFormat: "line-by-line",
        highlight: true,
        fileContentToggle: false,
        stickyFileHeaders: false,
        synchronisedScroll: false,
        colorScheme: "light"
      });
      ui.draw();
      ui.highlightCode();
      // each file's changes are a scrollable region: reachable and scrollable by keyboard
      target.querySelectorAll(".d2h-file-wrapper").forEach(function (w) {
        var name = w.querySelector(".d2h-file-name");
        w.setAttribute("role", "region");
        w.setAttribute("aria-label", "Changes in " + (name ? name.textContent.trim() : "a file"));
      });
      target.querySelectorAll(".d2h-file-diff, .d2h-files-diff").forEach(function (d) { d.setAttribute("tabindex", "0"); });
      target.hidden = false;
      plain.hidden = true;
    } catch (err) {
      target.hidden = true;
      plain.hidden = false;  // the server-side text stays
      if (window.console) { window.console.warn("diff2html failed, showing the plain diff:", err); }
    }
  }
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("elowen:refreshed", function (ev) { if (ev.detail && ev.detail.id === "review") { draw(); } });
})();
