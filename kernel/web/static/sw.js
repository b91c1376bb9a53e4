/* Elowen's service worker (served at /sw.js, scope /): shows web push notifications and opens
 * the page a notification points to when it is clicked.
 *
 * A push message's data is the notify plugin's JSON, decrypted by the browser (RFC 8291):
 *   {id, kind, title, body, url, urgency, tag, actions: [{action, title}], created_at}
 * Clicking the notification or one of its actions (Allow / Reject) focuses an open Elowen tab
 * or opens one at the notification's url, where the person answers (the worker holds no
 * session and never acts by itself).
 */
"use strict";

self.addEventListener("install", function () { self.skipWaiting(); });
self.addEventListener("activate", function (event) { event.waitUntil(self.clients.claim()); });

self.addEventListener("push", function (event) {
  var msg = {};
  try { msg = event.data ? event.data.json() : {}; } catch (err) { msg = { title: "Elowen", body: event.data ? event.data.text() : "" }; }
  var title = msg.title || "Elowen";
  var options = {
    body: msg.body || "",
    tag: msg.tag || undefined,
    icon: "/static/icons/icon-192.png",
    badge: "/static/icons/icon-192.png",
    data: { url: msg.url || "/", id: msg.id || null },
    actions: (msg.actions || []).slice(0, 2).map(function (a) { return { action: a.action, title: a.title }; }),
    requireInteraction: msg.urgency === "high",
    silent: msg.urgency === "very-low" || msg.urgency === "low"
  };
  event.waitUntil(self.registration.showNotification(title, options));
});

self.addEventListener("notificationclick", function (event) {
  event.notification.close();
  var data = event.notification.data || {};
  var target = new URL(data.url || "/", self.location.origin);
  if (target.origin !== self.location.origin) { target = new URL("/", self.location.origin); }
  if (event.action && data.id) { target.searchParams.set("notification", String(data.id)); target.searchParams.set("action", event.action); }
  event.waitUntil(self.clients.matchAll({ type: "window", includeUncontrolled: true }).then(function (list) {
    for (var i = 0; i < list.length; i++) {
      var c = list[i];
      if (new URL(c.url).origin === self.location.origin && "navigate" in c) {
        return c.focus().then(function (w) { return w.navigate(target.href); });
      }
    }
    return self.clients.openWindow(target.href);
  }));
});
