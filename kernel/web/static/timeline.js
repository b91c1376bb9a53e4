/* The timeline: every event of the page's stream as a row (newest first, at most 500),
 * filtered by type prefix and text. */
(function () {
  "use strict";
  var list = document.getElementById("timeline");
  if (!list) { return; }
  var typeSel = document.getElementById("tl-type");
  var text = document.getElementById("tl-text");
  var count = document.getElementById("tl-count");
  var empty = document.getElementById("tl-empty");
  var MAX = 500;
  var seen = {};

  function visible(li) {
    var t = typeSel.value;
    var q = text.value.trim().toLowerCase();
    return (!t || li.dataset.type.indexOf(t) === 0) && (!q || li.textContent.toLowerCase().indexOf(q) !== -1);
  }
  // The count is the number of rows shown; the notice says why none is shown (no event yet,
  // or none matches the filter). Hidden rows are display:none ([hidden] in app.css).
  function applyFilter() {
    var n = 0;
    var rows = list.querySelectorAll("li");
    rows.forEach(function (li) { li.hidden = !visible(li); if (!li.hidden) { n++; } });
    count.textContent = String(n);
    list.dataset.shown = String(n);
    empty.hidden = n > 0;
    empty.textContent = rows.length ? "No event matches the filter." : "Waiting for events…";
  }
  function summary(ev) {
    var d = ev.data || {};
    var t = d.task || {};
    var bits = [];
    if (t.title) { bits.push("#" + t.id + " " + t.title); } else if (d.id !== undefined) { bits.push("#" + d.id); }
    if (d.name) { bits.push(d.name); }
    if (d.session) { bits.push(d.session); }
    if (d.signal) { bits.push(d.signal); }
    if (d.mission) { bits.push(d.mission.name + " · L" + d.mission.level + " · " + d.mission.state); }
    if (d.decision) { bits.push(d.decision.kind + " #" + d.decision.id + " " + d.decision.status); }
    if (t.state) { bits.push(t.state); }
    if (d.text) { bits.push(String(d.text).slice(0, 120)); }
    return bits.length ? bits.join(" · ") : JSON.stringify(d).slice(0, 160);
  }
  document.addEventListener("elowen:event", function (e) {
    var ev = e.detail;
    if (ev.id !== null && seen[ev.id]) { return; }
    if (ev.id !== null) { seen[ev.id] = true; }
    var li = document.createElement("li");
    li.dataset.type = ev.type;
    var time = document.createElement("time");
    var when = ev.ts ? new Date(ev.ts) : new Date();  // when the daemon published it
    if (isNaN(when.getTime())) { when = new Date(); }
    time.dateTime = when.toISOString();
    time.textContent = when.toLocaleTimeString([], { hour12: false });
    var code = document.createElement("code");
    code.textContent = ev.type;
    var span = document.createElement("span");
    span.className = "tl-text";
    span.textContent = summary(ev);
    li.appendChild(time); li.appendChild(code); li.appendChild(span);
    li.hidden = !visible(li);
    list.insertBefore(li, list.firstChild);
    while (list.children.length > MAX) { list.removeChild(list.lastChild); }
    applyFilter();
  });
  typeSel.addEventListener("change", applyFilter);
  text.addEventListener("input", applyFilter);
  document.getElementById("timeline-filter").addEventListener("submit", function (e) { e.preventDefault(); });
})();
