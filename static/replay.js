// The replay panel's tokens, overlaid on the session's occupancy chart.
(function () {
  "use strict";

  function overlay() {
    const result = document.querySelector("[data-replay]");
    const chart = document.getElementById("occupancy-chart");
    if (!result || !chart || !window.Plotly || !chart.data || result.dataset.overlaid) return;
    const points = JSON.parse(result.dataset.replay || "[]");
    const label = result.dataset.replayLabel || "policy";
    const old = [];
    chart.data.forEach(function (trace, k) { if (trace.meta === "replay") old.push(k); });
    if (old.length) window.Plotly.deleteTraces(chart, old);
    const x = points.map(function (p) { return p[0]; });
    window.Plotly.addTraces(chart, [
      {
        type: "scatter", mode: "lines", name: "recorded (all partitions)", meta: "replay", x: x,
        y: points.map(function (p) { return p[1]; }), line: { color: "#0f172a", width: 1.5 },
        hovertemplate: "step %{x}: %{y} tokens as recorded<extra></extra>",
      },
      {
        type: "scatter", mode: "lines", name: "replayed: " + label, meta: "replay", x: x,
        y: points.map(function (p) { return p[2]; }), line: { color: "#c026d3", width: 2.5, dash: "dash" },
        hovertemplate: "step %{x}: %{y} tokens under " + label + "<extra></extra>",
      },
    ]);
    result.dataset.overlaid = "1";
  }

  document.addEventListener("htmx:afterSettle", overlay);
  window.addEventListener("load", overlay);
})();
