/* report.html: the cases view as a grid, a row per task x case and a column per contender
 * (model or variant, baseline first), each cell that answer's outcome, score, checks and the
 * judge's verdict against the baseline. It shows the list view's filtered, searched and
 * sorted answers (cases.js) by case: a case is a row when any of its answers matches, the
 * answers that do not are dimmed; a contender's header sorts the rows by that contender's
 * answer (the list's sort key, score when none). A page of rows at a time, as the list. */
window.evalmineGrid = function (api) {
  "use strict";
  var items = api.items, cases = api.cases, byCase = api.byCase;
  function el(id) { return document.getElementById(id); }
  var wrap = el("grid-wrap"), table = el("cases-table");
  if (!wrap || !table) return null;
  var listWrap = table.parentNode;
  var contenders = [], column = {};
  items.forEach(function (it) {
    if (!column.hasOwnProperty(it.model)) { column[it.model] = contenders.length; contenders.push(it.model); }
  });

  function add(parent, tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined) node.textContent = text;
    if (cls) node.className = cls;
    parent.appendChild(node);
    return node;
  }
  function operable(node, act) {  // focusable, Enter or Space acts as a click does
    node.tabIndex = 0;
    node.addEventListener("click", act);
    node.addEventListener("keydown", function (e) {
      if (e.key === "Enter" || e.key === " ") { e.preventDefault(); act(e); }
    });
  }

  var head = el("grid-head");
  var caseHead = add(head, "th", "task / case", "grid-case");
  caseHead.setAttribute("data-sort", "case");
  caseHead.setAttribute("scope", "col");
  operable(caseHead, function () { sortBy("", "case"); });
  contenders.forEach(function (name, k) {
    var th = add(head, "th", name + (k === 0 ? " (baseline)" : ""));
    th.setAttribute("data-by", name);
    th.setAttribute("scope", "col");
    th.title = "sort the cases by this contender's answer";
    operable(th, function () { sortBy(name, null); });
  });
  function sortBy(by, sort) {
    var state = api.state();
    var key = sort || state.sort || "score";
    state.dir = (state.by || "") === by && state.sort === key && state.dir !== "desc" ? "desc" : "asc";
    state.by = by;
    state.sort = key;
    state.page = 0;
    api.apply();
  }

  function failed(it) { var n = 0; for (var k = 0; k < it.checks.length; k++) if (!it.checks[k].passed) n++; return n; }
  function answerOf(ci, k) {
    var own = byCase[ci];
    for (var j = 0; j < own.length; j++) if (column[items[own[j]].model] === k) return own[j];
    return -1;
  }
  function fill(td, i, k, matched) {
    if (i < 0) { td.textContent = "no answer"; td.className = "grid-cell dim"; return; }
    var it = items[i], bad = failed(it);
    td.className = "grid-cell " + (it.outcome === "passed" ? "out-pass" : "out-bad") + (matched ? "" : " dim");
    add(td, "span", it.outcome, "grid-outcome");
    add(td, "span", "score " + (it.score === null ? "-" : it.score.toFixed(2)) + ", checks " +
      (it.checks.length ? (it.checks.length - bad) + "/" + it.checks.length : "-"), bad ? "flag" : "");
    var judged = it.judge ? it.judge + (it.flip && it.judge !== "flip" ? ", flip" : "") : "not judged";
    add(td, "span", k === 0 ? "baseline" : "judge: " + judged, it.flip ? "flag" : "");
  }

  function render(state, shown) {
    var on = state.view === "grid";
    wrap.hidden = !on;
    listWrap.hidden = on;
    el("view-grid").setAttribute("aria-pressed", String(on));
    el("view-list").setAttribute("aria-pressed", String(!on));
    if (!on) return false;
    var matched = new Uint8Array(items.length), seen = new Uint8Array(cases.length), rows = [];
    shown.forEach(function (i) {
      matched[i] = 1;
      var ci = items[i].case;
      if (!seen[ci]) { seen[ci] = 1; rows.push(ci); }
    });
    var by = state.by && column.hasOwnProperty(state.by) ? column[state.by] : -1;
    if (by >= 0) {
      var key = api.sortKeys[state.sort] || api.sortKeys.score, dir = state.dir === "desc" ? -1 : 1;
      var keys = rows.map(function (ci) { var i = answerOf(ci, by); return i < 0 ? null : key(items[i]); });
      var order = rows.map(function (_, r) { return r; });
      order.sort(function (a, b) {
        var x = keys[a], y = keys[b];
        if (x === y) return a - b;
        if (x === null || x === undefined) return 1;  // blanks last either way
        if (y === null || y === undefined) return -1;
        return (x < y ? -1 : 1) * dir;
      });
      rows = order.map(function (r) { return rows[r]; });
    }
    var pages = Math.max(1, Math.ceil(rows.length / api.page));
    state.page = Math.min(Math.max(0, state.page || 0), pages - 1);
    var body = el("grid-body");
    body.textContent = "";
    var from = state.page * api.page;
    rows.slice(from, from + api.page).forEach(function (ci) {
      var c = cases[ci], tr = add(body, "tr");
      tr.setAttribute("data-case", String(ci));
      tr.setAttribute("aria-label", "open " + c.task + " / " + c["case"]);
      var first = add(tr, "th", undefined, "grid-case");
      first.setAttribute("scope", "row");
      add(first, "span", c.task, "grid-task");
      add(first, "span", c["case"]);
      for (var k = 0; k < contenders.length; k++) fill(add(tr, "td"), answerOf(ci, k), k, matched[answerOf(ci, k)]);
      operable(tr, function () { api.open(ci); });
    });
    el("cases-count").textContent = rows.length + " of " + cases.length + " cases (" +
      shown.length + " of " + items.length + " answers)";
    el("cases-page").textContent = "page " + (state.page + 1) + " of " + pages;
    el("cases-prev").disabled = state.page === 0;
    el("cases-next").disabled = state.page >= pages - 1;
    var heads = head.querySelectorAll("th");
    for (var h = 0; h < heads.length; h++) {
      var mine = h === 0 ? by < 0 && state.sort === "case" : heads[h].getAttribute("data-by") === state.by;
      if (mine) heads[h].setAttribute("aria-sort", state.dir === "desc" ? "descending" : "ascending");
      else heads[h].removeAttribute("aria-sort");
    }
    return true;
  }

  function choose(view) {
    var state = api.state();
    state.view = view;
    state.page = 0;
    api.apply();
  }
  el("view-list").addEventListener("click", function () { choose(""); });
  el("view-grid").addEventListener("click", function () { choose("grid"); });
  return { render: render };
};
