/* report.html: the cases view (every answer as a row: filters, search, sort, a page of rows
 * at a time, a row opens its case) and the criterion labelling of the binary judges. The
 * view's state lives in the address's hash (#cases?task=...&sort=...), so a link opens it
 * filtered and a reload keeps it. */
(function () {
  "use strict";
  var shared = window.evalmine, detail = shared.detail;
  var root = document.getElementById("cases");
  if (!shared.data || !root) return;
  var data = shared.data;
  var items = data.items, cases = data.case_list;
  var PAGE = 100;
  // "case" has no control: a link from "Label next" filters to one case and opens it.
  // "view" and "by": the grid's (grid.js), kept in the hash with the filters.
  var FILTERS = ["task", "case", "model", "outcome", "flagged", "flip", "failed", "differ", "q", "view", "by"];
  var state = {};
  var shown = [];
  var itemHay = new Array(items.length), caseHay = new Array(cases.length);
  var byCase = cases.map(function () { return []; });
  items.forEach(function (it, i) { byCase[it.case].push(i); });
  // A case whose answers do not all have one outcome ("different outcomes only").
  var differs = byCase.map(function (own) {
    for (var k = 1; k < own.length; k++) if (items[own[k]].outcome !== items[own[0]].outcome) return true;
    return false;
  });

  function el(id) { return document.getElementById(id); }
  function failedChecks(it) { var n = 0; for (var k = 0; k < it.checks.length; k++) if (!it.checks[k].passed) n++; return n; }
  function checksText(it) { return it.checks.length ? (it.checks.length - failedChecks(it)) + "/" + it.checks.length : "-"; }
  function num(v, digits) { return v === null || v === undefined ? "-" : v.toFixed(digits); }

  function fillSelect(id, values) {
    var select = el(id);
    values.forEach(function (v) { var o = document.createElement("option"); o.value = v; o.textContent = v; select.appendChild(o); });
  }
  function distinct(get) {
    var seen = {}, out = [];
    items.forEach(function (it) { var v = get(it); if (v !== "" && !seen.hasOwnProperty(v)) { seen[v] = 1; out.push(v); } });
    return out;
  }
  fillSelect("f-task", distinct(function (it) { return cases[it.case].task; }));
  fillSelect("f-model", distinct(function (it) { return it.model; }));
  fillSelect("f-outcome", distinct(function (it) { return it.outcome; }));

  var SORT_KEYS = {
    task: function (it) { return cases[it.case].task; },
    "case": function (it) { return cases[it.case]["case"]; },
    model: function (it) { return it.model; },
    outcome: function (it) { return it.outcome; },
    checks: function (it) { return it.checks.length ? (it.checks.length - failedChecks(it)) / it.checks.length : null; },
    score: function (it) { return it.score; },
    cost: function (it) { return it.cost; },
    latency: function (it) { return it.latency; },
    judge: function (it) { return it.judge || null; },
    flip: function (it) { return it.flip ? 1 : 0; },
    label: function (it) { return it.label || null; }
  };

  function matches(it, i, q) {
    if (state.task && cases[it.case].task !== state.task) return false;
    if (state["case"] && cases[it.case]["case"] !== state["case"]) return false;
    if (state.model && it.model !== state.model) return false;
    if (state.outcome && it.outcome !== state.outcome) return false;
    if (state.flagged && !it.flagged) return false;
    if (state.flip && !it.flip) return false;
    if (state.failed && !failedChecks(it)) return false;
    if (state.differ && !differs[it.case]) return false;
    if (q) {
      // the answer and its checks' names and messages; the case's id and prompt
      if (itemHay[i] === undefined) {
        itemHay[i] = it.checks.reduce(function (h, c) { return h + "\n" + c.name + ": " + c.message; }, it.text).toLowerCase();
      }
      if (itemHay[i].indexOf(q) < 0) {
        if (caseHay[it.case] === undefined) caseHay[it.case] = (cases[it.case]["case"] + "\n" + cases[it.case].prompt).toLowerCase();
        if (caseHay[it.case].indexOf(q) < 0) return false;
      }
    }
    return true;
  }

  function apply() {
    var q = (state.q || "").toLowerCase();
    shown = [];
    for (var i = 0; i < items.length; i++) if (matches(items[i], i, q)) shown.push(i);
    if (state.sort && SORT_KEYS[state.sort]) {
      var key = SORT_KEYS[state.sort], dir = state.dir === "desc" ? -1 : 1;
      var keys = {};
      shown.forEach(function (i) { keys[i] = key(items[i]); });
      shown.sort(function (a, b) {
        var x = keys[a], y = keys[b];
        if (x === y) return a - b;
        if (x === null || x === undefined) return 1;  // blanks last either way
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * dir;
      });
    }
    if (grid && grid.render(state, shown)) return;  // the grid view shows the cases instead
    var pages = Math.max(1, Math.ceil(shown.length / PAGE));
    state.page = Math.min(Math.max(0, state.page || 0), pages - 1);
    renderRows(pages);
  }

  // Each cell names its column (data-label): a phone shows the rows as cards.
  var HEADS = ["task", "case", "model", "outcome", "checks", "score", "cost", "latency", "judge", "flip", "label"];
  function cell(tr, value, cls) {
    var td = document.createElement("td");
    td.textContent = value;
    td.setAttribute("data-label", HEADS[tr.children.length]);
    if (cls) td.className = cls;
    tr.appendChild(td);
  }
  function renderRows(pages) {
    var body = el("cases-body");
    body.textContent = "";
    var from = state.page * PAGE;
    shown.slice(from, from + PAGE).forEach(function (i) {
      var it = items[i], c = cases[it.case];
      var tr = document.createElement("tr");
      tr.setAttribute("data-item", String(i));
      tr.tabIndex = 0;  // Tab reaches a row, Enter or Space opens its case
      cell(tr, c.task); cell(tr, c["case"]); cell(tr, it.model);
      cell(tr, it.outcome + (detail.truncated(it) ? " (truncated)" : ""));
      cell(tr, checksText(it), failedChecks(it) ? "num flag" : "num");
      cell(tr, num(it.score, 2), "num"); cell(tr, it.cost === null ? "-" : "$" + it.cost.toFixed(4), "num");
      cell(tr, it.latency === null ? "-" : Math.round(it.latency * 1000) + " ms", "num");
      cell(tr, it.judge, it.judge ? "" : "blank"); cell(tr, it.flip ? "flip" : "", it.flip ? "" : "blank");
      cell(tr, it.label, it.label ? "" : "blank");
      body.appendChild(tr);
    });
    var empty = el("cases-empty");
    empty.hidden = shown.length > 0;
    empty.textContent = state.q ? "no answer matches '" + state.q + "'" + (filtered() ? " with these filters" : "") : "no answer matches these filters";
    el("cases-count").textContent = shown.length + " of " + items.length + " answers";
    el("cases-page").textContent = "page " + (state.page + 1) + " of " + pages;
    el("cases-prev").disabled = state.page === 0;
    el("cases-next").disabled = state.page >= pages - 1;
    var heads = root.querySelectorAll("th[data-sort]");
    for (var k = 0; k < heads.length; k++) {
      var name = heads[k].getAttribute("data-sort");
      if (name === state.sort) heads[k].setAttribute("aria-sort", state.dir === "desc" ? "descending" : "ascending");
      else heads[k].removeAttribute("aria-sort");
    }
  }

  function checksList(checks) {
    var list = document.createElement("ul");
    list.className = "checks";
    shared.fillChecks(list, checks);
    return list;
  }
  function add(parent, tag, value, cls) {
    var node = document.createElement(tag);
    node.textContent = value;
    if (cls) node.className = cls;
    parent.appendChild(node);
    return node;
  }
  function openCase(ci) {
    var c = cases[ci];
    if (!c) return;
    state.open = ci;
    el("case-detail").hidden = false;
    var title = el("case-title");
    title.textContent = "";
    [c.task, c["case"]].forEach(function (v, k) { if (k) title.appendChild(document.createTextNode(" / ")); detail.add(title, "bdi", v); });
    el("case-prompt").textContent = c.prompt || "(the run's files hold no rendered prompt for this case)";
    var answers = el("case-answers");
    answers.textContent = "";
    var own = byCase[ci];
    var baseline = own.length ? items[own[0]] : null;  // the answers' order: baseline first
    own.forEach(function (i, k) {
      var it = items[i];
      var box = document.createElement("div");
      box.className = "case-answer";
      detail.line(box, "h4", ["", it.model, ": " + it.outcome + (it.score === null ? "" : ", score " + it.score.toFixed(2))]);
      detail.callLine(box, it);
      box.appendChild(checksList(it.checks));
      var textBox = add(box, "div", "", "answer-text");
      if (el("case-diff").checked && k > 0 && baseline) {
        shared.render(textBox, shared.diff(baseline.text, it.text).b, "diff-ins");
      } else if (el("case-diff").checked && k === 0 && own.length > 1) {
        shared.render(textBox, shared.diff(it.text, items[own[1]].text).a, "diff-del");
      } else {
        textBox.setAttribute("data-shown", detail.answer(textBox, it.text, el("case-markdown").checked));
      }
      if (el("case-raw").checked) detail.rawBlock(box, "stored answer (answers.jsonl)", detail.storedAnswer(it, c));
      answers.appendChild(box);
    });
    var judge = el("case-judge");
    judge.textContent = "";
    c.judge.forEach(function (j) {
      detail.line(judge, "h4", ["Judge: ", j.candidate, " vs ", j.baseline, ": " +
        (j.excluded ? "not judged (" + j.excluded + ")" : j.outcome) + (j.flip ? ", flip" : "") +
        (j.label ? "; your label: " + j.label : "")]);
      j.passes.forEach(function (p, k) {
        var dot = p.reason ? ". " : "", head = ["Pass " + (k + 1) + ", ", p.first];
        detail.line(judge, "p", head.concat(p.winner === "tie" || p.winner === "none"
          ? [" shown first: " + (p.winner === "tie" ? "tie" : "no verdict") + dot, p.reason]
          : [" shown first: ", p.winner, " better" + dot, p.reason]));
      });
      if (el("case-raw").checked) detail.rawBlock(judge, "the judge's passes as stored (pairs.jsonl)", j.passes.map(detail.storedPass));
    });
    writeHash();
  }

  // Export: every answer the filters and search show (all pages), in the shown order.
  var COLUMNS = ["task", "case", "model", "outcome", "checks_passed", "checks", "score", "cost_usd", "latency_s",
    "finish_reason", "judge", "flip", "label", "text"];
  function exportRow(i) {
    var it = items[i], c = cases[it.case];
    return { task: c.task, "case": c["case"], model: it.model, outcome: it.outcome,
      checks_passed: it.checks.length - failedChecks(it), checks: it.checks.length, score: it.score,
      cost_usd: it.cost, latency_s: it.latency, finish_reason: it.finish, judge: it.judge, flip: it.flip,
      label: it.label, text: it.text };
  }
  function csvCell(v) {
    if (v === null || v === undefined) return "";
    var s = String(v);
    // a cell a spreadsheet would run as a formula starts with a quote mark instead
    if (typeof v === "string" && /^[=+\-@\t\r]/.test(s)) s = "'" + s;
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  }
  function exported(kind) {
    var rows = shown.map(exportRow);
    if (kind === "json") return JSON.stringify(rows, null, 2) + "\n";
    return [COLUMNS.join(",")].concat(rows.map(function (r) {
      return COLUMNS.map(function (k) { return csvCell(r[k]); }).join(",");
    })).join("\r\n") + "\r\n";
  }
  function download(kind) {
    var blob = new Blob([exported(kind)], { type: kind === "json" ? "application/json" : "text/csv" });
    var link = document.createElement("a");
    link.href = URL.createObjectURL(blob);
    link.download = "evalmine-" + (data.run_id || "run") + "-cases." + kind;
    document.body.appendChild(link);
    link.click();
    link.remove();
    setTimeout(function () { URL.revokeObjectURL(link.href); }, 1000);
  }

  function filtered() {
    return FILTERS.some(function (f) { return f !== "q" && state[f]; });
  }

  function fromHash() {
    var hash = window.location.hash || "";
    if (hash.indexOf("#cases") !== 0) return false;
    var query = hash.indexOf("?") >= 0 ? hash.slice(hash.indexOf("?") + 1) : "";
    var params = new URLSearchParams(query);
    state = { sort: params.get("sort") || "", dir: params.get("dir") || "asc", page: parseInt(params.get("page") || "0", 10) || 0 };
    FILTERS.forEach(function (f) { var v = params.get(f); if (v) state[f] = v; });
    el("f-task").value = state.task || ""; el("f-model").value = state.model || ""; el("f-outcome").value = state.outcome || "";
    el("f-flagged").checked = !!state.flagged; el("f-flip").checked = !!state.flip; el("f-failed").checked = !!state.failed;
    if (el("f-differ")) el("f-differ").checked = !!state.differ;
    el("f-search").value = state.q || "";
    return params.get("open");
  }
  function writeHash() {
    var params = new URLSearchParams();
    FILTERS.forEach(function (f) { if (state[f]) params.set(f, state[f]); });
    if (state.sort) { params.set("sort", state.sort); params.set("dir", state.dir || "asc"); }
    if (state.page) params.set("page", String(state.page));
    if (state.open !== undefined && state.open !== null) params.set("open", String(state.open));
    var query = params.toString();
    history.replaceState(null, "", "#cases" + (query ? "?" + query : ""));
  }
  function fromControls() {
    state["case"] = "";
    state.task = el("f-task").value; state.model = el("f-model").value; state.outcome = el("f-outcome").value;
    state.flagged = el("f-flagged").checked ? "1" : ""; state.flip = el("f-flip").checked ? "1" : "";
    state.failed = el("f-failed").checked ? "1" : ""; state.q = el("f-search").value;
    state.differ = el("f-differ") && el("f-differ").checked ? "1" : "";
    state.page = 0;
    apply();
    writeHash();
  }
  function follow() {
    var open = fromHash();
    apply();
    if (open !== false && open !== null && open !== undefined && open !== "") openCase(parseInt(open, 10));
    else if (open !== false && state["case"] && shown.length) openCase(items[shown[0]].case);
    if (open !== false) root.scrollIntoView();
  }

  ["f-task", "f-model", "f-outcome", "f-flagged", "f-flip", "f-failed", "f-differ"].forEach(function (id) {
    if (el(id)) el(id).addEventListener("change", fromControls);
  });
  el("f-search").addEventListener("input", fromControls);
  el("f-search").addEventListener("keydown", function (e) {
    if (e.key !== "Escape") return;
    e.preventDefault();
    el("f-search").value = "";
    fromControls();
  });
  el("cases-prev").addEventListener("click", function () { state.page--; apply(); writeHash(); });
  el("cases-next").addEventListener("click", function () { state.page++; apply(); writeHash(); });
  ["case-diff", "case-markdown", "case-raw"].forEach(function (id) {
    el(id).addEventListener("change", function () { openCase(state.open); });
  });
  el("case-close").addEventListener("click", function () { el("case-detail").hidden = true; state.open = null; writeHash(); });
  root.querySelector("thead").addEventListener("click", function (e) {
    var head = e.target.closest ? e.target.closest("th[data-sort]") : null;
    var name = head && head.getAttribute("data-sort");
    if (!name) return;
    state.dir = state.sort === name && state.dir !== "desc" ? "desc" : "asc";
    state.sort = name;
    state.page = 0;
    apply();
    writeHash();
  });
  function openRow(row) {
    openCase(items[parseInt(row.getAttribute("data-item"), 10)].case);
    el("case-detail").scrollIntoView();
  }
  el("cases-body").addEventListener("click", function (e) {
    var row = e.target.closest ? e.target.closest("tr") : null;
    if (row) openRow(row);
  });
  el("cases-body").addEventListener("keydown", function (e) {
    if ((e.key === "Enter" || e.key === " ") && e.target.tagName === "TR") { e.preventDefault(); openRow(e.target); }
  });
  el("export-csv").addEventListener("click", function () { download("csv"); });
  el("export-json").addEventListener("click", function () { download("json"); });
  // The grid view (grid.js, loaded first) reads the same filtered, sorted answers.
  var grid = window.evalmineGrid ? window.evalmineGrid({
    items: items, cases: cases, byCase: byCase, sortKeys: SORT_KEYS, page: PAGE,
    state: function () { return state; },
    apply: function () { apply(); writeHash(); },
    open: function (ci) { openCase(ci); el("case-detail").scrollIntoView(); }
  }) : null;
  window.addEventListener("hashchange", follow);
  follow();
  window.evalmineCases = { shown: function () { return shown.slice(); }, apply: apply, exported: exported };
})();

/* Criterion labelling: one answer and one criterion at a time, PASS or FAIL, the judge's
 * verdict shown once chosen; choices kept in localStorage per run id. */
(function () {
  "use strict";
  var shared = window.evalmine;
  var root = document.getElementById("criterion-labelling");
  if (!shared.data || !root || !shared.data.criterion_items.length) return;
  var data = shared.data;
  var items = data.criterion_items;
  var storeKey = "evalmine-criteria:" + data.run_id;
  var saved = shared.load(storeKey, {});
  var pos = 0;
  function el(id) { return document.getElementById(id); }
  function id(it) { return it.fields; }
  function countChosen() { var n = 0; items.forEach(function (it) { if (saved[id(it)]) n++; }); return n; }

  function show() {
    var it = items[pos], choice = saved[id(it)] ? saved[id(it)].label : null;
    el("crit-position").textContent = "answer " + (pos + 1) + " of " + items.length;
    el("crit-progress").textContent = countChosen() + " chosen here";
    el("crit-where").textContent = it.task + " / " + it["case"];
    el("crit-existing").textContent = it.labelled ? "Your label in the suite: " + it.labelled : "";
    el("crit-name").textContent = it.criterion;
    el("crit-text").textContent = it.text;
    el("crit-prompt").textContent = it.prompt || "(no rendered prompt stored for this case)";
    el("crit-answer").textContent = it.answer;
    ["PASS", "FAIL"].forEach(function (c) { el("crit-" + c).setAttribute("aria-pressed", String(choice === c)); });
    el("crit-note").value = (saved[id(it)] && saved[id(it)].note) || "";
    var body = el("crit-judge-body");
    body.textContent = "";
    if (choice) {
      el("crit-judge-summary").textContent = "Judge verdict: " + it.judge.label;
      var line = document.createElement("p");
      line.textContent = it.judge.critique;
      body.appendChild(line);
      el("crit-judge").open = true;
    } else {
      el("crit-judge-summary").textContent = "Judge verdict (shown once you have chosen)";
      el("crit-judge").open = false;
    }
  }
  function choose(label) {
    saved[id(items[pos])] = { label: label, note: el("crit-note").value };
    shared.store(storeKey, saved);
    if (el("crit-advance").checked && nextOpen()) { shared.revealTop(el("crit-top")); return; }
    show();
  }
  // The next answer neither chosen here nor labelled in the suite.
  function nextOpen() {
    for (var k = 1; k <= items.length; k++) {
      var i = (pos + k) % items.length;
      if (!saved[id(items[i])] && !items[i].labelled) { pos = i; show(); return true; }
    }
    return false;
  }
  function move(step) { pos = Math.min(items.length - 1, Math.max(0, pos + step)); show(); }
  function copy() {
    var rows = items.filter(function (it) { return saved[id(it)]; }).map(function (it) {
      var s = saved[id(it)];
      return { fields: it.fields, label: "label: " + s.label, note: s.note, labelled: it.labelled };
    });
    var yaml = shared.labelsYaml(rows, "criterion label(s)");
    window.evalmineCriterionYaml = yaml.text;
    shared.copyLabels(yaml, el("crit-yaml"), el("crit-status"), "answers");
  }
  el("crit-PASS").addEventListener("click", function () { choose("PASS"); });
  el("crit-FAIL").addEventListener("click", function () { choose("FAIL"); });
  el("crit-prev").addEventListener("click", function () { move(-1); });
  el("crit-next").addEventListener("click", function () { move(1); });
  el("crit-copy").addEventListener("click", copy);
  el("crit-open").addEventListener("click", nextOpen);
  shared.bindPersistedCheckbox(el("crit-advance"), "evalmine-advance");
  el("crit-note").addEventListener("input", function (e) {
    var s = saved[id(items[pos])];
    if (s) { s.note = e.target.value; shared.store(storeKey, saved); }
  });
  document.addEventListener("keydown", function (e) {
    if (shared.typing(e) || !shared.inUse("criterion-labelling")) return;
    if (e.key === "p") { e.preventDefault(); choose("PASS"); }
    else if (e.key === "f") { e.preventDefault(); choose("FAIL"); }
  });
  root.hidden = false;
  if (items[0].labelled) { pos = items.length - 1; if (!nextOpen()) { pos = 0; show(); } } else show();
})();
