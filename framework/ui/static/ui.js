// Draws each <div class="chart" data-x="[...]" data-series="[...]"> with uPlot (shipped
// with deltamark: nothing is fetched from the internet), and fills each
// <td class="waiting" data-url=...> from its JSON (planning a job's sources takes a while).
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  for (const el of document.querySelectorAll("div.chart")) {
    const ys = JSON.parse(el.dataset.series || "[]");
    const xs = el.dataset.x ? JSON.parse(el.dataset.x) : ys.map((_, i) => i + 1);
    const spark = el.classList.contains("spark");
    const opts = {
      width: spark ? 160 : 460, height: spark ? 36 : 180,
      legend: { show: !spark }, cursor: { show: !spark },
      scales: { x: { time: false } },
      axes: spark ? [{ show: false }, { show: false }]
                  : [{ label: "run", incrs: [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000] }, {}],
      series: [{ label: "run" }, { label: el.dataset.label, stroke: "#1a4fa3", width: 1.5,
                     points: { show: !spark && xs.length < 60 } }],
    };
    new uPlot(opts, [xs, ys], el);
    el.dataset.drawn = "yes";
  }
  for (const cell of document.querySelectorAll("td.waiting")) {
    fetch(cell.dataset.url)
      .then((response) => response.json())
      .then((body) => { cell.textContent = body.said || body.error; })
      .catch(() => { cell.textContent = "unknown"; })
      .finally(() => { cell.dataset.filled = "yes"; });
  }
});
