// Draws every plotly figure on the page from the JSON the server embedded beside it
// (<div class="chart" data-figure="ID"> + <script type="application/json" id="ID">),
// and draws again when htmx swaps new data in or restores a page from history.
(function () {
  "use strict";
  // No toolbar: on a phone it sits over the chart's title, and hover, zoom by dragging
  // and double-click to reset need none.
  var CONFIG = { responsive: true, displayModeBar: false };

  function box(el) { return el.getBoundingClientRect(); }
  function overlaps(a, b) {
    return Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0 &&
      Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 0;
  }
  function inside(a, frame) {
    return a.left >= frame.left && a.right <= frame.right && a.top >= frame.top && a.bottom <= frame.bottom;
  }

  // Labels beside scatter points: each goes above, below, right or left of its point,
  // whichever first keeps it inside the plot area and clear of every point and of the
  // labels already placed (in trace order: the board's best rows first); a label with
  // no free place is hidden, its point keeps its hover. Redone after every drawing
  // (plotly redraws on resize and zoom and puts its labels back).
  function placeLabels(el) {
    var area = el.querySelector(".draglayer .nsewdrag");
    if (!area) return;
    var frame = box(area);
    var points = Array.prototype.map.call(el.querySelectorAll(".scatterlayer .point"), box);
    var placed = [];
    el.querySelectorAll(".scatterlayer .trace").forEach(function (trace) {
      var marks = trace.querySelectorAll(".point");
      trace.querySelectorAll(".textpoint text").forEach(function (text, i) {
        if (!marks[i]) return;
        text.removeAttribute("transform");
        text.setAttribute("visibility", "visible");
        var at = box(text), dot = box(marks[i]), gap = 3;
        var cx = (dot.left + dot.right) / 2, cy = (dot.top + dot.bottom) / 2;
        var w = at.width, h = at.height;
        var spots = [
          [cx - w / 2, dot.top - gap - h], [cx - w / 2, dot.bottom + gap],
          [dot.right + gap, cy - h / 2], [dot.left - gap - w, cy - h / 2]
        ];
        var chosen = null;
        for (var s = 0; s < spots.length && !chosen; s++) {
          var c = { left: spots[s][0], top: spots[s][1], right: spots[s][0] + w, bottom: spots[s][1] + h };
          if (!inside(c, frame)) continue;
          var free = placed.every(function (p) { return !overlaps(c, p); }) &&
            points.every(function (p) { return !overlaps(c, p); });
          if (free) chosen = c;
        }
        if (!chosen) { text.setAttribute("visibility", "hidden"); return; }
        text.setAttribute("transform", "translate(" + (chosen.left - at.left) + "," + (chosen.top - at.top) + ")");
        placed.push(chosen);
      });
    });
  }

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
      if (!el.dataset.placing) {
        el.dataset.placing = "1";
        el.on("plotly_afterplot", function () { placeLabels(el); });
      }
      placeLabels(el);
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
      delete el.dataset.placing; // purge dropped the listener that places labels
    });
  });
  window.inferwatchDrawCharts = draw;
})();
