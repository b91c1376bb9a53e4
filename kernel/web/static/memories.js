/* The Memories page: "Open conversation" makes that conversation the chat's one (the answer
 * carries HX-Trigger: elowen:open-chat); the chat dock then opens on it, or reloads if open. */
(function () {
  "use strict";
  document.addEventListener("elowen:open-chat", function () {
    var dock = document.getElementById("chat-dock");
    var toggle = document.getElementById("chat-toggle");
    if (dock && toggle && dock.hidden) { toggle.click(); }
    var view = document.getElementById("chat-view");
    if (view && !view.hasAttribute("data-lazy") && window.Elowen) { window.Elowen.refresh("chat-view"); }
  });
})();
