// Draws each <div class="chart" data-x="[...]" data-series="[...]"> with uPlot (shipped
// with deltamark: nothing is fetched from the internet), fills each
// <td class="waiting" data-url=...> from its JSON (planning a job's sources takes a while),
// and shows each <time datetime=...> in the reader's time zone with how long ago it was,
// the exact value on hover.
"use strict";

const pad = (n) => String(n).padStart(2, "0");
const day = (d) => `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}`;
const clock = (d) => `${pad(d.getHours())}:${pad(d.getMinutes())}`;

function ago(seconds) {
  for (const [unit, size] of [["d", 86400], ["h", 3600], ["min", 60]]) {
    if (seconds >= size) return `${Math.floor(seconds / size)} ${unit} ago`;
  }
  return seconds >= 1 ? `${Math.floor(seconds)} s ago` : "just now";
}

function localise(el, now) {
  const when = new Date(el.dateTime);
  if (Number.isNaN(when.getTime())) return;
  const zone = Intl.DateTimeFormat().resolvedOptions().timeZone;
  const shown = day(when) === day(now) ? clock(when) : `${day(when)} ${clock(when)}`;
  el.textContent = `${shown} · ${ago((now - when) / 1000)}`;
  el.title = `${day(when)} ${clock(when)}:${pad(when.getSeconds())}.`
    + `${String(when.getMilliseconds()).padStart(3, "0")} ${zone}\n${el.dateTime}`;
  el.dataset.local = "yes";
}

document.addEventListener("DOMContentLoaded", () => {
  const now = new Date();
  for (const el of document.querySelectorAll("time[datetime]")) localise(el, now);
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
