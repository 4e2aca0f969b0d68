/* report.html: what the page's scripts share. The page's data is parsed once (with 10,000
 * cases it is the largest cost of opening the page), and the word-level diff of two answers.
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
  function typing(e) {
    var tag = (e.target && e.target.tagName) || "";
    return tag === "INPUT" || tag === "TEXTAREA" || tag === "SELECT" || e.ctrlKey || e.metaKey || e.altKey;
  }
  return { data: data, diff: diff, render: render, store: store, load: load, typing: typing };
})();
