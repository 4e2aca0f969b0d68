/* report.html: blind labelling. Every user string reaches the page through textContent or
 * a form value, never through innerHTML. Progress is kept in localStorage per run id. */
(function () {
  "use strict";
  var shared = window.evalmine;
  var root = document.getElementById("labelling");
  if (!shared.data || !root) return;
  var data = shared.data;
  var pairs = data.pairs;
  if (!pairs.length) return;
  var storeKey = "evalmine-labels:" + data.run_id;
  var saved = shared.load(storeKey, {});
  var suiteOrder = pairs.map(function (_, i) { return i; });
  var order = data.next_order.length ? data.next_order : suiteOrder;
  var pos = 0;

  function el(id) { return document.getElementById(id); }
  function text(id, value) { el(id).textContent = value; }
  function chosen(p) { var s = saved[p.id]; return s && s.choice ? s.choice : null; }
  function persist() { shared.store(storeKey, saved); }
  function countChosen() {
    var n = 0;
    for (var i = 0; i < pairs.length; i++) { if (chosen(pairs[i])) n++; }
    return n;
  }
  var labelledHere = countChosen();

  // An entry names the cases view's rows when they hold the same answer or prompt.
  function side(s) { return s.item === undefined ? s : data.items[s.item]; }
  function promptOf(p) { return p.case_row === undefined ? p.prompt : data.case_list[p.case_row].prompt; }

  function show() {
    var p = pairs[order[pos]];
    var choice = chosen(p);
    var a = side(p.A), b = side(p.B);
    text("lab-position", "pair " + (pos + 1) + " of " + order.length);
    text("lab-progress", labelledHere + " chosen here" + (data.already_labelled ? ", " + data.already_labelled + " already labelled in the suite" : ""));
    text("lab-where", p.task + " / " + p.case);
    var tags = el("lab-tags");
    tags.textContent = "";
    p.tags.forEach(function (t) { var s = document.createElement("span"); s.textContent = t; tags.appendChild(s); });
    text("lab-prompt", promptOf(p));
    if (el("lab-diff").checked) {
      var parts = shared.diff(a.text, b.text);
      shared.render(el("lab-a"), parts.a, "diff-del");
      shared.render(el("lab-b"), parts.b, "diff-ins");
    } else {
      text("lab-a", a.text);
      text("lab-b", b.text);
    }
    shared.fillChecks(el("lab-a-checks"), a.checks);
    shared.fillChecks(el("lab-b-checks"), b.checks);
    text("lab-existing", p.labelled ? "Your label in the suite: " + (p.labelled === "tie" ? "tie" : "prefer " + p.labelled) : "");
    ["A", "tie", "B"].forEach(function (c) { el("choose-" + c).setAttribute("aria-pressed", String(choice === c)); });
    var note = el("lab-note");
    note.value = (saved[p.id] && saved[p.id].note) || "";
    var judge = el("lab-judge");
    var body = el("lab-judge-body");
    body.textContent = "";
    if (choice) {
      text("lab-judge-summary", "Judge verdict: " + (p.judge.choice === "tie" ? "tie" : "prefers " + p.judge.choice) + " (" + p.judge.outcome + ")");
      p.judge.passes.forEach(function (j) {
        var line = document.createElement("p");
        line.textContent = j.first + " shown first: " + (j.winner === "tie" ? "tie" : j.winner + " better") + (j.reason ? ". " + j.reason : "");
        body.appendChild(line);
      });
      judge.open = true;
    } else {
      text("lab-judge-summary", "Judge verdict (shown once you have chosen)");
      judge.open = false;
    }
  }

  function choose(c) {
    var p = pairs[order[pos]];
    if (!chosen(p)) labelledHere++;
    saved[p.id] = { choice: c, note: el("lab-note").value };
    persist();
    // "advance on choice": straight on to the next unlabelled pair (the judge's verdict
    // of the one just chosen is then a "previous" away)
    if (el("lab-advance").checked && nextOpen()) { shared.revealTop(el("lab-top")); return; }
    show();
  }
  function move(step) { pos = Math.min(order.length - 1, Math.max(0, pos + step)); show(); }
  function nextOpen() {
    for (var k = 1; k <= order.length; k++) {
      var i = (pos + k) % order.length;
      if (!chosen(pairs[order[i]])) { pos = i; show(); return true; }
    }
    return false;
  }

  function copyLabels() {
    var preferName = function (p, c) { return c === "tie" ? "tie" : p.prefer[c]; };
    var rows = pairs.filter(chosen).map(function (p) {
      var s = saved[p.id];
      return { fields: p.fields, label: "prefer: " + preferName(p, s.choice), note: s.note, labelled: p.labelled };
    });
    var yaml = shared.labelsYaml(rows, "label(s)");
    window.evalmineLabelsYaml = yaml.text;
    shared.copyLabels(yaml, el("labels-yaml"), el("copy-status"), "pairs");
  }
  function toggleDiff() { el("lab-diff").checked = !el("lab-diff").checked; show(); }

  el("choose-A").addEventListener("click", function () { choose("A"); });
  el("choose-tie").addEventListener("click", function () { choose("tie"); });
  el("choose-B").addEventListener("click", function () { choose("B"); });
  el("lab-prev").addEventListener("click", function () { move(-1); });
  el("lab-next").addEventListener("click", function () { move(1); });
  el("lab-open").addEventListener("click", nextOpen);
  el("copy-labels").addEventListener("click", copyLabels);
  el("lab-diff").addEventListener("change", show);
  shared.bindPersistedCheckbox(el("lab-advance"), "evalmine-advance");
  el("lab-order").addEventListener("change", function (e) {
    var next = data.next_order.length ? data.next_order : suiteOrder;
    // the audit sample in its own random order: a prefix of it is still a random sample
    var audit = data.audit_order && data.audit_order.length ? data.audit_order : next;
    order = e.target.value === "suite" ? suiteOrder : (e.target.value === "audit" ? audit : next);
    pos = 0;
    show();
  });
  el("lab-note").addEventListener("input", function (e) {
    var p = pairs[order[pos]];
    if (saved[p.id]) { saved[p.id].note = e.target.value; persist(); }
  });
  document.addEventListener("keydown", function (e) {
    if (shared.typing(e) || !shared.inUse("labelling")) return;
    var action = { "1": function () { choose("A"); }, "2": function () { choose("tie"); }, "3": function () { choose("B"); },
      "ArrowRight": function () { move(1); }, "ArrowLeft": function () { move(-1); },
      "n": nextOpen, "c": copyLabels, "d": toggleDiff }[e.key];
    if (action) { e.preventDefault(); action(); }
  });
  root.hidden = false;
  show();
})();
