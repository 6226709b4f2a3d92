// llm-anchors report: sorting and filtering the table; inlined into the page by _report.py
(function () {
  var table = document.getElementById("inputs"), tbody = table.tBodies[0];
  var rows = Array.prototype.slice.call(tbody.rows);
  var select = document.getElementById("label-filter"), search = document.getElementById("text-filter");
  var shown = document.getElementById("shown"), heads = table.tHead.rows[0].cells;
  var state = {sort: "index", dir: "asc"};
  function value(row, key) {
    var v = row.getAttribute("data-" + key), n = parseFloat(v);
    return isNaN(n) || key === "label" || key === "text" ? v : n;
  }
  function apply() {
    var label = select.value, q = search.value.toLowerCase(), count = 0;
    var sign = state.dir === "asc" ? 1 : -1;
    rows.sort(function (a, b) {
      var x = value(a, state.sort), y = value(b, state.sort);
      var c = typeof x === "number" ? x - y : String(x).localeCompare(String(y));
      return sign * c || value(a, "index") - value(b, "index");
    });
    rows.forEach(function (row) {
      var keep = (!label || row.getAttribute("data-label") === label) &&
                 (!q || row.getAttribute("data-text").indexOf(q) >= 0);
      row.hidden = !keep;
      count += keep ? 1 : 0;
      tbody.appendChild(row);
    });
    shown.textContent = count.toLocaleString();
    for (var i = 0; i < heads.length; i++) {
      var key = heads[i].getAttribute("data-key");
      var order = state.dir === "asc" ? "ascending" : "descending";
      heads[i].setAttribute("aria-sort", key === state.sort ? order : "none");
    }
    var params = new URLSearchParams();
    if (label) params.set("label", label);
    if (q) params.set("q", q);
    if (state.sort !== "index" || state.dir !== "asc") { params.set("sort", state.sort); params.set("dir", state.dir); }
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
  }
  function sortBy(key) {
    state.dir = state.sort === key && state.dir === "asc" ? "desc" : "asc";
    state.sort = key;
    apply();
  }
  for (var i = 0; i < heads.length; i++) {
    heads[i].addEventListener("click", function () { sortBy(this.getAttribute("data-key")); });
    heads[i].addEventListener("keydown", function (e) { if (e.key === "Enter") sortBy(this.getAttribute("data-key")); });
  }
  select.addEventListener("change", apply);
  search.addEventListener("input", apply);
  window.addEventListener("hashchange", function () { fromHash(); apply(); });
  fromHash();
  apply();
})();
