/* The live terminal of a task's agent: xterm.js fed by the web front end's WebSocket relay
 * (WS /terminal/<session>?input=0|1). The first frame is a JSON line {"input": bool, "cols"?,
 * "rows"?} saying whether the server lets this connection type and the agent pane's size (the
 * terminal is resized to it, so a 200×50 pane is drawn whole); the bytes xterm.js produces for each key
 * (Enter = "\r", arrows = escape sequences, pastes bracketed when the agent asked for it) are
 * sent as they are and typed into the agent's tmux pane byte for byte.
 *
 * Input is only ever offered to admins and the task's owner (data-can-type="1"); they get an
 * "Allow typing" toggle button (aria-pressed), off when the page opens. Switching it reconnects
 * with a new ticket of the other kind, so a read-only connection can never type, whatever the
 * page does.
 *
 * Keyboard safety: Tab never lands in the terminal (xterm.js's input textarea is taken out of
 * the tab order). The terminal box itself is one tab stop; Enter on it (or a click into it)
 * enters the terminal, and only then do keys go to the agent (Tab included: CLIs complete with
 * it). Esc leaves the terminal (focus back on the box); Shift+Esc sends Esc to the agent. While
 * the terminal is not entered, a Tab is never typed into it, even by a stray focus. */
(function () {
  "use strict";
  var box = document.getElementById("terminal");
  if (!box || !window.Terminal) { return; }
  var canType = box.dataset.canType === "1";
  var wantInput = false;  // "Allow typing" starts off, whatever the page says
  // lineHeight 1.2: at 1.0 the DOM renderer's rows clip the underscore of the line above
  // (fake_created.txt read "fake created.txt"). The font is vendored (DejaVu Sans Mono 2.37:
  // box drawing, ❯, ⏺, ✻ … as the agent CLIs draw them).
  var term = new window.Terminal({ cols: 200, rows: 40, fontSize: 12, lineHeight: 1.2, convertEol: true, disableStdin: true, cursorBlink: false,
                                   fontFamily: "'Elowen Mono', 'DejaVu Sans Mono', 'Liberation Mono', monospace",
                                   scrollback: 2000, theme: { background: "#14161a" } });
  term.open(box);
  var entered = false;  // the user deliberately entered the terminal (click, or Enter on the box)
  function untab() { if (term.textarea) { term.textarea.setAttribute("tabindex", "-1"); } }
  untab();
  box.setAttribute("tabindex", "0");
  box.dataset.entered = "0";
  function setEntered(on) { entered = on; box.dataset.entered = on ? "1" : "0"; }
  box.addEventListener("mousedown", function () { setEntered(true); }, true);  // before xterm.js focuses
  box.addEventListener("keydown", function (e) {
    if (e.target === box && e.key === "Enter") { e.preventDefault(); setEntered(true); term.focus(); }
  });
  if (term.textarea) {
    term.textarea.addEventListener("blur", function () { setEntered(false); });
    term.textarea.addEventListener("focus", function () { if (!entered) { term.blur(); box.focus(); } });
  }
  term.attachCustomKeyEventHandler(function (e) {
    if (!entered) { return false; }  // never type into the agent without an explicit entry
    if (e.key === "Escape" && !e.shiftKey) {
      if (e.type === "keydown") { e.preventDefault(); term.blur(); box.focus(); }
      return false;
    }
    if (e.key === "Tab" && !input) { return false; }  // read-only: Tab moves on through the page
    return true;
  });
  if (document.fonts && document.fonts.load) {
    // measure again once the vendored font is there (xterm.js measures the cell at open)
    document.fonts.load("12px 'Elowen Mono'").then(function () {
      var family = term.options.fontFamily;
      term.options.fontFamily = "monospace";
      term.options.fontFamily = family;
      queueFit();
    }, function () {});
  }

  // Fit the pane's columns into the card: the font shrinks (never grows past MAX_FONT) until
  // the drawn screen is as wide as the box's content; below MIN_FONT it stays there and the
  // box scrolls sideways (overflow-x: auto in app.css). Rerun on every size change.
  var MAX_FONT = 12, MIN_FONT = 11;  // below 11 px it is unreadable: the box scrolls instead
  function screenWidth() {
    var screen = box.querySelector(".xterm-screen");
    return screen ? screen.getBoundingClientRect().width : 0;
  }
  function fit() {
    var style = window.getComputedStyle(box);
    var avail = box.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    var width = screenWidth();
    if (avail <= 0 || width <= 0) { return; }
    var size = term.options.fontSize;
    var want = Math.max(MIN_FONT, Math.min(MAX_FONT, Math.floor(size * avail / width * 2) / 2));
    if (want !== size) { term.options.fontSize = want; }
    // cell widths round to device pixels: step down until it fits (or the minimum is reached)
    while (screenWidth() > avail + 0.5 && term.options.fontSize > MIN_FONT) {
      term.options.fontSize = Math.max(MIN_FONT, term.options.fontSize - 0.5);
    }
    box.dataset.fontSize = String(term.options.fontSize);
  }
  var fitQueued = false;
  function queueFit() {
    if (fitQueued) { return; }
    fitQueued = true;
    window.requestAnimationFrame(function () { fitQueued = false; fit(); });
  }
  if (window.ResizeObserver) { new window.ResizeObserver(queueFit).observe(box); }
  window.addEventListener("resize", queueFit);
  fit();
  var mode = document.getElementById("term-mode");
  var toggle = document.getElementById("term-input");
  var ws = null;
  var input = false;
  var closedByPage = false;
  var retry = null;
  var refused = false;

  function show() {
    box.dataset.input = input ? "1" : "0";
    if (toggle) { toggle.setAttribute("aria-pressed", wantInput ? "true" : "false"); }
    if (!mode) { return; }
    if (input) { mode.textContent = "You may type into this agent."; }
    else if (refused) { mode.textContent = "Read-only: the daemon did not allow typing into this agent."; }
    else if (canType) { mode.textContent = "Read-only. Press \u201cAllow typing\u201d to type into this agent."; }
    else { mode.textContent = "Read-only: only an admin or the task's owner may type into this agent."; }
  }

  function connect() {
    retry = null;
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var sock = new WebSocket(scheme + location.host + "/terminal/" + encodeURIComponent(box.dataset.session) + "?input=" + (wantInput ? "1" : "0"));
    ws = sock;
    sock.binaryType = "arraybuffer";
    var first = true;
    var screenNext = true;  // the first frame after the hello is the whole screen
    sock.onmessage = function (m) {
      if (sock !== ws) { return; }
      if (first && typeof m.data === "string" && m.data.charAt(0) === "{") {
        first = false;
        var hello = {};
        try { hello = JSON.parse(m.data); } catch (e) { hello = {}; }
        input = !!hello.input;
        if (hello.cols > 0 && hello.rows > 0 && (hello.cols !== term.cols || hello.rows !== term.rows)) {
          term.resize(hello.cols, hello.rows);  // draw at the agent pane's own size
        }
        fit();
        refused = wantInput && !input;  // the daemon did not grant input after all
        if (refused) { wantInput = false; }
        term.reset();  // the daemon sends the whole screen next: draw it on a clean terminal
        term.options.disableStdin = !input;
        show();
        return;
      }
      var data = m.data;
      if (screenNext && typeof data === "string" && data.slice(-1) === "\n") {
        // the daemon's screen capture ends every line with a newline: the last one would
        // scroll the whole screen up a row and hide the agent's top line in the scrollback
        data = data.slice(0, -1);
      }
      first = false;
      screenNext = false;
      term.write(typeof data === "string" ? data : new Uint8Array(data));
    };
    sock.onclose = function () {
      if (sock !== ws) { return; }  // replaced on purpose (the toggle)
      input = false;
      term.options.disableStdin = true;
      box.dataset.connected = "0";
      show();
      if (!closedByPage && retry === null) { retry = setTimeout(connect, 2000); }
    };
    sock.onopen = function () { if (sock === ws) { box.dataset.connected = "1"; } };
  }

  function reconnect() {
    if (retry !== null) { clearTimeout(retry); retry = null; }
    var old = ws;
    ws = null;
    input = false;
    term.options.disableStdin = true;
    box.dataset.connected = "0";
    if (old) { old.close(); }
    connect();
  }

  term.onData(function (d) { if (input && ws && ws.readyState === 1) { ws.send(d); } });
  if (toggle) {
    toggle.addEventListener("click", function () {
      wantInput = !wantInput;
      refused = false;
      show();
      reconnect();
      if (wantInput) { setEntered(true); term.focus(); }  // the click is the explicit entry
    });
  }
  window.addEventListener("pagehide", function () { closedByPage = true; if (ws) { ws.close(); } });
  connect();
})();
