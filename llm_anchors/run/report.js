// llm-anchors report: the table's rows (JSON in #rows) sorted, filtered and drawn a page at a time;
// inlined into the page by report.py. The view lives in the address's fragment.
(function () {
  var table = document.getElementById("inputs"), tbody = table.tBodies[0];
  var payload = JSON.parse(document.getElementById("rows").textContent);
  var rows = payload.rows, described = payload.described;
  var second = table.querySelector("th[data-key=second]") !== null;
  var fields = {index: "i", label: "l", precision: "p", second: "s", coverage: "c", queries: "q", usd: "u",
                memory: "m"};
  var size = parseInt(table.getAttribute("data-page-rows"), 10) || 100;
  var select = document.getElementById("label-filter"), search = document.getElementById("text-filter");
  var shown = document.getElementById("shown"), heads = table.tHead.rows[0].cells;
  var pageOf = document.getElementById("page-of");
  var prev = document.getElementById("prev"), next = document.getElementById("next");
  var state = {sort: "index", dir: "asc", page: 1};
  var entities = {"&amp;": "&", "&lt;": "<", "&gt;": ">", "&quot;": "\"", "&#x27;": "'"};
  rows.forEach(function (row) {  // the text a filter searches: the marked HTML without its tags
    row.plain = row.t.replace(/<[^>]*>/g, "").replace(/&(amp|lt|gt|quot|#x27);/g, function (e) {
      return entities[e];
    }).toLowerCase();
  });
  function escaped(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return {"&": "&amp;", "<": "&lt;", ">": "&gt;", "\"": "&quot;", "'": "&#x27;"}[c];
    });
  }
  function key(row, name) { return name === "text" ? row.plain : row[fields[name]]; }
  function view() {
    var label = select.value, q = search.value.toLowerCase(), sign = state.dir === "asc" ? 1 : -1;
    var kept = rows.filter(function (row) {
      return (!label || row.l === label) && (!q || row.plain.indexOf(q) >= 0);
    });
    kept.sort(function (a, b) {
      var x = key(a, state.sort), y = key(b, state.sort);
      var c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
      return sign * c || a.i - b.i;
    });
    return kept;
  }
  function num(value, digits) { return value.toFixed(digits); }
  function opinion(row) {
    if (row.o === undefined) return "<td class=num>—</td>";
    if (typeof row.o === "string") return "<td class=num title=\"" + escaped(row.o) + "\">missing</td>";
    var said = "95% interval " + num(row.o[0], 3) + "–" + num(row.o[1], 3) + "; " + row.o[2].toLocaleString() +
      " fresh samples; perturbed as: " + described[row.o[3]];
    return "<td class=num title=\"" + escaped(said) + "\">" + num(row.s, 3) + "</td>";
  }
  function draw(row) {
    var flags = (row.f & 1 ? " <span class=muted>(empty anchor)</span>" : "") +
      (row.f & 2 ? " <span class=flag title=\"no rule reached the threshold\">below τ</span>" : "") +
      (row.f & 4 ? " <span class=flag title=\"the cap stopped the search\">cap</span>" : "");
    var certified = row.k ? "certified (" + row.k + ") on " + row.n.toLocaleString() +
      " samples drawn after it was chosen" : "not certified: no rule reached the threshold";
    var memory = {"-1": ["none", "—"], "0": ["miss", "miss"], "1": ["hit", "hit"], "2": ["hit", "repeat"]}[row.m];
    return "<tr data-index=\"" + row.i + "\" data-label=\"" + escaped(row.l) + "\" data-queries=\"" + row.q +
      "\"><td class=num>" + row.i + "</td><td class=text>" + row.t + flags + "</td><td>" + escaped(row.l) +
      "</td><td class=num title=\"" + certified + "\">" + num(row.p, 3) + " <span class=muted>≥ " + num(row.b, 3) +
      (row.k ? " " + row.k : "") + "</span></td>" + (second ? opinion(row) : "") +
      "<td class=num>" + num(row.c, 3) + "</td><td class=num>" + row.q.toLocaleString() + "</td><td class=num>" +
      num(row.u, 6) + "</td><td class=mem-" + memory[0] + ">" + memory[1] + "</td></tr>";
  }
  function apply() {
    var kept = view(), pages = Math.max(1, Math.ceil(kept.length / size));
    state.page = Math.min(Math.max(1, state.page), pages);
    var first = (state.page - 1) * size;
    tbody.innerHTML = kept.slice(first, first + size).map(draw).join("");
    shown.textContent = kept.length.toLocaleString();
    pageOf.textContent = "page " + state.page + " of " + pages;
    prev.disabled = state.page <= 1;
    next.disabled = state.page >= pages;
    for (var i = 0; i < heads.length; i++) {
      var name = heads[i].getAttribute("data-key");
      var order = state.dir === "asc" ? "ascending" : "descending";
      heads[i].setAttribute("aria-sort", name === state.sort ? order : "none");
    }
    var params = new URLSearchParams();
    if (select.value) params.set("label", select.value);
    if (search.value) params.set("q", search.value);
    if (state.sort !== "index" || state.dir !== "asc") { params.set("sort", state.sort); params.set("dir", state.dir); }
    if (state.page > 1) params.set("page", String(state.page));
    try { history.replaceState(null, "", "#" + params.toString()); } catch (e) { /* a file: URL some browsers refuse */ }
  }
  function fromHash() {
    var params = new URLSearchParams(location.hash.slice(1));
    var label = params.get("label") || "";
    if (Array.prototype.some.call(select.options, function (o) { return o.value === label; })) select.value = label;
    search.value = params.get("q") || "";
    var sort = params.get("sort");
    for (var i = 0; i < heads.length; i++) if (heads[i].getAttribute("data-key") === sort) state.sort = sort;
    state.dir = params.get("dir") === "desc" ? "desc" : "asc";
    state.page = parseInt(params.get("page") || "1", 10) || 1;
  }
  function sortBy(name) {
    state.dir = state.sort === name && state.dir === "asc" ? "desc" : "asc";
    state.sort = name;
    state.page = 1;
    apply();
  }
  for (var i = 0; i < heads.length; i++) {
    heads[i].addEventListener("click", function () { sortBy(this.getAttribute("data-key")); });
    heads[i].addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(this.getAttribute("data-key")); });
  }
  select.addEventListener("change", function () { state.page = 1; apply(); });
  search.addEventListener("input", function () { state.page = 1; apply(); });
  prev.addEventListener("click", function () { state.page -= 1; apply(); });
  next.addEventListener("click", function () { state.page += 1; apply(); });
  window.addEventListener("hashchange", function () { fromHash(); apply(); });
  fromHash();
  apply();
})();
