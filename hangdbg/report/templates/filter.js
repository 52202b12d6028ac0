// hangdbg report: the search/filter box. Builds no HTML from data: only hides/shows elements and
// opens <details>. A query is a rank number, a host (data in #hangdbg-hosts), or any text of a
// frame, a class or a row (function, file, state). The page starts filtered by "#filter=QUERY".
(function () {
  "use strict";
  var box = document.getElementById("filter");
  var note = document.getElementById("filter-note");
  var hosts = JSON.parse(document.getElementById("hangdbg-hosts").textContent || "{}");
  var classes = Array.prototype.slice.call(document.querySelectorAll("[data-class]"));
  var nodes = Array.prototype.slice.call(document.querySelectorAll("#tree details"));
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr[data-ranks]"));
  var wasOpen = nodes.map(function (n) { return n.open; });

  function inSet(text, rank) {  // "0-2,5" contains rank?
    if (!text) { return false; }
    var parts = text.split(",");
    for (var i = 0; i < parts.length; i++) {
      var ab = parts[i].split("-");
      var lo = parseInt(ab[0], 10), hi = ab.length > 1 ? parseInt(ab[1], 10) : lo;
      if (rank >= lo && rank <= hi) { return true; }
    }
    return false;
  }
  function ranksOf(q) {  // a rank number, or the ranks of a host; null for a text query
    if (/^\d+$/.test(q)) { return [parseInt(q, 10)]; }
    if (Object.prototype.hasOwnProperty.call(hosts, q)) {
      var out = [];
      hosts[q].split(",").forEach(function (p) {
        var ab = p.split("-"), lo = parseInt(ab[0], 10), hi = ab.length > 1 ? parseInt(ab[1], 10) : lo;
        for (var r = lo; r <= hi && out.length < 4096; r++) { out.push(r); }
      });
      return out;
    }
    return null;
  }
  function hasAny(text, ranks) {
    for (var i = 0; i < ranks.length; i++) { if (inSet(text, ranks[i])) { return true; } }
    return false;
  }
  function apply() {
    var q = box.value.trim();
    if (!q) {
      nodes.forEach(function (n, i) { n.hidden = false; n.open = wasOpen[i]; });
      rows.concat(classes).forEach(function (r) { r.hidden = false; });
      note.textContent = "";
      return;
    }
    var ranks = ranksOf(q), low = q.toLowerCase(), shown = 0;
    var match = function (el) {  // a tree node by its own frames (its <summary>), a row by its text
      if (ranks) { return hasAny(el.getAttribute("data-ranks"), ranks); }
      var own = el.tagName === "DETAILS" ? el.firstElementChild : el;
      var fold = own && own.querySelector(".folded");
      var text = (own ? own.textContent : "") + (fold ? "\n" + fold.title : "");
      return text.toLowerCase().indexOf(low) >= 0;
    };
    nodes.forEach(function (n) { n.hidden = true; });
    nodes.forEach(function (n) {
      if (!match(n)) { return; }
      shown++;
      for (var p = n; p && p.tagName === "DETAILS"; p = p.parentElement) {
        p.hidden = false;
        if (p !== n || ranks) { p.open = true; }
      }
    });
    rows.concat(classes).forEach(function (r) { r.hidden = !match(r); });
    note.textContent = shown + " tree node(s) match";
  }
  box.addEventListener("input", apply);
  var m = /(?:^#|&)filter=([^&]*)/.exec(location.hash);
  if (m) {  // a malformed fragment ("%E0%A4%A") is ignored: the page shows everything
    try { box.value = decodeURIComponent(m[1]); apply(); } catch (e) { box.value = ""; }
  }
})();
