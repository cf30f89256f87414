// The stats page: charts drawn with Chart.js from the JSON the server put in #stats-data.
"use strict";

(() => {
  const data = JSON.parse(document.getElementById("stats-data").textContent);
  const palette = ["#2f6fde", "#2e9d5b", "#e58a00", "#8b5cf6", "#d23c3c", "#0e7490", "#a16207", "#db2777"];
  const kib = (n) => (n >= 1048576 ? `${(n / 1048576).toFixed(1)} MiB` : n >= 1024 ? `${(n / 1024).toFixed(1)} KiB` : `${n} B`);
  const bytesAxis = { beginAtZero: true, ticks: { callback: (v) => kib(v) } };
  const charts = {};

  function chart(id, config) {
    const canvas = document.getElementById(id);
    if (!canvas) return;
    config.options = Object.assign({ responsive: true, maintainAspectRatio: false, animation: false, plugins: { legend: { position: "bottom" } } }, config.options || {});
    charts[id] = new Chart(canvas, config);
  }

  const tables = Object.keys(data.tables);
  chart("chart-tables", {
    type: "bar",
    data: { labels: tables, datasets: [{ label: "bytes", data: tables.map((t) => data.tables[t].bytes), backgroundColor: palette }] },
    options: { scales: { y: bytesAxis }, plugins: { legend: { display: false },
      tooltip: { callbacks: { label: (c) => `${kib(c.raw)} in ${data.tables[c.label].rows.toLocaleString()} rows` } } } },
  });

  const pts = data.timeline.points;
  const stamp = (t) => new Date(t * 1000).toISOString().slice(0, data.timeline.bucket_seconds >= 86400 ? 10 : 16).replace("T", " ");
  let total = 0;
  chart("chart-timeline", {
    type: "bar",
    data: {
      labels: pts.map((p) => stamp(p.t)),
      datasets: [
        { label: "checkpoint bytes", data: pts.map((p) => p.checkpoint_bytes), backgroundColor: palette[0], stack: "b" },
        { label: "pending-write bytes", data: pts.map((p) => p.write_bytes), backgroundColor: palette[2], stack: "b" },
        { label: "cumulative", type: "line", data: pts.map((p) => (total += p.checkpoint_bytes + p.write_bytes)), borderColor: palette[3], yAxisID: "y2", pointRadius: 0 },
      ],
    },
    options: { scales: { y: Object.assign({ stacked: true }, bytesAxis), x: { stacked: true }, y2: Object.assign({ position: "right", grid: { drawOnChartArea: false } }, bytesAxis) } },
  });

  chart("chart-dedup", {
    type: "bar",
    data: { labels: ["every channel at every checkpoint", "stored blobs"],
      datasets: [{ label: "bytes", data: [data.dedup.logical_bytes, data.dedup.stored_bytes], backgroundColor: [palette[4], palette[1]] }] },
    options: { indexAxis: "y", scales: { x: bytesAxis }, plugins: { legend: { display: false } } },
  });

  chart("chart-deltas", {
    type: "doughnut",
    data: { labels: ["stored whole", "stored as delta"],
      datasets: [{ data: [data.deltas.blob_bytes - data.deltas.delta_bytes, data.deltas.delta_bytes], backgroundColor: [palette[0], palette[3]] }] },
    options: { plugins: { tooltip: { callbacks: { label: (c) => `${c.label}: ${kib(c.raw)}` } } } },
  });

  chart("chart-tasks", {
    type: "bar",
    data: { labels: data.tasks.map((t) => t.node),
      datasets: [{ label: "writes", data: data.tasks.map((t) => t.writes), backgroundColor: palette[0] },
                 { label: "tasks", data: data.tasks.map((t) => t.tasks), backgroundColor: palette[1] }] },
    options: { scales: { y: { beginAtZero: true } } },
  });

  chart("chart-durations", {
    type: "bar",
    data: { labels: data.durations.map((t) => t.node),
      // minBarLength: a 0 ms bar is still drawn (tasks of a fast agent all take under a millisecond)
      datasets: [{ label: "average", data: data.durations.map((t) => t.avg_ms), backgroundColor: palette[0], minBarLength: 3 },
                 { label: "p95", data: data.durations.map((t) => t.p95_ms), backgroundColor: palette[2], minBarLength: 3 }] },
    options: { scales: { y: { beginAtZero: true, suggestedMax: 1, title: { display: true, text: "ms" } } },
               plugins: { legend: { position: "bottom" }, tooltip: { callbacks: { label: (c) => `${c.dataset.label}: ${c.raw} ms` } } } },
  });

  const sources = Object.keys(data.sources);
  chart("chart-sources", {
    type: "doughnut",
    data: { labels: sources, datasets: [{ data: sources.map((s) => data.sources[s]), backgroundColor: palette }] },
  });

  window.tlCharts = charts;
})();
