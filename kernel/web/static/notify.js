/* In-page notifications and the installable web app.
 *
 * - A notify.created event on the page's stream (live.js's "elowen:event") shows a toast in
 *   #notify-toasts (role=status, so screen readers announce it) and updates the unread count
 *   (elements [data-notify-unread]). A toast closes on its button, on Escape, or after 10 s
 *   (20 s for urgency high); clicking its link opens the notification's url.
 * - The service worker /sw.js is registered (scope /) on every page of a logged-in session.
 * - A button [data-push-enable] subscribes this device to web push: the VAPID key comes from
 *   /notify/key, the subscription (PushSubscription.toJSON()) goes to /notify/subscribe.
 */
(function () {
  "use strict";
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  if (!csrf) { return; }  // not logged in

  function box() {
    var el = document.getElementById("notify-toasts");
    if (!el) {
      el = document.createElement("div");
      el.id = "notify-toasts";
      el.className = "notify-toasts";
      el.setAttribute("role", "status");
      el.setAttribute("aria-live", "polite");
      document.body.appendChild(el);
    }
    return el;
  }
  function safeUrl(url) {
    if (typeof url !== "string" || !url) { return null; }
    if (url.charAt(0) === "/" && url.charAt(1) !== "/") { return url; }
    return /^https?:\/\//.test(url) ? url : null;
  }
  function toast(n) {
    var el = document.createElement("div");
    el.className = "notify-toast";
    el.dataset.kind = n.kind || "message";
    el.dataset.urgency = n.urgency || "normal";
    el.dataset.id = String(n.id);
    var title = document.createElement("strong");
    title.className = "notify-title";
    title.textContent = n.title || "";
    var body = document.createElement("p");
    body.className = "notify-body";
    body.textContent = n.body || "";
    var close = document.createElement("button");
    close.type = "button";
    close.className = "notify-close";
    close.setAttribute("aria-label", "Dismiss notification");
    close.textContent = "×";
    close.addEventListener("click", function () { el.remove(); });
    el.appendChild(close);
    el.appendChild(title);
    el.appendChild(body);
    var url = safeUrl(n.url);
    if (url) {
      var link = document.createElement("a");
      link.className = "notify-open";
      link.href = url;
      link.textContent = "Open";
      link.addEventListener("click", function () { markRead(n.id); });
      el.appendChild(link);
    }
    box().appendChild(el);
    setTimeout(function () { el.remove(); }, n.urgency === "high" ? 20000 : 10000);
  }
  function setUnread(count) {
    document.querySelectorAll("[data-notify-unread]").forEach(function (el) {
      el.textContent = count > 0 ? String(count) : "";
      el.hidden = !(count > 0);
    });
  }
  function post(url, body) {
    return fetch(url, { method: "POST", credentials: "same-origin", headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf }, body: JSON.stringify(body || {}) });
  }
  function markRead(id) { if (id) { post("/notify/read/" + encodeURIComponent(id)); } }

  document.addEventListener("elowen:event", function (e) {
    var ev = e.detail || {};
    if (ev.type !== "notify.created" || !ev.data || !ev.data.notification) { return; }
    toast(ev.data.notification);
    if (typeof ev.data.unread === "number") { setUnread(ev.data.unread); }
  });
  document.addEventListener("keydown", function (e) {
    if (e.key === "Escape") { var t = document.querySelector(".notify-toast:last-child"); if (t) { t.remove(); } }
  });

  // Opened from a push notification (sw.js adds ?notification=ID[&action=approve|reject]):
  // mark it read; an action chosen there is confirmed on this page, never carried out blind.
  var params = new URLSearchParams(window.location.search);
  if (/^[0-9]+$/.test(params.get("notification") || "")) {
    markRead(params.get("notification"));
    var chosen = params.get("action");
    if (chosen === "approve" || chosen === "reject") {
      toast({ id: params.get("notification"), kind: "escalation", urgency: "normal", title: chosen === "approve" ? "You chose Allow" : "You chose Reject", body: "Confirm it here: answer the waiting item below." });
    }
  }

  // ------------------------------------------------------------------ installable app, push
  var registration = null;
  if ("serviceWorker" in navigator) {
    navigator.serviceWorker.register("/sw.js", { scope: "/" }).then(function (r) { registration = r; document.body.dataset.sw = "registered"; },
      function () { document.body.dataset.sw = "failed"; });
  }
  function keyBytes(b64) {
    var s = (b64 + "===".slice((b64.length + 3) % 4)).replace(/-/g, "+").replace(/_/g, "/");
    var raw = atob(s), out = new Uint8Array(raw.length);
    for (var i = 0; i < raw.length; i++) { out[i] = raw.charCodeAt(i); }
    return out;
  }
  function say(text) { var s = document.getElementById("push-status"); if (s) { s.textContent = text; } }
  function enablePush() {
    if (!registration || !("PushManager" in window)) { say("This browser cannot receive web push here."); return; }
    Notification.requestPermission().then(function (perm) {
      if (perm !== "granted") { say("Notifications are blocked for this site."); return null; }
      return fetch("/notify/key", { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (k) {
        if (!k.public_key) { throw new Error((k.error && k.error.message) || "no key"); }
        return registration.pushManager.subscribe({ userVisibleOnly: true, applicationServerKey: keyBytes(k.public_key) });
      }).then(function (sub) {
        var body = sub.toJSON();
        body.device = navigator.userAgent.slice(0, 200);
        return post("/notify/subscribe", body);
      }).then(function (r) { say(r && r.ok ? "This device receives notifications." : "The subscription was refused."); });
    }).catch(function (err) { say("Could not subscribe: " + err.message); });
  }
  document.querySelectorAll("[data-notify-read-all]").forEach(function (b) {
    b.addEventListener("click", function () { post("/notify/read-all").then(function () { window.location.reload(); }); });
  });
  document.querySelectorAll("[data-push-enable]").forEach(function (b) { b.addEventListener("click", enablePush); });
})();
