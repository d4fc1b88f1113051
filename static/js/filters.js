// After Back/Forward, htmx restores the page from its history snapshot: the table and
// URL are right, but a <select>'s chosen option is a property the snapshot does not
// keep, so the dropdowns would show the page's first load. Re-sync them from the URL
// (a filter the URL does not name shows its default, data-default).
(function () {
  "use strict";

  function syncFilters() {
    var form = document.getElementById("filters");
    if (!form) return;
    var params = new URLSearchParams(window.location.search);
    form.querySelectorAll("select[name]").forEach(function (select) {
      var wanted = params.get(select.name) || select.dataset.default || "";
      if (Array.prototype.some.call(select.options, function (o) { return o.value === wanted; })) {
        select.value = wanted;
      }
    });
    var sort = document.getElementById("sort-input");
    if (sort) sort.value = params.get("sort") || sort.dataset.default || "";
  }

  // Another workload ranks by its own headline (TTFT, tool-call time, …): a sort chosen
  // on the previous board must not carry over, so the new board's default applies.
  document.addEventListener("change", function (event) {
    var sort = document.getElementById("sort-input");
    if (sort && event.target.name === "workload") sort.value = "";
  }, true);

  document.addEventListener("htmx:historyRestore", syncFilters);
  window.addEventListener("popstate", function () { setTimeout(syncFilters, 0); });
  window.inferwatchSyncFilters = syncFilters;
})();
