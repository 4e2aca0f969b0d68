/* report.html: blind labelling. Every user string reaches the page through textContent or
 * a form value, never through innerHTML. Progress is kept in localStorage per run id. */
(function () {
  "use strict";
  var source = document.getElementById("evalmine-data");
  var root = document.getElementById("labelling");
  if (!source || !root) return;
  var data = JSON.parse(source.textContent);
  var pairs = data.pairs;
  if (!pairs.length) return;
  var storeKey = "evalmine-labels:" + data.run_id;
  var saved = {};
  try { saved = JSON.parse(window.localStorage.getItem(storeKey) || "{}") || {}; } catch (e) { saved = {}; }
  var suiteOrder = pairs.map(function (_, i) { return i; });
  var order = data.next_order.length ? data.next_order : suiteOrder;
  var pos = 0;

  function el(id) { return document.getElementById(id); }
  function text(id, value) { el(id).textContent = value; }
  function chosen(p) { var s = saved[p.id]; return s && s.choice ? s.choice : null; }
  function persist() {
    try { window.localStorage.setItem(storeKey, JSON.stringify(saved)); } catch (e) { /* private mode */ }
  }
  function countChosen() {
    var n = 0;
    for (var i = 0; i < pairs.length; i++) { if (chosen(pairs[i])) n++; }
    return n;
  }
  var labelledHere = countChosen();

  function fillChecks(id, checks) {
    var list = el(id);
    list.textContent = "";
    if (!checks.length) { var none = document.createElement("li"); none.textContent = "no checks"; list.appendChild(none); }
    checks.forEach(function (c) {
      var li = document.createElement("li");
      li.className = c.passed ? "pass" : "fail";
      li.textContent = (c.passed ? "\u2713 " : "\u2717 ") + c.name + (c.message ? ": " + c.message : "");
      list.appendChild(li);
    });
  }

  function show() {
    var p = pairs[order[pos]];
    var choice = chosen(p);
    text("lab-position", "pair " + (pos + 1) + " of " + order.length);
    text("lab-progress", labelledHere + " chosen here" + (data.already_labelled ? ", " + data.already_labelled + " already labelled in the suite" : ""));
    text("lab-where", p.task + " / " + p.case);
    var tags = el("lab-tags");
    tags.textContent = "";
    p.tags.forEach(function (t) { var s = document.createElement("span"); s.textContent = t; tags.appendChild(s); });
    text("lab-prompt", p.prompt);
    text("lab-a", p.A.text);
    text("lab-b", p.B.text);
    fillChecks("lab-a-checks", p.A.checks);
    fillChecks("lab-b-checks", p.B.checks);
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
    show();
  }
  function move(step) { pos = Math.min(order.length - 1, Math.max(0, pos + step)); show(); }
  function nextOpen() {
    for (var k = 1; k <= order.length; k++) {
      var i = (pos + k) % order.length;
      if (!chosen(pairs[order[i]])) { pos = i; show(); return; }
    }
  }

  function labelsYaml() {
    var lines = [];
    var comments = [];
    var preferName = function (p, c) { return c === "tie" ? "tie" : p.prefer[c]; };
    pairs.forEach(function (p) {
      var s = saved[p.id];
      if (!s || !s.choice) return;
      var entry = "{" + p.fields + ", prefer: " + preferName(p, s.choice) + (s.note ? ", note: " + JSON.stringify(s.note) : "") + "}";
      if (p.labelled) comments.push("  # already in the suite, edit that entry: " + entry);
      else lines.push("  - " + entry);
    });
    var head = data.labels_key ? [] : ["labels:"];
    return head.concat(lines, comments).join("\n") + "\n";
  }
  function copyLabels() {
    var yaml = labelsYaml();
    var area = el("labels-yaml");
    area.value = yaml;
    window.evalmineLabelsYaml = yaml;
    var count = yaml.split("\n").filter(function (l) { return l.indexOf("  - {") === 0; }).length;
    text("copy-status", count + " labels below");
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(yaml).then(function () {
        text("copy-status", count + " labels copied to the clipboard (and below)");
      }, function () { /* no clipboard (file:// or headless): the text area has it */ });
    }
  }

  el("choose-A").addEventListener("click", function () { choose("A"); });
  el("choose-tie").addEventListener("click", function () { choose("tie"); });
  el("choose-B").addEventListener("click", function () { choose("B"); });
  el("lab-prev").addEventListener("click", function () { move(-1); });
  el("lab-next").addEventListener("click", function () { move(1); });
  el("lab-open").addEventListener("click", nextOpen);
  el("copy-labels").addEventListener("click", copyLabels);
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
    var tag = (e.target && e.target.tagName) || "";
    if (tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || e.ctrlKey || e.metaKey || e.altKey) return;
    var action = { "1": function () { choose("A"); }, "2": function () { choose("tie"); }, "3": function () { choose("B"); },
      "ArrowRight": function () { move(1); }, "ArrowLeft": function () { move(-1); } }[e.key];
    if (action) { e.preventDefault(); action(); }
  });
  root.hidden = false;
  show();
})();
