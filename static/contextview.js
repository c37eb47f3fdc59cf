// contextview dashboard behaviour. No inline scripts anywhere (the CSP forbids them):
// data comes in data- attributes.
(function () {
  "use strict";

  const OP_SYMBOLS = {
    summarize: "diamond", fold: "diamond", merge: "triangle-up", rewrite: "square",
    truncate: "square-open", drop: "x", reload: "circle", reorder: "star",
    pin: "cross", unpin: "cross-open", expire: "hourglass", keep: "circle-open",
  };
  // Where each occupancy line goes and how it looks the server says (data-meta,
  // data-lines), as it does the partitions' order and colours: the report's chart,
  // drawn on the server, looks the same.
  // Steps are whole numbers: a step axis has ticks 1, 2, 5, 10, 20... steps apart, about
  // eight over the range shown, never 0.5 (plotly's own ticks go there on a short
  // range, where a "d" format labels 3 and 3.5 both as 3); zoomed in, they follow.
  function stepDtick(span, ticks) {
    const raw = span / (ticks || 8);
    if (!(raw > 1)) return 1;
    const power = Math.pow(10, Math.floor(Math.log10(raw)));
    return [1, 2, 5, 10].map(function (m) { return m * power; }).find(function (d) { return d >= raw; });
  }

  // A narrow chart (a phone's) gets half as many: eight ran together there.
  function stepTicks(steps, narrow) {
    const last = steps.reduce(function (a, b) { return b > a ? b : a; }, 0);
    return { tickmode: "linear", tick0: 0, dtick: stepDtick(last, narrow ? 4 : 8), tickformat: "d" };
  }

  function followSteps(el) {
    el.on("plotly_relayout", function () {
      const range = el.layout.xaxis.range;
      const dtick = range && stepDtick(range[1] - range[0]);
      if (dtick && dtick !== el.layout.xaxis.dtick) window.Plotly.relayout(el, { "xaxis.dtick": dtick });
    });
  }

  function lineStyle(line) { return [line.color || "#6b7280", line.dash || "dot"]; }

  // Plotly renders a few HTML-like tags (<b>, <a href>, <br>) and entities in names
  // and labels; agent-sent names must show as the text they are.
  function text(value) {
    return String(value).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  }


  // A step's address is its page: loaded directly it is the whole session page with
  // the step open. Moving between steps swaps only the panel and records each step
  // in the history ({cvStep: url}), so Back and Forward walk through what was seen.
  function showStep(url) {
    return window.htmx.ajax("GET", url, { target: "#step-panel", swap: "innerHTML" })
      .then(stepTitle);
  }

  // The tab says which step is open, as a page loaded at that step's address does.
  function stepTitle() {
    const view = document.getElementById("step-view");
    if (!view) return;
    const rest = document.title.replace(/^(Step \d+|Compare) · /, "");
    document.title = "Step " + view.dataset.step + " · " + rest;
  }

  // Opened from a link, the step takes the focus with it (its heading), so that Tab
  // goes on into the step: from step 71 of a real 143-step session, 203 presses went
  // through the rest of the list, the replay form and the amnesia table first.
  function loadStep(url, focusIt) {
    const panel = document.getElementById("step-panel");
    if (!panel || !window.htmx) { window.location.href = url; return; }
    showStep(url).then(function () {
      pushAddress(url);
      const heading = focusIt && document.querySelector("#step-view h2");
      if (heading) heading.focus({ preventScroll: true });
    });
  }

  // Step links in the list and the panel go through loadStep too (not htmx's own
  // history, which would reload the whole page on Back).
  document.addEventListener("click", function (ev) {
    if (ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
    const link = ev.target.closest && ev.target.closest('a[hx-target="#step-panel"]');
    if (!link || !document.getElementById("step-panel")) return;
    ev.preventDefault();
    ev.stopPropagation();
    loadStep(link.getAttribute("href"), true);
  }, true);

  // A fold opened in a step, and two steps compared, have addresses too: the fold
  // opens in the step's fold panel, the comparison in the step panel; each is a
  // history entry, and Back shows again the step (or comparison) it came from.
  document.addEventListener("click", function (ev) {
    if (ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey || ev.altKey) return;
    const link = ev.target.closest && ev.target.closest("a.open-fold");
    if (!link || !document.getElementById("fold-panel") || !window.htmx) return;
    ev.preventDefault();
    ev.stopPropagation();
    const url = link.getAttribute("href");
    window.htmx.ajax("GET", url, { target: "#fold-panel", swap: "innerHTML show:#fold-panel:top" })
      .then(function () { pushAddress(url); });
  }, true);

  document.addEventListener("submit", function (ev) {
    const form = ev.target;
    if (!form.matches || !form.matches("form[data-panel]") || !document.getElementById("step-panel")) return;
    ev.preventDefault();
    const query = new URLSearchParams(new FormData(form)).toString();
    loadStep(form.getAttribute("action") + "?" + query);
  });

  // The addresses the step panel shows: a step, a fold in a step, two steps compared.
  const PANEL_PATH = /\/(steps\/\d+\/(fold\/)?|compare\/)$/;

  // The address the page shows, but for its fragment. A link within the page (the skip
  // link, a message named in the panel) changes only the fragment; popstate comes for it
  // too, and then leaves the page as it is: it reloaded the session page, and the panel
  // reloaded and scrolled back to its top, away from the message the link went to.
  let shownPath = window.location.pathname + window.location.search;
  function pushAddress(url) {
    window.history.pushState({ cvStep: url }, "", url);
    shownPath = window.location.pathname + window.location.search;
  }
  document.addEventListener("htmx:pushedIntoHistory", function () {
    shownPath = window.location.pathname + window.location.search;
  });

  window.addEventListener("popstate", function (ev) {
    const here = window.location.pathname + window.location.search;
    if (here === shownPath) return;
    shownPath = here;
    if (ev.state && ev.state.htmx) return; // htmx's own entry: htmx restores it
    const panel = document.getElementById("step-panel");
    if (panel && window.htmx && PANEL_PATH.test(window.location.pathname)) {
      showStep(here);
    } else {
      window.location.reload(); // the session page without a step, or another page
    }
  });

  // A responsive plot fills its box's height, and draws beyond a box shorter than the
  // layout's height (over what follows): plotly's own container is given that height
  // (CSSOM styles are not inline styles: the CSP allows them). Not the chart's element:
  // htmx copies the style attribute of an element it swaps by id, which the CSP refuses.
  // Every chart's toolbar is set here. plotly names its buttons (aria-label); it would
  // also offer "Share chart..." (a post of the chart's data to plotly's cloud: the
  // product runs air-gapped, and the data is an agent's context) and selection tools
  // that select nothing here, each a stop for the keyboard on the way to the steps.
  const CONFIG = {
    responsive: true, displaylogo: false, showSendToCloud: false,
    modeBarButtonsToRemove: ["select2d", "lasso2d"],
  };
  function plot(el, traces, layout, config) {
    return window.Plotly.newPlot(el, traces, layout, Object.assign({}, CONFIG, config)).then(function (gd) {
      const box = el.querySelector(".plot-container");
      if (box && layout.height) box.style.minHeight = layout.height + "px";
      return gd;
    });
  }

  // --- the occupancy chart ----------------------------------------------------------

  function drawChart(el) {
    if (!window.Plotly || el.dataset.drawn) return;
    const rows = JSON.parse(el.dataset.rows || "[]");
    const meta = JSON.parse(el.dataset.meta || "{}");
    el.dataset.drawn = "1";
    // row: [index, mode, before, after, {partition: after}, flags, reported_before,
    // reported_after, ops, first, last, unseen]; a long session comes in buckets of steps
    // first..last, drawn at their fullest step `index`.
    const x = rows.map(function (r) { return r[0]; });
    const where = rows.map(function (r) {
      return r[9] === r[10] ? "step " + r[0] : "steps " + r[9] + "–" + r[10] + ", fullest " + r[0];
    });
    const measured = rows.some(function (r) { return r[3] !== null; });
    const names = new Set();
    rows.forEach(function (r) { if (r[4]) Object.keys(r[4]).forEach(function (k) { names.add(k); }); });
    const colors = meta.colors || {}, order = Object.keys(colors);
    const partitions = order.filter(function (p) { return names.has(p); })
      .concat(Array.from(names).filter(function (p) { return order.indexOf(p) < 0; }).sort());

    const traces = partitions.map(function (p) {
      return {
        type: "scatter", mode: "lines", stackgroup: "tokens", name: text(p), x: x,
        y: rows.map(function (r) { return r[4] && r[4][p] !== undefined ? r[4][p] : null; }),
        line: { width: 0.5, color: colors[p] },
        customdata: where, hovertemplate: "%{customdata}<br>%{fullData.name}: %{y} tokens<extra></extra>",
      };
    });
    // What the provider read beyond the log's count (system prompt, tool schemas, its own
    // tokenizer's difference): its own band.
    if (rows.some(function (r) { return r[11]; })) {
      traces.push({
        type: "scatter", mode: "lines", stackgroup: "tokens", name: "unseen (provider only)", x: x,
        y: rows.map(function (r) { return r[11] ? Math.max(0, r[11]) : null; }),
        line: { width: 0.5, color: "#fca5a5" }, fillpattern: { shape: "/", fgcolor: "#ef4444" },
        customdata: where, hovertemplate: "%{customdata}<br>unseen by the log: %{y} tokens<extra></extra>",
      });
    }
    const reported = rows.map(function (r) { return r[7]; });
    if (reported.some(function (v) { return v !== null; })) {
      traces.push({
        type: "scatter", mode: "lines", name: measured ? "reported by agent" : "tokens (reported by agent; measured pending)",
        x: x, y: reported, line: { dash: "dot", color: "#334155", width: 1.5 }, customdata: where,
        visible: measured ? "legendonly" : true,
        hovertemplate: "%{customdata}<br>reported: %{y} tokens<extra></extra>",
      });
    }
    // One marker trace per operation type, at the step's tokens after.
    const byOp = {};
    rows.forEach(function (r) {
      if (!r[8]) return;
      const y = r[3] !== null ? r[3] : (r[7] !== null ? r[7] : 0);
      r[8].split(" ").forEach(function (op, k) {
        (byOp[op] = byOp[op] || { x: [], y: [], text: [] });
        if (k === 0 || byOp[op].x[byOp[op].x.length - 1] !== r[0]) {
          byOp[op].x.push(r[0]); byOp[op].y.push(y); byOp[op].text.push(r[8]);
        }
      });
    });
    Object.keys(byOp).sort().forEach(function (op) {
      traces.push({
        type: "scatter", mode: "markers", name: text(op), x: byOp[op].x, y: byOp[op].y, text: byOp[op].text,
        marker: { symbol: OP_SYMBOLS[op] || "circle", size: 9, color: "#111827", line: { width: 1, color: "#fff" } },
        hovertemplate: "step %{x}: %{text}<extra></extra>", meta: "op",
      });
    });
    // The flags strip: one row per flag name under the chart.
    const flagX = [], flagY = [];
    rows.forEach(function (r) { (r[5] || []).forEach(function (f) { flagX.push(r[0]); flagY.push(f); }); });
    const hasFlags = flagX.length > 0;
    if (hasFlags) {
      traces.push({
        type: "scatter", mode: "markers", name: "flags", x: flagX, y: flagY, yaxis: "y2",
        marker: { symbol: "square", size: 8, color: "#dc2626" }, showlegend: false,
        hovertemplate: "step %{x}: %{y}<extra></extra>",
      });
    }
    const shapes = [], annotations = [];
    const budget = meta.budget || {};
    if (budget.max_tokens) {
      // Where the lines go comes from the server (the thresholds the statistics flag).
      // Each line's label a quarter of the width left of the one before: lines a few
      // percent apart (the budget, its limit, 90%) would print their labels on each other.
      (meta.lines || []).forEach(function (b, k) {
        const style = lineStyle(b), y = budget.max_tokens * b.at;
        shapes.push({ type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: y, y1: y,
                      line: { color: style[0], width: 1.2, dash: style[1] } });
        annotations.push({ xref: "paper", x: 1 - 0.25 * (k % 4), xanchor: "right", yref: "y", y: y, yanchor: "bottom",
                           text: text(b.label) + " " + Math.round(y), showarrow: false,
                           font: { size: 10, color: style[0] } });
      });
    }
    // Mode changes and applied directives on the timeline.
    let lastMode = null;
    rows.forEach(function (r) {
      if (r[1] && r[1] !== lastMode && lastMode !== null) {
        shapes.push({ type: "line", x0: r[0], x1: r[0], yref: "y domain", y0: 0, y1: 1,
                      line: { color: "#6366f1", width: 1, dash: "dot" } });
        annotations.push({ x: r[0], yref: "y domain", y: 1, yanchor: "bottom", text: "mode " + text(r[1]),
                           showarrow: false, font: { size: 10, color: "#4338ca" } });
      }
      if (r[1]) lastMode = r[1];
    });
    (meta.directives || []).forEach(function (d) {
      annotations.push({ x: d.step, yref: "y domain", y: 0, yanchor: "bottom",
                         text: "✔ " + text(d.label) + " (" + text(d.by) + ")", showarrow: true, arrowhead: 0, ay: -24,
                         font: { size: 10, color: "#047857" } });
    });
    // The flags strip gets a row per flag name, under the tokens chart, sharing its x axis.
    const flagNames = Array.from(new Set(flagY));
    // A short window keeps a shorter chart, so the step list below it keeps some rows.
    const short = window.innerHeight < 900;
    const main = short ? 170 : 300, row = short ? 16 : 22;
    const strip = hasFlags ? row * flagNames.length + 16 : 0, gap = hasFlags ? 24 : 0;
    // On a phone the legend goes under the chart (beside it, it left the plot some 60 px)
    // and the flags' names get less room. (In the session page's left pane it stays
    // beside: under it, it would push the step list out of a laptop's window.)
    const narrow = el.clientWidth > 0 && el.clientWidth < 500;
    const entries = traces.filter(function (t) { return t.showlegend !== false; }).length;
    const legendRows = narrow ? Math.ceil(entries / 2) : 0;
    const plotHeight = main + gap + strip, bottom = 40 + 20 * legendRows, top = 28;
    const layout = {
      height: plotHeight + top + bottom, margin: { l: narrow ? 96 : 130, r: narrow ? 8 : 20, t: top, b: bottom },
      hovermode: "closest", showlegend: true,
      legend: narrow ? { orientation: "h", x: 0, y: -44 / plotHeight, yanchor: "top", font: { size: 10 } }
                     : { x: 1.01, y: 1, font: { size: 11 } },
      xaxis: Object.assign({ rangemode: "tozero", anchor: hasFlags ? "y2" : "y", automargin: true,
                             title: { text: "step", standoff: 4 } },
                           stepTicks(rows.map(function (r) { return r[0]; }), narrow)),
      yaxis: { title: { text: "tokens" }, rangemode: "tozero",
               domain: [hasFlags ? (strip + gap) / plotHeight : 0, 1] },
      shapes: shapes, annotations: annotations,
    };
    if (hasFlags) {
      layout.yaxis2 = { domain: [0, strip / plotHeight], type: "category", categoryarray: flagNames,
                        tickfont: { size: narrow ? 9 : 10, color: "#912018" }, fixedrange: true };
    }
    plot(el, traces, layout);
    followSteps(el);
    el.on("plotly_click", function (ev) {
      if (!ev.points || !ev.points.length) return;
      loadStep(meta.step_url + ev.points[0].x + "/");
    });
  }

  // --- two sessions' occupancy, overlaid -----------------------------------------------

  const SIDE_COLORS = ["#2563eb", "#ea580c"];

  function drawCompare(el) {
    if (!window.Plotly || el.dataset.drawn) return;
    el.dataset.drawn = "1";
    const series = JSON.parse(el.dataset.series || "[]");
    // Occupancy when both have a budget; otherwise tokens, which always compare.
    const occupancy = series.length > 0 && series.every(function (s) { return s.max_tokens; });
    const value = function (p) { return occupancy ? p.occupancy_after : p.tokens_after; };
    const traces = [];
    series.forEach(function (s, k) {
      const color = SIDE_COLORS[k % SIDE_COLORS.length];
      traces.push({
        type: "scatter", mode: "lines+markers", name: text(s.name), legendgroup: "s" + k,
        x: s.curve.map(function (p) { return p.index; }), y: s.curve.map(value),
        line: { color: color, width: 2 }, marker: { size: 4, color: color },
        customdata: s.curve.map(function (p) {
          return [text((p.ops || []).join(", ") || "—"), text((p.flags || []).join(", ") || "—")];
        }),
        hovertemplate: "%{fullData.name}<br>step %{x}: " + (occupancy ? "%{y:.0%}" : "%{y} tokens") +
          "<br>operations: %{customdata[0]}<br>flags: %{customdata[1]}<extra></extra>",
      });
      const flagged = s.curve.filter(function (p) { return p.flags && p.flags.length && value(p) !== null; });
      if (flagged.length) {
        traces.push({
          type: "scatter", mode: "markers", name: text(s.name) + ": flagged", legendgroup: "s" + k,
          x: flagged.map(function (p) { return p.index; }), y: flagged.map(value),
          marker: { symbol: "x-thin-open", size: 11, color: "#dc2626", line: { width: 2, color: color } },
          hoverinfo: "skip",
        });
      }
    });
    const shapes = occupancy ? JSON.parse(el.dataset.lines || "[]").map(function (b) {
      const style = lineStyle(b);
      return { type: "line", xref: "paper", x0: 0, x1: 1, yref: "y", y0: b.at, y1: b.at,
               line: { color: style[0], width: 1, dash: style[1] } };
    }) : [];
    plot(el, traces, {
      height: 360, margin: { l: 60, r: 20, t: 20, b: 40 }, hovermode: "closest", shapes: shapes,
      xaxis: Object.assign({ title: { text: "step" }, rangemode: "tozero" },
                           stepTicks(series.map(function (s) {
                             return s.curve.reduce(function (a, p) { return p.index > a ? p.index : a; }, 0);
                           }))),
      yaxis: occupancy ? { title: { text: "occupancy after" }, tickformat: ".0%", rangemode: "tozero" }
                       : { title: { text: "tokens after" }, rangemode: "tozero" },
      legend: { orientation: "h", y: -0.2 },
    });
    followSteps(el);
  }

  // --- project trends ------------------------------------------------------------------

  function drawTrends(el) {
    if (!window.Plotly || el.dataset.drawn) return;
    el.dataset.drawn = "1";
    const rows = JSON.parse(el.dataset.rows || "[]");
    // Bucket starts come in UTC with an offset, which plotly's date axis does not read.
    const x = rows.map(function (r) { return String(r.t).replace(/(Z|[+-]\d\d:\d\d)$/, ""); });
    const width = { hour: 3600e3, day: 86400e3, week: 7 * 86400e3 }[el.dataset.bucket] || 86400e3;
    const range = el.dataset.start && el.dataset.end ? [el.dataset.start, el.dataset.end] : undefined;
    el.querySelectorAll("[data-metric]").forEach(function (box) {
      const kind = box.dataset.kind;
      const y = rows.map(function (r) { return r[box.dataset.metric]; });
      // A bar spans its bucket, from the bucket's start.
      const trace = kind === "bar"
        ? { type: "bar", x: x, y: y, marker: { color: "#3b82f6" }, offset: 0, width: 0.85 * width }
        : { type: "scatter", mode: "lines+markers", x: x, y: y, line: { color: "#0ea5e9" } };
      trace.hovertemplate = "%{x}: " + (kind === "percent" ? "%{y:.0%}" : "%{y:,.0f}") + "<extra></extra>";
      const yaxis = { rangemode: "tozero", fixedrange: true };
      if (kind === "percent") { yaxis.tickformat = ".0%"; yaxis.range = [0, 1.05]; }
      plot(box, [trace], {
        title: { text: text(box.dataset.title), font: { size: 13 }, x: 0.02 }, height: 220,
        margin: { l: 50, r: 12, t: 34, b: 36 }, showlegend: false, yaxis: yaxis,
        xaxis: range ? { type: "date", range: range } : { type: "date" },
      }, { displayModeBar: false });
    });
  }

  // --- a step's context by kind, and where its pinned texts and task sit ---------------

  const KIND_COLORS = {
    unseen: "#fca5a5", tools: "#a78bfa", system: "#64748b", messages: "#3b82f6",
    tool_results: "#f59e0b", thinking: "#14b8a6",
  };

  function drawComposition(el) {
    if (!window.Plotly || el.dataset.drawn) return;
    el.dataset.drawn = "1";
    const data = JSON.parse(el.dataset.rows || "{}");
    const bars = data.bars || [], markers = data.markers || [];
    const names = bars.map(function (b) { return b.name; });
    const traces = (data.kinds || []).map(function (k) {
      return {
        type: "bar", orientation: "h", name: text(k[1]), y: names,
        x: bars.map(function (b) { return b.parts[k[0]] || 0; }),
        marker: { color: KIND_COLORS[k[0]] || "#a3a3a3" },
        hovertemplate: "%{y}: " + text(k[1]) + " %{x:,} tokens<extra></extra>",
      };
    }).filter(function (t) { return t.x.some(function (v) { return v > 0; }); });
    const shapes = [], annotations = [];
    const strip = markers.length > 0 && data.total > 0;
    if (strip) {
      // The after context from its first token to its last, its middle third shaded.
      shapes.push({ type: "rect", xref: "x2", yref: "y2 domain", x0: data.total / 3, x1: 2 * data.total / 3,
                    y0: 0, y1: 1, fillcolor: "#fee2e2", line: { width: 0 }, layer: "below" });
      annotations.push({ xref: "x2", yref: "y2 domain", x: data.total / 2, y: 1, yanchor: "bottom",
                         text: "middle third", showarrow: false, font: { size: 10, color: "#b91c1c" } });
      traces.push({
        type: "scatter", mode: "markers", name: "position", xaxis: "x2", yaxis: "y2", showlegend: false,
        x: markers.map(function (m) { return m.at; }), y: markers.map(function (m) { return m.what; }),
        text: markers.map(function (m) { return m.third; }),
        customdata: markers.map(function (m) { return text(m.text); }),
        marker: { symbol: "diamond", size: 11, color: markers.map(function (m) { return m.third === "middle" ? "#dc2626" : "#111827"; }) },
        hovertemplate: "%{y} at token %{x:,} (%{text}): %{customdata}<extra></extra>",
      });
    }
    const layout = {
      barmode: "stack", height: strip ? 250 : 150, margin: { l: 60, r: 20, t: 10, b: 30 },
      showlegend: true, legend: { orientation: "h", traceorder: "normal", y: strip ? -0.25 : -0.45, font: { size: 11 } },
      yaxis: { domain: strip ? [0.52, 1] : [0, 1], fixedrange: true, autorange: "reversed" },
      xaxis: { rangemode: "tozero", ticksuffix: strip ? "" : " tokens" },
      shapes: shapes, annotations: annotations,
    };
    if (strip) {
      layout.xaxis2 = { anchor: "y2", range: [0, data.total], title: { text: "position in the after context (tokens)", standoff: 2 } };
      layout.yaxis2 = { domain: [0, 0.24], type: "category", fixedrange: true };
    }
    plot(el, traces, layout, { displayModeBar: false });
  }

  const DRAW = { occupancy: drawChart, compare: drawCompare, trends: drawTrends, composition: drawComposition };

  function drawCharts(root) {
    (root || document).querySelectorAll("[data-chart]").forEach(function (el) {
      const draw = DRAW[el.dataset.chart];
      if (draw) draw(el);
    });
  }

  // --- permalinks: copy one, land on one ---------------------------------------------

  function copyText(value) {
    if (navigator.clipboard && window.isSecureContext) return navigator.clipboard.writeText(value);
    // Plain http on another host has no clipboard API: the old way still works there.
    return new Promise(function (resolve, reject) {
      const area = document.createElement("textarea");
      area.value = value;
      area.className = "offscreen";
      area.setAttribute("readonly", "");
      document.body.appendChild(area);
      area.select();
      const done = document.execCommand && document.execCommand("copy");
      area.remove();
      if (done) { resolve(); } else { reject(new Error("copy failed")); }
    });
  }

  function flash(el, name) {
    el.classList.add(name);
    window.setTimeout(function () { el.classList.remove(name); }, 1600);
  }

  document.addEventListener("click", function (ev) {
    const link = ev.target.closest && ev.target.closest("a[data-copy]");
    if (!link || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
    ev.preventDefault();
    const url = new URL(link.getAttribute("href"), window.location.href).href;
    copyText(url).then(function () { flash(link, "copied"); }, function () { flash(link, "copy-failed"); });
  });

  function revealTarget() {
    const id = window.location.hash.slice(1);
    if (!id) return;
    if (id === "main") return; // the skip link's: the browser takes the focus there itself
    let el = document.getElementById(id);
    if (!el) { try { el = document.getElementById(decodeURIComponent(id)); } catch (e) { el = null; } }
    if (!el) { openHiddenRows(id); return; }
    // A message landed on shows its whole content, even where unchanged rows fold it away.
    el.querySelectorAll("details").forEach(function (d) { d.open = true; });
    for (let d = el.closest("details"); d; d = d.parentElement && d.parentElement.closest("details")) d.open = true;
    el.scrollIntoView({ block: "center" });
  }
  window.addEventListener("hashchange", revealTarget);

  // The archive opened on one original for a lost entity: the first place it was is
  // brought into view, however far down the original's text.
  function revealMarked() {
    const hit = document.querySelector(".archive pre mark.lost-entity");
    if (hit) hit.scrollIntoView({ block: "center" });
  }

  // A message a long context's first view left out: load the rows that hold it, then
  // look again (a load brings a page of rows, and may leave a line for the rest).
  function openHiddenRows(id) {
    const more = Array.from(document.querySelectorAll(".rows-more[data-anchors]")).find(function (el) {
      return el.dataset.anchors.split(" ").indexOf(id) >= 0;
    });
    const link = more && more.querySelector("a[hx-get]");
    if (!link || !window.htmx) return;
    window.htmx.ajax("GET", link.getAttribute("hx-get"), { target: more, swap: "outerHTML" })
      .then(function () { window.setTimeout(revealTarget, 0); });
  }

  // --- annotations ------------------------------------------------------------------

  document.addEventListener("click", function (ev) {
    const link = ev.target.closest && ev.target.closest("a[data-annotate]");
    const form = document.getElementById("annotate");
    if (!link || !form) return;
    ev.preventDefault();
    const target = form.querySelector("select[name=message]");
    const id = link.dataset.annotate;
    if (!Array.from(target.options).some(function (o) { return o.value === id; })) {
      // A message of rows loaded after the page: the form lists the page's own.
      const head = link.closest(".msg-head");
      const role = head && head.querySelector(".role");
      target.add(new Option((role ? role.textContent.trim() + " · " : "") + id, id));
    }
    target.value = id;
    form.scrollIntoView({ block: "center" });
    form.querySelector("textarea").focus();
  });
  document.addEventListener("annotations-changed", function (ev) {
    // Saved: the form that sent it starts afresh (the lists redraw themselves).
    const form = ev.target && ev.target.closest && ev.target.closest("form.annotate-form");
    if (form) form.reset();
  });

  // --- keyboard: j/k between steps, [ and ] between flagged steps ----------------------

  document.addEventListener("keydown", function (ev) {
    if (ev.ctrlKey || ev.metaKey || ev.altKey) return;
    const t = ev.target;
    if (t && (t.isContentEditable || /^(INPUT|TEXTAREA|SELECT)$/.test(t.tagName))) return;
    if (["j", "k", "[", "]"].indexOf(ev.key) < 0) return;
    let link = document.querySelector('#step-view a[data-key="' + ev.key + '"]');
    if (!link && !document.getElementById("step-view") && (ev.key === "j" || ev.key === "k")) {
      // No step open yet: j and k start at the first step the list shows.
      link = document.querySelector("#steps a[data-step]");
    }
    // Loaded directly, not by clicking: a key pressed just after a swap, before htmx has
    // taken over the new links, must not turn into a full page load.
    if (link) { ev.preventDefault(); loadStep(link.getAttribute("href")); }
  });

  // --- small behaviours ---------------------------------------------------------------

  // Escape in a note being edited does what its Cancel link does.
  document.addEventListener("keydown", function (ev) {
    if (ev.key !== "Escape") return;
    const editing = ev.target.closest && ev.target.closest("li.editing");
    const cancel = editing && editing.querySelector("a.cancel-edit");
    if (cancel) { ev.preventDefault(); cancel.click(); }
  });

  // A select that sends its form once changed (the project switcher) waits for Enter, or
  // its Go button, when the keyboard changed it: on a closed select every arrow press is
  // a change, and the first one left the page for the next project on the way.
  document.addEventListener("keydown", function (ev) {
    const select = ev.target.closest && ev.target.closest("form[data-autosubmit] select");
    if (!select) return;
    if (ev.key === "Enter") {
      ev.preventDefault();
      select.form.requestSubmit();
    } else if (ev.key !== "Tab" && ev.key !== "Shift") {
      select.dataset.keyed = "1";
    }
  });
  document.addEventListener("pointerdown", function (ev) {
    const select = ev.target.closest && ev.target.closest("form[data-autosubmit] select");
    if (select) delete select.dataset.keyed;
  });

  document.addEventListener("change", function (ev) {
    const form = ev.target.closest && ev.target.closest("form[data-autosubmit]");
    if (form && ev.target.dataset.keyed) {
      form.querySelectorAll(".js-hide").forEach(function (el) { el.hidden = false; });
    } else if (form) {
      form.submit();
    }
    // Picking dates in the overview's range picker means a range of one's own.
    const picker = ev.target.closest && ev.target.closest("form.range-picker");
    if (picker && (ev.target.name === "since" || ev.target.name === "until")) {
      picker.querySelector("select[name=range]").value = "custom";
    }
  });
  document.addEventListener("submit", function (ev) {
    const message = ev.target.dataset && ev.target.dataset.confirm;
    if (message && !window.confirm(message)) ev.preventDefault();
  });

  // The list page a step opened from elsewhere (a chart point, a link in the panel)
  // was last asked for: asked once, so a step the list cannot show is not asked again.
  // A page of the list the address names (a page paged to, then reloaded) is kept: not
  // traded for the open step's page.
  let listAskedFor = null;
  (function () {
    const asked = new URLSearchParams(window.location.search);
    const match = window.location.pathname.match(/\/steps\/(\d+)\/$/);
    if (match && (asked.has("after") || asked.has("before"))) listAskedFor = match[1];
  })();

  function markCurrentStep() {
    const view = document.getElementById("step-view");
    document.querySelectorAll("tr.current").forEach(function (tr) { tr.classList.remove("current"); });
    if (!view) return;
    const row = document.getElementById("step-row-" + view.dataset.step);
    const steps = document.getElementById("steps");
    if (!row && steps && steps.dataset.url && window.htmx && listAskedFor !== view.dataset.step) {
      // Not on the list's page: the page that shows it, which marks it once it settles.
      listAskedFor = view.dataset.step;
      window.htmx.ajax("GET", steps.dataset.url + "?step=" + encodeURIComponent(view.dataset.step),
                       { target: "#steps", swap: "innerHTML" });
      return;
    }
    if (row) {
      row.classList.add("current");
      // Scrolled within the list's own box only: the page, and the chart above the
      // list, stay put.
      const list = document.getElementById("steps");
      if (!list) return;
      const r = row.getBoundingClientRect(), b = list.getBoundingClientRect();
      const head = list.querySelector("thead");
      const live = document.getElementById("live-tail");
      const top = b.top + (head ? head.getBoundingClientRect().height : 0) + (live ? live.offsetHeight : 0);
      if (r.top < top) list.scrollTop -= top - r.top;
      else if (r.bottom > b.bottom) list.scrollTop += r.bottom - b.bottom;
      // The left pane scrolls on its own too (to the replay panel, the annotations):
      // the row comes back into its view, and so into the window's.
      const pane = list.closest(".left-col");
      if (!pane) return;
      const p = pane.getBoundingClientRect(), now = row.getBoundingClientRect();
      const seenTop = Math.max(p.top, 0) + (top - b.top), seenBottom = Math.min(p.bottom, window.innerHeight);
      if (now.bottom > seenBottom) pane.scrollTop += now.bottom - seenBottom;
      else if (now.top < seenTop) pane.scrollTop -= seenTop - now.top;
    }
  }

  // The step list's box ends where the left pane (or the window) does, so that the chart above it and
  // the rows in it show together (CSSOM styles are not inline styles: the CSP allows them).
  // The step panel likewise ends at the window's bottom, wherever the page is scrolled.
  function fitList() {
    const list = document.getElementById("steps");
    const live = document.getElementById("live-tail");
    if (list) list.style.setProperty("--live-height", (live ? live.offsetHeight : 0) + "px");
    const pane = list && list.closest(".left-col");
    if (!pane || getComputedStyle(pane).position !== "sticky") return;
    const bottom = Math.min(pane.getBoundingClientRect().bottom, window.innerHeight);
    const room = bottom - list.getBoundingClientRect().top - 4;
    list.style.maxHeight = Math.max(200, Math.floor(room)) + "px";
    const panel = document.getElementById("step-panel");
    if (panel) {
      const space = window.innerHeight - Math.max(0, panel.getBoundingClientRect().top) - 8;
      panel.style.maxHeight = Math.max(300, Math.floor(space)) + "px";
    }
  }
  window.addEventListener("resize", fitList);
  window.addEventListener("scroll", fitList, { passive: true });

  document.addEventListener("htmx:afterSettle", function (ev) {
    if (ev.detail.target && ev.detail.target.id === "step-panel") {
      // The panel scrolls on its own: back to its top, while the page (chart and list)
      // stays where it is; the page moves only when the panel is out of view.
      const panel = ev.detail.target;
      panel.scrollTop = 0;
      const box = panel.getBoundingClientRect();
      if (box.top < 0 || box.top > window.innerHeight) panel.scrollIntoView({ block: "start" });
      markCurrentStep();
    }
    // An outerHTML swap leaves ev.detail.target detached: look in the whole page.
    drawCharts(document);
  });
  // The live tail redraws the step list: a list scrolled to its end stays at its end,
  // so new steps come into view; the open step stays marked.
  // Each poll says which step the panel shows, so that the answer can redraw that
  // step's links (its next step may be the one that just arrived), and whether the
  // page has shown no step yet, so that the first ones bring the compare form.
  document.addEventListener("htmx:configRequest", function (ev) {
    if (!ev.detail.elt || ev.detail.elt.id !== "live-tail") return;
    const view = document.getElementById("step-view");
    if (view) ev.detail.parameters.open = view.dataset.step;
    const slot = document.getElementById("compare-slot");
    if (slot && !slot.querySelector("form") && document.getElementById("panel-hint")) {
      ev.detail.parameters.first = "1";
    }
  });
  // A page of the step list ("Later steps →") goes into the address, kept with the
  // step or comparison open beside it: reloaded or shared, it shows that page again.
  let pagedTo = null;
  document.addEventListener("htmx:beforeRequest", function (ev) {
    const link = ev.detail.elt;
    if (!link || !link.closest || !link.closest(".pager")) return;
    const asked = new URL(link.getAttribute("hx-get"), window.location.href).searchParams;
    pagedTo = ["after", "before"].filter(function (k) { return asked.has(k); })
      .map(function (k) { return [k, asked.get(k)]; });
    // Paged away from the open step on purpose: its page is not brought back.
    const view = document.getElementById("step-view");
    if (view) listAskedFor = view.dataset.step;
  });
  let listAtEnd = false;
  document.addEventListener("htmx:beforeSwap", function (ev) {
    const list = ev.detail.target;
    if (!list || list.id !== "steps") return;
    listAtEnd = list.scrollHeight - list.scrollTop - list.clientHeight < 8;
  });
  document.addEventListener("htmx:afterSettle", function (ev) {
    const list = ev.detail.target;
    if (list && list.id === "live-tail") { fitList(); return; }
    if (!list || list.id !== "steps") return;
    if (listAtEnd) list.scrollTop = list.scrollHeight;
    fitList();
    markCurrentStep();
    if (pagedTo) {
      const address = new URL(window.location.href);
      ["after", "before", "step"].forEach(function (k) { address.searchParams.delete(k); });
      pagedTo.forEach(function (kv) { address.searchParams.set(kv[0], kv[1]); });
      window.history.replaceState(window.history.state, "", address.toString());
      pagedTo = null;
    }
  });
  // A form whose answer has no place on this page (a restore previewed on a page of its
  // own has no Directives panel) is sent as a plain form, kept from htmx: the server
  // answers with the page that shows what became of it. htmx only logged the missing
  // target, and the button did nothing.
  document.addEventListener("submit", function (ev) {
    const target = ev.target.getAttribute && ev.target.getAttribute("hx-target");
    if (target && target.charAt(0) === "#" && !document.querySelector(target)) ev.stopPropagation();
  }, true);
  document.addEventListener("directive-sent", function () {
    document.querySelectorAll(".sent-note").forEach(function (el) { el.hidden = false; });
  });
  document.addEventListener("session-ended", redrawOverview);
  function redrawOverview() {
    // The session ended: redraw the header and the timeline from the server.
    const url = window.location.pathname.replace(/steps\/\d+\/.*$/, "");
    if (!window.htmx) return;
    ["#overview", "#overview-chart"].forEach(function (part) {
      if (document.querySelector(part)) {
        window.htmx.ajax("GET", url, { target: part, select: part, swap: "outerHTML" });
      }
    });
  }

  // htmx swaps only 2xx answers. A refusal drawn as HTML (a panel with its error:
  // the last admin's role, a directive not sent) is swapped like any answer; one in
  // plain text or JSON (a note holding a NUL, a step gone) is said above the page.
  document.addEventListener("htmx:beforeSwap", function (ev) {
    const xhr = ev.detail.xhr;
    if (xhr.status < 400 || xhr.status >= 500) return;
    if ((xhr.getResponseHeader("Content-Type") || "").startsWith("text/html")) {
      ev.detail.shouldSwap = true;
      ev.detail.isError = false;
    }
  });
  document.addEventListener("htmx:responseError", function (ev) {
    const box = document.getElementById("request-error");
    if (!box) return;
    const xhr = ev.detail.xhr;
    const type = xhr.getResponseHeader("Content-Type") || "";
    let text = "";
    if (type.startsWith("text/plain")) text = xhr.responseText;
    if (type.startsWith("application/json")) {
      try { text = JSON.parse(xhr.responseText).error || ""; } catch (e) { text = ""; }
    }
    text = String(text).slice(0, 300);
    box.textContent = text || ("The server answered " + xhr.status + " " + xhr.statusText + ".");
    box.hidden = false;
  });
  // What the user does next clears it; a request nobody made (the live tail's poll,
  // a redraw) leaves it for them to read.
  document.addEventListener("htmx:beforeRequest", function (ev) {
    const config = ev.detail.requestConfig;
    const cause = config && config.triggeringEvent;
    if (!cause || cause.isTrusted === false) return;
    const box = document.getElementById("request-error");
    if (box) box.hidden = true;
  });

  // A step's (or a comparison's) address loaded in a window too narrow for two columns
  // puts the panel under the chart and the list: brought into view, or a shared link
  // showed the session's chart with the step it named thousands of pixels below.
  function revealPanel() {
    if (window.location.hash || !PANEL_PATH.test(window.location.pathname)) return;
    const panel = document.getElementById("step-panel");
    if (panel && panel.getBoundingClientRect().top > window.innerHeight) {
      panel.scrollIntoView({ block: "start" });
    }
  }

  function start() {
    document.querySelectorAll(".js-hide").forEach(function (el) { el.hidden = true; });
    drawCharts(document);
    fitList();
    markCurrentStep();
    revealPanel();
    revealTarget();
    revealMarked();
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
  window.addEventListener("load", function () { drawCharts(document); fitList(); });
})();
