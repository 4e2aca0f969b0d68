/* report.html: what the page's scripts share. The page's data is parsed once (with 10,000
 * cases it is the largest cost of opening the page), the word-level diff of two answers, a
 * list of check results, and the labels' YAML for the suite.
 * Every user string reaches the page through textContent or a form value, never innerHTML. */
window.evalmine = (function () {
  "use strict";
  var source = document.getElementById("evalmine-data");
  var data = source ? JSON.parse(source.textContent) : null;

  // Words with the white space after them; compared without it, shown with it.
  function tokens(text) { return text.match(/^\s+|\S+\s*/g) || []; }

  // Word-level diff: the common prefix and suffix are cut off, then the longest common
  // subsequence of the words between (a table of n x m counts; past 4 million cells, the
  // middles are shown as changed whole rather than freezing the page).
  function diff(a, b) {
    var x = tokens(a), y = tokens(b);
    var kx = x.map(function (t) { return t.trim(); }), ky = y.map(function (t) { return t.trim(); });
    var start = 0;
    while (start < x.length && start < y.length && kx[start] === ky[start]) start++;
    var endX = x.length, endY = y.length;
    while (endX > start && endY > start && kx[endX - 1] === ky[endY - 1]) { endX--; endY--; }
    var outA = [], outB = [];
    function push(out, text, changed) {
      var last = out[out.length - 1];
      if (last && last[1] === changed) last[0] += text; else out.push([text, changed]);
    }
    for (var i = 0; i < start; i++) { push(outA, x[i], false); push(outB, y[i], false); }
    var n = endX - start, m = endY - start;
    if (n * m > 4000000) {
      for (i = start; i < endX; i++) push(outA, x[i], true);
      for (i = start; i < endY; i++) push(outB, y[i], true);
    } else {
      var w = m + 1, table = new Int32Array((n + 1) * w);
      for (var p = n - 1; p >= 0; p--) {
        for (var q = m - 1; q >= 0; q--) {
          table[p * w + q] = kx[start + p] === ky[start + q]
            ? table[(p + 1) * w + q + 1] + 1
            : Math.max(table[(p + 1) * w + q], table[p * w + q + 1]);
        }
      }
      p = 0; q = 0;
      while (p < n || q < m) {
        if (p < n && q < m && kx[start + p] === ky[start + q]) {
          push(outA, x[start + p], false); push(outB, y[start + q], false); p++; q++;
        } else if (q >= m || (p < n && table[(p + 1) * w + q] >= table[p * w + q + 1])) {
          push(outA, x[start + p], true); p++;
        } else {
          push(outB, y[start + q], true); q++;
        }
      }
    }
    for (i = endX; i < x.length; i++) push(outA, x[i], false);
    for (i = endY; i < y.length; i++) push(outB, y[i], false);
    return { a: outA, b: outB };
  }

  // Fill an element with segments of text, the changed ones in a span of ``cls``.
  function render(element, segments, cls) {
    element.textContent = "";
    segments.forEach(function (s) {
      if (!s[1]) { element.appendChild(document.createTextNode(s[0])); return; }
      var span = document.createElement("span");
      span.className = cls;
      span.textContent = s[0];
      element.appendChild(span);
    });
  }

  function store(key, value) {
    try { window.localStorage.setItem(key, JSON.stringify(value)); } catch (e) { /* private mode */ }
  }
  function load(key, fallback) {
    try { return JSON.parse(window.localStorage.getItem(key) || "null") || fallback; } catch (e) { return fallback; }
  }
  // Keys go to a field being typed in; a checkbox, radio or button keeps no keys (after a
  // click on "advance on choice" the shortcuts go on working).
  var KEYLESS = { checkbox: 1, radio: 1, button: 1, submit: 1, reset: 1 };
  function typing(e) {
    var t = e.target || {}, tag = t.tagName || "";
    if (e.ctrlKey || e.metaKey || e.altKey) return true;
    if (tag === "INPUT") return !KEYLESS[(t.type || "").toLowerCase()];
    return tag === "TEXTAREA" || tag === "SELECT" || !!t.isContentEditable;
  }
  // The panel in use: the last one clicked or focused while it is still on screen, else the
  // one filling most of the screen. Each panel's keys act only when it is the one in use
  // (pressing 1 in the criterion panel labelled an off-screen pair).
  var PANELS = ["labelling", "criterion-labelling", "cases"], lastPanel = null;
  function panelOf(node) {
    for (; node && node !== document; node = node.parentNode) if (node.id && PANELS.indexOf(node.id) >= 0) return node.id;
    return null;
  }
  function onScreen(id) {
    var node = document.getElementById(id);
    if (!node || node.hidden) return 0;
    var r = node.getBoundingClientRect();
    return Math.max(0, Math.min(r.bottom, window.innerHeight) - Math.max(r.top, 0));
  }
  ["pointerdown", "focusin"].forEach(function (type) {
    document.addEventListener(type, function (e) { var p = panelOf(e.target); if (p) lastPanel = p; }, true);
  });
  // With none clicked, the labelling panel most on screen, else the first on the page.
  function inUse(id) {
    if (lastPanel && onScreen(lastPanel) > 0) return lastPanel === id;
    var best = null, most = 0;
    PANELS.slice(0, 2).forEach(function (p) {
      var node = document.getElementById(p), seen = onScreen(p);
      if (!best && node && !node.hidden) best = p;
      if (seen > most) { most = seen; best = p; }
    });
    return best === id;
  }
  // A checkbox whose state is kept in localStorage under ``key``: "advance on choice" is one
  // setting for both labellings (ticking one ticks the other), kept across runs.
  var bound = {};
  function bindPersistedCheckbox(box, key) {
    (bound[key] = bound[key] || []).push(box);
    box.checked = load(key, false) === true;
    box.addEventListener("change", function () {
      store(key, box.checked);
      bound[key].forEach(function (other) { other.checked = box.checked; });
    });
  }
  // Bring the top of ``node`` into view when it is above the screen (after a choice on a
  // phone the next pair's title was 394 px above it).
  function revealTop(node) {
    if (node && node.getBoundingClientRect().top < 0) node.scrollIntoView({ block: "start" });
  }

  // Fill a list with an answer's check results (the labelling's answers and a case's).
  function fillChecks(list, checks) {
    list.textContent = "";
    if (!checks.length) { var none = document.createElement("li"); none.textContent = "no checks"; list.appendChild(none); }
    checks.forEach(function (c) {
      var li = document.createElement("li");
      li.className = c.passed ? "pass" : "fail";
      li.textContent = (c.passed ? "\u2713 " : "\u2717 ") + c.name + (c.message ? ": " + c.message : "");
      list.appendChild(li);
    });
  }

  function plural(n, one, many) { return n + " " + (n === 1 ? one : many); }

  // The lines for the suite from the choices made here (``rows``: {fields, label: "prefer: X"
  // or "label: PASS", note, labelled}; ``what``: "label(s)"): new entries, and comments for
  // those the suite labels already (a second label of one is a load error: edit that entry).
  function labelsYaml(rows, what) {
    var lines = [], comments = [];
    rows.forEach(function (r) {
      var entry = "{" + r.fields + ", " + r.label + (r.note ? ", note: " + JSON.stringify(r.note) : "") + "}";
      if (r.labelled) comments.push("  # already in the suite, edit that entry: " + entry);
      else lines.push("  - " + entry);
    });
    var where = data.suite_file || "the suite file";
    var head = ["# " + lines.length + " " + what + " from run " + data.run_id + ": paste " +
      (data.labels_key ? "at the end of the labels: list of " : "at the end of ") + where +
      " (or into its labels_path file)"];
    if (!data.labels_key) head.push("labels:");
    return { text: head.concat(lines, comments).join("\n") + "\n", entries: lines.length, comments: comments.length, where: where };
  }

  // Put ``yaml`` (from labelsYaml) into the text area and the clipboard when the browser
  // allows, and say in ``status`` what it holds (``subjects``: what a comment's entry is of).
  function copyLabels(yaml, area, status, subjects) {
    area.value = yaml.text;
    var counted = plural(yaml.entries, "new entry", "new entries") + " and " +
      plural(yaml.comments, "comment", "comments") + " (" + subjects + " the suite labels already: edit those entries)";
    var goes = "; paste under labels: in " + yaml.where;
    status.textContent = counted + " below" + goes;
    if (navigator.clipboard && navigator.clipboard.writeText) {
      navigator.clipboard.writeText(yaml.text).then(function () {
        status.textContent = counted + " copied to the clipboard (and below)" + goes;
      }, function () { /* no clipboard (file:// or headless): the text area has it */ });
    }
  }

  return {
    data: data, diff: diff, render: render, store: store, load: load, typing: typing,
    bindPersistedCheckbox: bindPersistedCheckbox, inUse: inUse, revealTop: revealTop, fillChecks: fillChecks, labelsYaml: labelsYaml,
    copyLabels: copyLabels
  };
})();
