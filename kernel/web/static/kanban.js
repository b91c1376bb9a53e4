/* The kanban board's drag and drop (HTML5, no library).
 *
 * A card dropped on another column runs the move the board's data-moves table allows (the
 * server's table, kernel/web/views/kanban.py move_of): onto Cancelled it cancels, onto Open it
 * reopens, the same requests as the card's Cancel and Reopen buttons (which stay the keyboard
 * way). Any other drop is refused: the reason is shown in #flash-kanban (a live region) and the
 * card stays where it was. The board itself moves the card when the task's event arrives (the
 * live refresh), so what is shown is always the daemon's state.
 *
 * Listeners are on the document: the board's live refreshes replace its cards and columns.
 */
(function () {
  "use strict";
  var dragged = null;  // {id, state} of the card being dragged

  function board() { return document.getElementById("kanban"); }
  function moves() {
    try { return JSON.parse(board().dataset.moves || "{}"); } catch (e) { return {}; }
  }
  function label(state) { return state.replace("_", " ").replace(/^./, function (c) { return c.toUpperCase(); }); }
  function announce(text) {
    var el = document.getElementById("kanban-announce");
    if (el) { el.textContent = text; }
  }
  function flash(ok, text) {
    var slot = document.getElementById("flash-kanban");
    if (!slot) { return; }
    var p = document.createElement("p");
    p.className = "flash " + (ok ? "ok" : "err");
    p.setAttribute("role", ok ? "status" : "alert");
    p.textContent = text;
    slot.replaceChildren(p);
  }
  function column(el) { return el && el.closest ? el.closest("#kanban section[data-drop]") : null; }
  function clearMarks() {
    document.querySelectorAll("#kanban .drop-ok, #kanban .drop-no").forEach(function (c) { c.classList.remove("drop-ok", "drop-no"); });
  }
  function moveOf(dst) {
    var table = moves()[dragged.state] || {};
    return table[dst] || { reason: "is already here." };
  }

  document.addEventListener("dragstart", function (e) {
    var card = e.target && e.target.closest ? e.target.closest("#kanban .task-card[draggable]") : null;
    if (!card) { return; }
    dragged = { id: card.dataset.task, state: card.dataset.state };
    e.dataTransfer.effectAllowed = "move";
    e.dataTransfer.setData("text/plain", "#" + dragged.id);
    card.classList.add("dragging");
    var table = moves()[dragged.state] || {};
    var to = Object.keys(table).filter(function (d) { return table[d].action; }).map(label);
    announce("Dragging task #" + dragged.id + " (" + label(dragged.state) + "). " +
      (to.length ? "It can be dropped on: " + to.join(", ") + "." : "No column takes it."));
  });
  document.addEventListener("dragend", function (e) {
    var card = e.target && e.target.closest ? e.target.closest(".task-card") : null;
    if (card) { card.classList.remove("dragging"); }
    clearMarks();
    dragged = null;
  });
  document.addEventListener("dragover", function (e) {
    var col = column(e.target);
    if (!col || !dragged) { return; }
    e.preventDefault();  // every column is a drop target: a refused drop says why
    var ok = !!moveOf(col.dataset.state).action;
    e.dataTransfer.dropEffect = "move";  // "none" would swallow the drop, and with it the reason
    if (!col.classList.contains(ok ? "drop-ok" : "drop-no")) {
      clearMarks();
      col.classList.add(ok ? "drop-ok" : "drop-no");
    }
  });
  document.addEventListener("drop", function (e) {
    var col = column(e.target);
    if (!col || !dragged) { return; }
    e.preventDefault();
    clearMarks();
    var id = dragged.id, dst = col.dataset.state, move = moveOf(dst);
    if (dragged.state === dst) { announce("Task #" + id + " stays in " + label(dst) + "."); return; }
    if (!move.action) {
      flash(false, "Task #" + id + " " + move.reason);
      var card = document.querySelector("#kanban .task-card[data-task='" + id + "']");
      if (card) {
        card.classList.add("refused");
        setTimeout(function () { card.classList.remove("refused"); }, 1500);
      }
      return;
    }
    if (move.action === "cancel" && !window.confirm("Cancel task #" + id + "? Its agent is stopped.")) {
      flash(false, "Task #" + id + " not moved: cancelling was not confirmed.");
      return;
    }
    var csrf = window.Elowen ? window.Elowen.csrf : "";
    fetch("/actions/tasks/" + id + "/" + move.action, {
      method: "POST", credentials: "same-origin", headers: { "HX-Request": "true", "X-CSRF-Token": csrf },
    }).then(function (resp) { return resp.text(); }).then(function (html) {
      var slot = document.getElementById("flash-kanban");
      if (slot) { slot.innerHTML = html; }  // the server's own status fragment (escaped there)
      if (window.Elowen) { window.Elowen.refresh("kanban"); }
    }, function () { flash(false, "Task #" + id + " not moved: the server did not answer."); });
  });
})();
