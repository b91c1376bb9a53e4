/* The live terminal of a task's agent: xterm.js fed by the web front end's WebSocket relay
 * (WS /terminal/<session>?input=0|1). The first frame says whether typing is allowed. */
(function () {
  "use strict";
  var box = document.getElementById("terminal");
  if (!box || !window.Terminal) { return; }
  var wantInput = box.dataset.input === "1";
  var term = new window.Terminal({ cols: 200, rows: 40, fontSize: 12, convertEol: true, disableStdin: true, cursorBlink: false,
                                   scrollback: 2000, theme: { background: "#14161a" } });
  term.open(box);
  var mode = document.getElementById("term-mode");
  var ws = null;
  var input = false;
  var closedByPage = false;

  function connect() {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    ws = new WebSocket(scheme + location.host + "/terminal/" + encodeURIComponent(box.dataset.session) + "?input=" + (wantInput ? "1" : "0"));
    ws.binaryType = "arraybuffer";
    var first = true;
    ws.onmessage = function (m) {
      if (first && typeof m.data === "string" && m.data.charAt(0) === "{") {
        first = false;
        try { input = !!JSON.parse(m.data).input; } catch (e) { input = false; }
        term.options.disableStdin = !input;
        if (mode) { mode.textContent = input ? "You may type into this agent." : "Read-only."; }
        return;
      }
      first = false;
      term.write(typeof m.data === "string" ? m.data : new Uint8Array(m.data));
    };
    ws.onclose = function () {
      if (!closedByPage) { box.dataset.connected = "0"; setTimeout(connect, 2000); }
    };
    ws.onopen = function () { box.dataset.connected = "1"; };
  }
  term.onData(function (d) { if (input && ws && ws.readyState === 1) { ws.send(d); } });
  window.addEventListener("pagehide", function () { closedByPage = true; if (ws) { ws.close(); } });
  connect();
})();
