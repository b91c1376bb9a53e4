/* Elowen live pages: one EventSource per page through the web front end.
 *
 * - Panels are elements with data-src (their partial's URL) and data-live (comma-separated
 *   event type patterns: "task.*" is a prefix match, "signal" exact, "*" all). An event that
 *   matches re-fetches the panel (coalesced: at most one request in flight per panel).
 * - Resume: the browser's last event id is sent back as ?last_event_id= on reconnect.
 * - A stream that errors, ends, or stays silent past the heartbeat window (meta
 *   stream-window, seconds) counts as dropped: the header shows "reconnecting…", and when the
 *   stream is back every panel is re-fetched (resync).
 * - Every htmx request carries the CSRF token (meta csrf-token) in X-CSRF-Token.
 * Other scripts listen to "elowen:event" ({id, type, data}) and "elowen:resync" on document.
 */
(function () {
  "use strict";
  var meta = function (name) { var m = document.querySelector('meta[name="' + name + '"]'); return m ? m.content : ""; };
  var csrf = meta("csrf-token");
  var windowMs = (parseFloat(meta("stream-window")) || 35) * 1000;
  var loggedIn = !!csrf;

  document.addEventListener("htmx:configRequest", function (e) { e.detail.headers["X-CSRF-Token"] = csrf; });
  document.addEventListener("htmx:afterRequest", function (e) {
    var elt = e.detail.elt;
    var ok = e.detail.successful && e.detail.xhr && e.detail.xhr.getResponseHeader("X-Elowen-Ok") === "1";
    if (ok && elt && elt.matches && elt.matches("form[data-reset-on-success]")) { elt.reset(); }
    if (ok) { clearFlashes(e.detail.target); }
  });
  // A later success clears the messages of earlier actions (elsewhere on the page): only the
  // newest outcome stays.
  function clearFlashes(keep) {
    document.querySelectorAll(".flash-slot .flash").forEach(function (f) {
      if (!keep || !keep.contains(f)) { f.remove(); }
    });
  }

  // ------------------------------------------------------------------ focus across swaps
  // A swap that replaces the focused control (the user's own toggle, Allow, level change, then
  // the panel refresh its event causes) would leave focus on <body>. Focus goes to the element
  // with the same id in the new content, else to the panel's first control, else the panel.
  function focusBefore(target) {
    var had = document.activeElement;
    return (had && had !== document.body && target && target.contains(had)) ? { id: had.id || null } : null;
  }
  function focusAfter(saved, id) {
    if (!saved) { return; }
    var now = document.activeElement;
    if (now && now !== document.body && document.contains(now)) { return; }
    var el = saved.id ? document.getElementById(saved.id) : null;
    var panel = document.getElementById(id);
    if (!el && panel) { el = panel.querySelector("button:not([disabled]), select:not([disabled]), input:not([type=hidden]):not([disabled]), a[href]"); }
    if (!el && panel) { panel.setAttribute("tabindex", "-1"); el = panel; }
    if (el) { el.focus({ preventScroll: true }); }
  }
  var htmxFocus = null;
  document.addEventListener("htmx:beforeSwap", function (e) {
    var t = e.detail.target;
    htmxFocus = t && t.id ? { saved: focusBefore(t), id: t.id } : null;
  });
  document.addEventListener("htmx:afterSettle", function () {
    if (htmxFocus) { focusAfter(htmxFocus.saved, htmxFocus.id); htmxFocus = null; }
  });
  // Header height for scroll-margin-top of anchored headings (app.css --header-h).
  function headerHeight() {
    var top = document.querySelector(".top");
    if (top) { document.documentElement.style.setProperty("--header-h", top.offsetHeight + "px"); }
  }
  headerHeight();
  window.addEventListener("resize", headerHeight);

  // ------------------------------------------------------------------ panels
  var panels = {};
  // Each panel is fetched on its own and swapped into whatever element carries its id when the
  // answer arrives (not the element that existed when the request started: an earlier swap may
  // have replaced it). htmx.ajax is not used here: its requests share one element (body) and
  // queue behind each other, so concurrent panel refreshes could be dropped or land in a
  // detached element.
  function refresh(id) {
    var st = panels[id] || (panels[id] = { busy: false, again: false });
    if (st.busy) { st.again = true; return; }
    var el = document.getElementById(id);
    if (!el || !el.dataset.src || el.hasAttribute("data-lazy")) { return; }
    st.busy = true;
    var done = function () {
      st.busy = false;
      document.dispatchEvent(new CustomEvent("elowen:refreshed", { detail: { id: id } }));
      if (st.again) { st.again = false; refresh(id); }
    };
    var src = el.dataset.src, swap = el.dataset.swap || "outerHTML";
    fetch(src, { credentials: "same-origin", headers: { "HX-Request": "true", "X-CSRF-Token": csrf } })
      .then(function (resp) {
        var to = resp.headers.get("HX-Redirect");
        if (to) { window.location.href = to; return null; }
        return resp.ok ? resp.text() : null;  // an error keeps the panel as it is
      })
      .then(function (html) {
        var target = document.getElementById(id);
        if (html !== null && target) {
          var saved = focusBefore(target);
          var kept = keptValues(target);
          window.htmx.swap(target, html, { swapStyle: swap });
          restoreValues(kept);
          focusAfter(saved, id);
        }
      })
      .then(done, done);
  }
  // Panels marked data-keep keep the user's choice in their selects across a refresh (when the
  // chosen option still exists).
  function keptValues(target) {
    var out = [];
    if (!target.hasAttribute("data-keep")) { return out; }
    target.querySelectorAll("select[id]").forEach(function (sel) { out.push([sel.id, sel.value]); });
    return out;
  }
  function restoreValues(kept) {
    kept.forEach(function (pair) {
      var sel = document.getElementById(pair[0]);
      if (sel && Array.prototype.some.call(sel.options, function (o) { return o.value === pair[1]; })) { sel.value = pair[1]; }
    });
  }
  function matches(patterns, type) {
    return patterns.split(",").some(function (p) {
      p = p.trim();
      if (!p) { return false; }
      if (p === "*") { return true; }
      if (p.charAt(p.length - 1) === "*") { return type.indexOf(p.slice(0, -1)) === 0; }
      return p === type;
    });
  }
  function resync() {
    if (document.querySelector("[data-resync=reload]")) { window.location.reload(); return; }
    document.querySelectorAll("[data-src][id]").forEach(function (el) { refresh(el.id); });
    document.dispatchEvent(new CustomEvent("elowen:resync"));
  }

  // ------------------------------------------------------------------ stream
  var live = { es: null, lastId: null, timer: null, retry: 1000, dropped: false, reconnectAt: null };
  var conn = document.getElementById("conn");
  function setState(state, text) {
    if (!conn) { return; }
    conn.dataset.state = state;
    conn.querySelector(".conn-text").textContent = text;
    document.body.dataset.stream = state;
  }
  function alive() {
    clearTimeout(live.timer);
    live.timer = setTimeout(function () { drop("silent"); }, windowMs);
  }
  function streamUrl() {
    if (live.lastId !== null) { return "/events?last_event_id=" + encodeURIComponent(live.lastId); }
    var tl = document.querySelector("[data-backlog]");
    return tl ? "/events?backlog=" + encodeURIComponent(tl.dataset.backlog) : "/events";
  }
  function connect() {
    live.reconnectAt = null;
    var es = new EventSource(streamUrl());
    live.es = es;
    alive();
    es.addEventListener("ready", function () {
      alive();
      live.retry = 1000;
      setState("live", "live");
      if (live.dropped) { live.dropped = false; resync(); }
    });
    es.addEventListener("heartbeat", alive);
    es.onmessage = function (m) {
      alive();
      if (m.lastEventId) { live.lastId = m.lastEventId; }
      var ev;
      try { ev = JSON.parse(m.data); } catch (err) { return; }
      ev.id = m.lastEventId ? Number(m.lastEventId) : null;
      document.dispatchEvent(new CustomEvent("elowen:event", { detail: ev }));
      document.querySelectorAll("[data-live][id]").forEach(function (el) {
        if (matches(el.dataset.live, ev.type)) { refresh(el.id); }
      });
    };
    es.onerror = function () { drop("error"); };
  }
  function drop(why) {
    clearTimeout(live.timer);
    if (live.es) { live.es.close(); live.es = null; }
    live.dropped = true;
    setState("reconnecting", "reconnecting…");
    if (live.reconnectAt === null) {
      live.reconnectAt = Date.now() + live.retry;
      setTimeout(connect, live.retry);
      live.retry = Math.min(live.retry * 2, 5000);
    }
  }

  // ------------------------------------------------------------------ waiting times
  // <time data-since="ISO"> shows how long ago that was ("4 min", "2 h 5 min"), the same
  // wording as the server's "waited" filter; refreshed every 30 s.
  function waited(iso) {
    var t = Date.parse(iso.indexOf("Z") === -1 && iso.indexOf("+") === -1 ? iso + "Z" : iso);
    if (isNaN(t)) { return null; }
    var m = Math.floor((Date.now() - t) / 60000);
    if (m < 1) { return "under a minute"; }
    if (m < 60) { return m + " min"; }
    if (m < 48 * 60) { return Math.floor(m / 60) + " h " + (m % 60) + " min"; }
    return Math.floor(m / 1440) + " days";
  }
  setInterval(function () {
    document.querySelectorAll("time[data-since]").forEach(function (el) {
      var text = waited(el.getAttribute("data-since"));
      if (text && el.textContent !== text) { el.textContent = text; }
    });
  }, 30000);

  window.Elowen = { refresh: refresh, resync: resync, csrf: csrf };
  if (loggedIn) { connect(); } else { setState("idle", "not logged in"); }
})();
