/* The chat dock: the brain's active conversation (pointer-based), streamed turns (NDJSON
 * relayed by the web front end from POST /brain/turn), slash commands (handled by the brain),
 * and approval prompts inline. */
(function () {
  "use strict";
  var dock = document.getElementById("chat-dock");
  var toggle = document.getElementById("chat-toggle");
  if (!dock || !toggle) { return; }
  var form = document.getElementById("chat-form");
  var input = document.getElementById("chat-input");
  var out = document.getElementById("chat-stream");
  var send = document.getElementById("chat-send");
  var streaming = false;
  var opened = false;
  var noModel = false;

  // Send is enabled only when a message can go: not during a turn, not while the brain is off,
  // and — while no model is set up ([data-no-model] in the view) — only for a /command (the
  // brain answers those itself).
  function sendable(text) {
    return !input.disabled && !streaming && (!noModel || text.trim().charAt(0) === "/");
  }
  function update() { send.disabled = !sendable(input.value); }
  // While the brain plugin is off (the dock's view says so: [data-brain-off]) nothing can be
  // sent: the input and Send are disabled until a refresh shows the brain back.
  function setBrainOff(off) {
    input.disabled = off;
    dock.dataset.brain = off ? "off" : "on";
    update();  // a reload during a turn must not re-enable Send
  }
  function setNoModel(off) {
    noModel = off;
    dock.dataset.model = off ? "none" : "ok";
    if (off) { input.setAttribute("aria-describedby", "chat-no-model"); } else { input.removeAttribute("aria-describedby"); }
    update();
  }
  input.addEventListener("input", update);
  // When the conversation view reloads (after a turn, brain.done), it holds the finished turn:
  // the streamed copies of its user/assistant/tool lines go (command output and errors, which
  // the history does not keep, stay), and the view scrolls to its newest message.
  var view = document.getElementById("chat-view");
  function settle() {
    if (!streaming) {
      Array.prototype.slice.call(out.querySelectorAll(".msg.user, .msg.assistant, .msg.tool")).forEach(function (el) {
        if (!(el.classList.contains("user") && el.textContent.trim().charAt(0) === "/")) { el.remove(); }  // a command stays with its output
      });
      // an error the brain stored (a note in the view) is shown once, from the view
      var stored = Array.prototype.map.call(view.querySelectorAll("[data-note]"), function (el) { return el.getAttribute("data-note"); });
      Array.prototype.slice.call(out.querySelectorAll(".msg.error")).forEach(function (el) {
        if (stored.some(function (t) { return t.indexOf(el.textContent) !== -1; })) { el.remove(); }
      });
    }
    view.scrollTop = view.scrollHeight;
  }
  document.addEventListener("elowen:refreshed", function (e) {
    if (e.detail && e.detail.id === "chat-view") {
      setBrainOff(!!document.querySelector("#chat-view [data-brain-off]"));
      setNoModel(!!document.querySelector("#chat-view [data-no-model]"));
      settle();
    }
  });

  function setOpen(open) {
    dock.hidden = !open;
    toggle.setAttribute("aria-expanded", open ? "true" : "false");
    document.body.classList.toggle("dock-open", open);
    if (open && !opened) {
      opened = true;
      ["tools", "chat-view"].forEach(function (id) {
        var el = document.getElementById(id);
        if (el) { el.removeAttribute("data-lazy"); window.Elowen.refresh(id); }
      });
    }
    if (open) { input.focus(); } else { toggle.focus(); }
  }
  toggle.addEventListener("click", function () { setOpen(dock.hidden); });
  document.getElementById("chat-close").addEventListener("click", function () { setOpen(false); });
  dock.addEventListener("keydown", function (e) { if (e.key === "Escape") { setOpen(false); } });

  function line(cls, text) {
    var li = document.createElement("div");
    li.className = "msg " + cls;
    li.textContent = text;
    out.appendChild(li);
    out.scrollTop = out.scrollHeight;
    return li;
  }

  function approvalPrompt(a) {
    var box = document.createElement("div");
    box.className = "approval-inline";
    var title = document.createElement("p");
    title.textContent = (a.kind === "question" ? "Question: " + (a.question || "") : "Allow " + (a.tool || "this tool call") + "?");
    box.appendChild(title);
    var send = function (body) {
      var data = new URLSearchParams(body);
      fetch("/actions/approvals/" + a.id, { method: "POST", headers: { "X-CSRF-Token": window.Elowen.csrf }, body: data })
        .then(function (r) { return r.text(); })
        .then(function (html) { box.innerHTML = html; });
    };
    if (a.kind === "question") {
      var inp = document.createElement("input");
      inp.setAttribute("aria-label", "Your answer");
      var b = document.createElement("button");
      b.className = "btn primary"; b.type = "button"; b.textContent = "Answer";
      b.addEventListener("click", function () { send({ answer: inp.value }); });
      box.appendChild(inp); box.appendChild(b);
    } else {
      [["allow", "Allow", "primary"], ["reject", "Reject", "danger"]].forEach(function (x) {
        var btn = document.createElement("button");
        btn.className = "btn " + x[2]; btn.type = "button"; btn.textContent = x[1];
        btn.addEventListener("click", function () { send({ decision: x[0] }); });
        box.appendChild(btn);
      });
    }
    out.appendChild(box);
    out.scrollTop = out.scrollHeight;
  }

  var current = null;
  function handle(ev) {
    switch (ev.type) {
      case "brain.delta":
        if (!current) { current = line("assistant", ""); }
        current.textContent += ev.text || "";
        out.scrollTop = out.scrollHeight;
        break;
      case "brain.message": {
        var m = ev.message || ev;
        if (m.role === "assistant" && typeof m.content === "string") {
          if (!current) { current = line("assistant", ""); }
          current.textContent = m.content;
          current = null;
        }
        break;
      }
      case "brain.tool":
        line("tool", "⚙ " + (ev.name || ev.tool || "tool") + (ev.status ? " · " + ev.status : ""));
        current = null;
        break;
      case "brain.approval": approvalPrompt(ev.approval || ev); break;
      case "brain.command": line("system", ev.text || ""); break;
      case "brain.error": line("error", ev.message || "error"); break;
      case "brain.aborted": line("system", "Stopped."); break;
      default: break;
    }
  }

  function submit() {
    var text = input.value.trim();
    if (!text || !sendable(text)) { return; }
    input.value = "";
    line("user", text);
    streaming = true;
    current = null;
    send.disabled = true;  // one turn at a time: Stop ends it
    dock.setAttribute("aria-busy", "true");
    fetch("/chat/turn", {
      method: "POST",
      headers: { "Content-Type": "application/json", "X-CSRF-Token": window.Elowen.csrf },
      body: JSON.stringify({ text: text })
    }).then(function (resp) {
      if (!resp.ok) {
        return resp.json().then(function (b) {
          line("error", (b.error && b.error.message) || ("error " + resp.status));
          if (b.error && b.error.code === "brain_off") { input.value = text; setBrainOff(true); window.Elowen.refresh("chat-view"); }
        },
                                function () { line("error", "error " + resp.status); });
      }
      var reader = resp.body.getReader();
      var decoder = new TextDecoder();
      var buf = "";
      var pump = function () {
        return reader.read().then(function (r) {
          if (r.done) { return; }
          buf += decoder.decode(r.value, { stream: true });
          var lines = buf.split("\n");
          buf = lines.pop();
          lines.forEach(function (l) { if (l.trim()) { try { handle(JSON.parse(l)); } catch (e) { /* a partial line */ } } });
          return pump();
        });
      };
      return pump();
    }).catch(function () { line("error", "The connection broke."); })
      .then(function () {
        streaming = false;
        update();
        dock.removeAttribute("aria-busy");
        window.Elowen.refresh("chat-view");  // the stored turn replaces the streamed copy (settle)
      });
  }
  form.addEventListener("submit", function (e) { e.preventDefault(); submit(); });
  input.addEventListener("keydown", function (e) {
    if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); submit(); }
  });
  document.getElementById("chat-abort").addEventListener("click", function () {
    fetch("/chat/abort", { method: "POST", headers: { "X-CSRF-Token": window.Elowen.csrf } });
  });
})();
