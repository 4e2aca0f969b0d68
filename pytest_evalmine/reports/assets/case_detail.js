/* report.html: how a case's answer is shown. JSON answers pretty-printed, Markdown as text
 * unless "render Markdown" is ticked, then built element by element (textContent only: no
 * markup of the answer's is ever parsed, no script can run, links are not followed), user
 * strings in composed lines isolated in <bdi> (a U+202E in a model name reversed the rest of
 * the line), the call's figures, a truncated answer marked. */
(function () {
  "use strict";
  var shared = window.evalmine;
  // Finish reasons of an answer cut at max_tokens (OpenAI "length", Anthropic "max_tokens").
  var TRUNCATED = { length: 1, max_tokens: 1, MAX_TOKENS: 1 };

  function add(parent, tag, value, cls) {
    var node = document.createElement(tag);
    if (value !== undefined && value !== null) node.textContent = value;
    if (cls) node.className = cls;
    parent.appendChild(node);
    return node;
  }
  // A line of text and user strings: ``parts`` alternate plain text and isolated strings.
  function line(parent, tag, parts, cls) {
    var node = add(parent, tag, null, cls);
    parts.forEach(function (part, k) {
      if (k % 2) add(node, "bdi", part);
      else if (part) node.appendChild(document.createTextNode(part));
    });
    return node;
  }

  function prettyJson(text) {
    var t = text.trim();
    if (!(t.charAt(0) === "{" || t.charAt(0) === "[")) return null;
    try { return JSON.stringify(JSON.parse(t), null, 2); } catch (e) { return null; }
  }

  // Inline Markdown: `code`, **strong**, *em* / _em_, [text](url) shown as "text (url)".
  var INLINE = /(`[^`]+`)|(\*\*[^*]+\*\*)|(\*[^*\s][^*]*\*|_[^_\s][^_]*_)|(\[[^\]]+\]\([^)\s]+\))/;
  function inline(parent, text) {
    while (text) {
      var m = INLINE.exec(text);
      if (!m) { parent.appendChild(document.createTextNode(text)); return; }
      if (m.index) parent.appendChild(document.createTextNode(text.slice(0, m.index)));
      var s = m[0];
      if (m[1]) add(parent, "code", s.slice(1, -1));
      else if (m[2]) inline(add(parent, "strong"), s.slice(2, -2));
      else if (m[3]) inline(add(parent, "em"), s.slice(1, -1));
      else {
        var cut = s.indexOf("](");
        inline(add(parent, "span", null, "md-link"), s.slice(1, cut));
        parent.appendChild(document.createTextNode(" (" + s.slice(cut + 2, -1) + ")"));
      }
      text = text.slice(m.index + s.length);
    }
  }
  function markdown(target, text) {
    target.textContent = "";
    var lines = text.split(/\r?\n/), list = null, para = null, k = 0;
    function close() { list = null; para = null; }
    while (k < lines.length) {
      var ln = lines[k], m;
      if (/^\s*```/.test(ln)) {
        close();
        var code = [];
        for (k++; k < lines.length && !/^\s*```/.test(lines[k]); k++) code.push(lines[k]);
        add(add(target, "pre"), "code", code.join("\n"));
      } else if ((m = /^(#{1,6})\s+(.*)$/.exec(ln))) {
        close(); inline(add(target, "h" + Math.min(6, m[1].length + 3)), m[2]);
      } else if ((m = /^\s*([-*+]|\d+[.)])\s+(.*)$/.exec(ln))) {
        var kind = /\d/.test(m[1]) ? "ol" : "ul";
        if (!list || list.tagName.toLowerCase() !== kind) { para = null; list = add(target, kind); }
        inline(add(list, "li"), m[2]);
      } else if ((m = /^>\s?(.*)$/.exec(ln))) {
        close(); inline(add(target, "blockquote"), m[1]);
      } else if (!ln.trim()) {
        close();
      } else {
        list = null;
        if (para) para.appendChild(document.createTextNode(" ")); else para = add(target, "p");
        inline(para, ln);
      }
      k++;
    }
  }

  // An answer's text into ``box``: pretty JSON when it is JSON, rendered Markdown on request,
  // else as it came. Returns how it was shown.
  function answer(box, text, renderMarkdown) {
    var pretty = prettyJson(text);
    if (pretty !== null) { box.textContent = pretty; return "json"; }
    if (renderMarkdown) { box.classList.add("markdown"); markdown(box, text); return "markdown"; }
    box.textContent = text;
    return "text";
  }

  function truncated(it) { return !!TRUNCATED[it.finish]; }
  // The call's figures: tokens in and out, finish reason, latency, cost.
  function callLine(parent, it) {
    var t = it.tokens || {}, bits = [];
    if (it.tokens) bits.push("tokens in " + (t.input_tokens || 0) + ((t.cached_input_tokens || 0) ? " (+" + t.cached_input_tokens + " cached)" : "") + ", out " + (t.output_tokens || 0));
    bits.push("finish " + (it.finish || "unknown"));
    bits.push("latency " + (it.latency === null ? "-" : Math.round(it.latency * 1000) + " ms"));
    bits.push("cost " + (it.cost === null ? "-" : "$" + it.cost.toFixed(4)));
    var node = add(parent, "p", bits.join("; "), "call");
    if (truncated(it)) add(node, "strong", " TRUNCATED at max_tokens: the answer is cut off", "flag");
    return node;
  }

  // The answers.jsonl row as stored (nulls and ``parsed`` left out): the row's own fields
  // put back beside the rest the page carries.
  function storedAnswer(it, c) {
    var out = { task: c.task, "case": c["case"] };
    Object.keys(it.raw || {}).forEach(function (k) { out[k] = it.raw[k]; });
    out.outcome = it.outcome; out.text = it.text;
    if (!out.checks) out.checks = it.checks;
    if (it.score !== null) out.score = it.score;
    if (it.finish) out.finish_reason = it.finish;
    if (it.tokens) out.tokens = it.tokens;
    if (it.cost !== null) out.cost_usd = it.cost;
    if (it.latency !== null) out.latency_s = it.latency;
    return out;
  }
  function storedPass(p) {
    var out = {};
    Object.keys(p.raw || {}).forEach(function (k) { out[k] = p.raw[k]; });
    if (out.reason === undefined && p.reason && p.reason !== out.error) out.reason = p.reason;
    return out;
  }
  function rawBlock(parent, what, value) {
    var box = add(parent, "details", null, "raw");
    add(box, "summary", what);
    add(box, "pre", JSON.stringify(value, null, 2), "raw-json");
    box.open = true;
    return box;
  }

  shared.detail = {
    add: add, line: line, answer: answer, markdown: markdown, callLine: callLine,
    truncated: truncated, storedAnswer: storedAnswer, storedPass: storedPass, rawBlock: rawBlock
  };
})();
