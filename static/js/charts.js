// Draws every plotly figure on the page from the JSON the server embedded beside it
// (<div class="chart" data-figure="ID"> + <script type="application/json" id="ID">),
// and draws again when htmx swaps new data in or restores a page from history.
(function () {
  "use strict";
  var CONFIG = { responsive: true, displaylogo: false, modeBarButtonsToRemove: ["lasso2d", "select2d"] };

  function draw(root) {
    if (typeof Plotly === "undefined") return;
    (root || document).querySelectorAll("[data-figure]").forEach(function (el) {
      var source = document.getElementById(el.dataset.figure);
      if (!source) return;
      var text = source.textContent;
      if (el.dataset.drawn === text && el._fullLayout) return; // unchanged
      var figure = JSON.parse(text);
      if (el._fullLayout) {
        Plotly.react(el, figure.data, figure.layout, CONFIG);
      } else {
        el.innerHTML = ""; // a history snapshot may hold a stale rendering
        Plotly.newPlot(el, figure.data, figure.layout, CONFIG);
      }
      el.dataset.drawn = text;
    });
  }

  document.addEventListener("DOMContentLoaded", function () { draw(document); });
  document.addEventListener("htmx:afterSettle", function () { draw(document); });
  document.addEventListener("htmx:historyRestore", function () {
    document.querySelectorAll("[data-figure]").forEach(function (el) { delete el.dataset.drawn; });
    draw(document);
  });
  // htmx keeps a copy of the page for the back button. plotly's drawing is full of style
  // attributes, which the Content-Security-Policy refuses when that copy is parsed back:
  // keep the copy free of them (every chart is drawn again from its JSON after the swap).
  document.addEventListener("htmx:beforeHistorySave", function () {
    document.querySelectorAll("[data-figure]").forEach(function (el) {
      if (el._fullLayout && typeof Plotly !== "undefined") Plotly.purge(el);
      el.innerHTML = "";
      delete el.dataset.drawn;
    });
  });
  window.inferwatchDrawCharts = draw;
})();
