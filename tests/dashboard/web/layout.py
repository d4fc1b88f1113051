"""Layout checks run inside a page (Playwright), shared by the browser tests.

Each returns a list of problems as sentences, empty when the page holds: the test
collects them over every page and width and reports them all at once.
"""

from __future__ import annotations

# Every text a plotly chart draws as a label: titles, axis titles, tick labels, text
# beside points, annotations, legend entries. Two of them must not overlap, and none may
# stick out of the chart (clipped by the box or the page).
CHART_LABELS = """() => {
  const problems = [];
  const selectors = [".gtitle", ".g-xtitle text", ".g-ytitle text", ".xtick text", ".ytick text",
    ".textpoint text", ".annotation-text", ".legendtext"];
  document.querySelectorAll(".js-plotly-plot").forEach(chart => {
    const name = chart.id || "chart";
    const frame = chart.getBoundingClientRect();
    if (chart.querySelector(".modebar-container .modebar")) {
      problems.push(name + ": plotly's toolbar is drawn (it covers the title on a phone)");
    }
    const boxes = [];
    selectors.forEach(s => chart.querySelectorAll(s).forEach(el => {
      const r = el.getBoundingClientRect();
      if (r.width < 1 || r.height < 1 || !el.textContent.trim()) return;
      if (getComputedStyle(el).visibility === "hidden") return; // thinned out: hover has it
      boxes.push({text: el.textContent.trim(), r});
      if (r.left < frame.left - 1 || r.right > frame.right + 1 || r.top < frame.top - 1
          || r.bottom > frame.bottom + 1) {
        problems.push(name + ": label '" + el.textContent.trim() + "' is cut at the chart's edge");
      }
    }));
    for (let i = 0; i < boxes.length; i++) {
      for (let j = i + 1; j < boxes.length; j++) {
        const a = boxes[i].r, b = boxes[j].r;
        const overlap = Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
          && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
        if (overlap) {
          problems.push(name + ": '" + boxes[i].text + "' overlaps '" + boxes[j].text + "'");
        }
      }
    }
  });
  return problems;
}"""

# No cell's content wider than its cell; no table scrolls sideways (at a laptop's width,
# `fit`, no header wraps to three lines either); the page itself never scrolls sideways.
TABLES = r"""(fit) => {
  const problems = [];
  const label = el => (el.closest("table").id || el.closest("table").className || "table");
  document.querySelectorAll("main table th, main table td").forEach(cell => {
    if (cell.scrollWidth > cell.clientWidth + 1) {
      problems.push(label(cell) + ": cell '" + cell.textContent.trim().slice(0, 40)
        + "' overflows its column");
    }
  });
  if (fit) {
    // A header of three lines or more is a column too narrow for its label and unit.
    document.querySelectorAll("main table thead th").forEach(th => {
      const content = document.createRange();  // the text's height, not the row's
      content.selectNodeContents(th);
      const lines = content.getBoundingClientRect().height
        / parseFloat(getComputedStyle(th).lineHeight);
      if (lines > 2.5) {
        problems.push(label(th) + ": header '" + th.textContent.trim().replace(/\s+/g, " ")
          + "' wraps to " + Math.round(lines) + " lines");
      }
    });
  }
  // No table scrolls sideways, on a laptop or a phone (where a wide one reflows as cards).
  document.querySelectorAll("main .table-scroll").forEach(box => {
    if (box.scrollWidth > box.clientWidth + 1) {
      const t = box.querySelector("table");
      problems.push((t && (t.id || t.className)) + ": clipped by "
        + (box.scrollWidth - box.clientWidth) + " px, scrolls sideways at " + window.innerWidth
        + " px; columns "
        + [...t.querySelectorAll("thead th")].map(th => th.offsetWidth).join(" "));
    }
  });
  if (document.documentElement.scrollWidth > window.innerWidth + 1) {
    // Name the outermost element that sticks out: that is the one to fix.
    const wide = [...document.querySelectorAll("body *")].find(
      el => el.getBoundingClientRect().right > window.innerWidth + 1);
    const what = wide ? wide.tagName.toLowerCase() + (wide.id ? "#" + wide.id : "")
      + (wide.className && wide.className.baseVal === undefined ? "." + wide.className : "") : "?";
    problems.push("the page scrolls sideways at " + window.innerWidth + " px (" + what + ")");
  }
  return problems;
}"""

# The first row of the page's main table starts above the fold, without scrolling.
FIRST_ROW_VISIBLE = """(selector) => {
  const row = document.querySelector(selector);
  if (!row) return [selector + ": no such row"];
  const top = row.getBoundingClientRect().top + window.scrollY;
  return top < window.innerHeight ? [] : [selector + " starts " + Math.round(top)
    + " px down, below the fold of " + window.innerHeight + " px"];
}"""


def layout_problems(page, first_row: str | None, *, fit: bool) -> list[str]:
    """Every layout problem of the page as it stands (charts drawn, at its current width)."""
    page.wait_for_function(
        "[...document.querySelectorAll('[data-figure]')]"
        ".every(el => el.classList.contains('js-plotly-plot'))"
    )
    problems = page.evaluate(CHART_LABELS) + page.evaluate(TABLES, fit)
    if first_row:
        problems += page.evaluate(FIRST_ROW_VISIBLE, first_row)
    return problems
