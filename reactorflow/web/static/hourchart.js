// reactorflow dashboard: the home page's chart of runs per status over the last hour, drawn
// as plain SVG (DOM calls only) from GET api/stats/hour, whose buckets the server computes.
"use strict";
(() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 720, H = 150, PAD_L = 34, PAD_B = 20, PAD_T = 8;
  const $ = (id) => document.getElementById(id);
  let timer = null;

  function svg(tag, attrs, text) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, String(v));
    if (text !== undefined) node.textContent = text;
    return node;
  }

  async function load() {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem("reactorflow-token");
    if (token) headers.Authorization = "Bearer " + token;
    const response = await fetch(new URL("api/stats/hour", document.baseURI).toString(), { headers });
    if (!response.ok) return null;
    return response.json();
  }

  function draw(stats) {
    const box = $("hour-svg");
    box.setAttribute("viewBox", "0 0 " + W + " " + H);
    box.replaceChildren();
    const order = stats.statuses;
    const heights = stats.buckets.map((b) => Object.values(b.counts).reduce((a, n) => a + n, 0));
    const top = Math.max(1, ...heights);
    const plotH = H - PAD_B - PAD_T;
    const slot = (W - PAD_L) / stats.buckets.length;
    box.append(svg("line", { x1: PAD_L, y1: H - PAD_B, x2: W, y2: H - PAD_B, class: "hc-axis" }));
    box.append(svg("text", { x: PAD_L - 6, y: PAD_T + 10, "text-anchor": "end", class: "hc-label" }, String(top)));
    box.append(svg("text", { x: PAD_L - 6, y: H - PAD_B, "text-anchor": "end", class: "hc-label" }, "0"));
    stats.buckets.forEach((bucket, i) => {
      let y = H - PAD_B;
      const x = PAD_L + i * slot + 2;
      for (const status of order) {
        const n = bucket.counts[status] || 0;
        if (!n) continue;
        const h = (n / top) * plotH;
        y -= h;
        const bar = svg("rect", { x: x, y: y, width: Math.max(1, slot - 4), height: h,
          class: "hc-bar s-" + status, "data-status": status, "data-count": n });
        bar.append(svg("title", {}, status + ": " + n));
        box.append(bar);
      }
      const minutes = Math.round((stats.until - bucket.start) / 60);
      if (i % 3 === 0) box.append(svg("text", { x: x, y: H - 5, class: "hc-label" }, "-" + minutes + "m"));
    });
    box.append(svg("text", { x: W - 2, y: H - 5, "text-anchor": "end", class: "hc-label" }, "now"));
    const totals = {};
    for (const bucket of stats.buckets) for (const [s, n] of Object.entries(bucket.counts)) totals[s] = (totals[s] || 0) + n;
    const legend = $("hour-legend");
    legend.replaceChildren();
    const shown = order.filter((s) => totals[s]);
    if (!shown.length) legend.append(document.createTextNode("No runs in the last hour."));
    for (const status of shown) {
      const item = document.createElement("span");
      item.className = "hc-key";
      const swatch = document.createElement("i");
      swatch.className = "badge s-" + status;
      item.append(swatch, document.createTextNode(" " + status + " " + totals[status]));
      legend.append(item);
    }
    if (stats.truncated) legend.append(document.createTextNode(" (the oldest buckets are cut short)"));
    $("hour-chart").hidden = false;
  }

  async function refresh() {
    if ($("list-view").hidden) return;
    try {
      const stats = await load();
      if (stats) draw(stats);
    } catch (e) { /* the list shows the connection's error already */ }
  }

  function watch() {
    if ($("list-view").hidden) { if (timer) { clearInterval(timer); timer = null; } return; }
    refresh();
    if (!timer) timer = setInterval(refresh, 30000);
  }

  new MutationObserver(watch).observe($("list-view"), { attributes: true, attributeFilter: ["hidden"] });
  window.reactorflowHourChart = Object.freeze({ refresh });
  watch();
})();
