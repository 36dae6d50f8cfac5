// reactorflow dashboard: the run graph. Laid out by dagre 3.1.3 (vendor/dagre.min.js, MIT; see
// vendor/README.md for why), never by hand: dagre ranks the steps, orders them to cross few
// edges, places them without overlap and routes every edge through points that go around the
// nodes; this file only draws what it computed, as SVG (DOM calls only, never HTML strings).
//
// - a step is a box, its label cut to fit with an ellipsis (the full text in its tooltip);
// - a composed child is a group: a labelled box around its steps (a dagre compound node);
// - a map is ONE node with its elements' progress bar (done, failed, running of N: the run's
//   `maps`, from GET api/runs/{id}); its element reactor's steps are named in its tooltip;
// - the graph fits its box ("Fit"), zooms with the mouse wheel and pans by dragging.
"use strict";
window.reactorflowGraph = (() => {
  const NS = "http://www.w3.org/2000/svg";
  const W = 176, H = 34, MAP_W = 220, MAP_H = 50, PAD = 8, GROUP_LABEL = 20, MARGIN = 12;
  const MIN_ZOOM = 0.1, MAX_ZOOM = 3;

  function svg(tag, attrs) {
    const node = document.createElementNS(NS, tag);
    for (const [k, v] of Object.entries(attrs || {})) node.setAttribute(k, v);
    return node;
  }

  // the steps as drawn: element steps fold into their map; a compose step whose steps are in the
  // graph is a group (parent of its steps), else a plain box
  function shape(steps) {
    const byKey = Object.fromEntries(steps.map((s) => [s.key, s]));
    const drawn = steps.filter((s) => !s.element_of);
    const children = {};
    for (const s of drawn) if (s.level && byKey[s.level]) (children[s.level] = children[s.level] || []).push(s.key);
    const groups = new Set(drawn.filter((s) => s.kind === "compose" && children[s.key]).map((s) => s.key));
    const elements = {};
    for (const s of steps) if (s.element_of) (elements[s.element_of] = elements[s.element_of] || []).push(s.key.slice(s.element_of.length + 1));
    return { byKey, drawn, children, groups, elements };
  }

  // an edge into (out of) a group goes to its first (from its last) steps, inside it
  function entries(key, g, out) {
    if (!g.groups.has(key)) return [key];
    const inside = g.children[key];
    const local = new Set(inside);
    const ends = out ? inside.filter((k) => !inside.some((o) => g.byKey[o].deps.includes(k)))
      : inside.filter((k) => !g.byKey[k].deps.some((d) => local.has(d)));
    return ends.flatMap((k) => entries(k, g, out));
  }

  function layoutOnce(g, rankdir) {
    const graph = new dagre.graphlib.Graph({ compound: true, multigraph: true });
    graph.setGraph({ rankdir, nodesep: 28, ranksep: 44, edgesep: 12, marginx: MARGIN, marginy: MARGIN + GROUP_LABEL });
    graph.setDefaultEdgeLabel(() => ({}));
    for (const s of g.drawn) {
      if (g.groups.has(s.key)) graph.setNode(s.key, { group: true });
      else graph.setNode(s.key, s.kind === "map" ? { width: MAP_W, height: MAP_H } : { width: W, height: H });
    }
    for (const s of g.drawn) if (s.level && g.groups.has(s.level)) graph.setParent(s.key, s.level);
    let n = 0;
    for (const s of g.drawn) for (const dep of s.deps) {
      if (!g.byKey[dep] || g.byKey[dep].element_of) continue;
      for (const a of entries(dep, g, true)) for (const b of entries(s.key, g, false)) graph.setEdge(a, b, {}, "e" + (n++));
    }
    dagre.layout(graph);
    return graph;
  }

  // how far a group's box reaches above dagre's (room for its label, and its inner groups')
  function lift(key, g) {
    const inner = (g.children[key] || []).filter((k) => g.groups.has(k));
    return GROUP_LABEL + Math.max(0, ...inner.map((k) => lift(k, g)));
  }

  function boxes(graph, g) {
    const found = {};
    for (const key of graph.nodes()) {
      const n = graph.node(key);
      const up = g.groups.has(key) ? lift(key, g) : 0;
      found[key] = { x: n.x - n.width / 2, y: n.y - n.height / 2 - up, width: n.width, height: n.height + up };
    }
    return found;
  }

  function extent(graph, rects) {
    let w = 0, h = 0;
    for (const r of Object.values(rects)) { w = Math.max(w, r.x + r.width); h = Math.max(h, r.y + r.height); }
    for (const e of graph.edges()) for (const p of graph.edge(e).points) { w = Math.max(w, p.x); h = Math.max(h, p.y); }
    return { width: w + MARGIN, height: h + MARGIN };
  }

  // left to right or top to bottom: whichever fits the box at the larger scale
  function layout(g, box) {
    let best = null;
    for (const rankdir of ["LR", "TB"]) {
      const graph = layoutOnce(g, rankdir);
      const rects = boxes(graph, g);
      const size = extent(graph, rects);
      const scale = Math.min(box.width / size.width, box.height / size.height);
      if (!best || scale > best.scale + 1e-9) best = { graph, rects, size, scale, rankdir };
    }
    return best;
  }

  // the label cut to `room` pixels with an ellipsis (the full text stays in the tooltip)
  function fit(text, room) {
    const full = text.textContent;
    if (text.getComputedTextLength() <= room) return;
    let lo = 0, hi = full.length;
    while (lo < hi) {
      const mid = Math.ceil((lo + hi) / 2);
      text.textContent = full.slice(0, mid) + "\u2026";
      if (text.getComputedTextLength() <= room) lo = mid; else hi = mid - 1;
    }
    text.textContent = full.slice(0, lo) + "\u2026";
  }

  function progressBar(node, progress, width) {
    const g = svg("g", { class: "map-progress", "data-total": progress.total, "data-done": progress.done,
      "data-failed": progress.failed, "data-running": progress.running });
    const x = PAD, y = 24, w = width - 2 * PAD, h = 7;
    g.append(svg("rect", { class: "track", x, y, width: w, height: h }));
    let at = x;
    for (const part of ["done", "failed", "running"]) {
      const width = progress.total ? (w * progress[part]) / progress.total : 0;
      g.append(svg("rect", { class: "part " + part, x: at, y, width, height: h }));
      at += width;
    }
    const counts = svg("text", { class: "counts", x: PAD, y: 44 });
    counts.textContent = `${progress.done} done \u00b7 ${progress.failed} failed \u00b7 ${progress.running} running of ${progress.total}`;
    g.append(counts);
    node.append(g);
    return counts;
  }

  // -- zoom and pan: one transform on the viewport group, kept across redraws of the same graph
  const views = new WeakMap(); // svg element -> { k, x, y, structure, fitted }

  function apply(root, view) {
    root.querySelector("g.viewport").setAttribute("transform", `translate(${view.x},${view.y}) scale(${view.k})`);
    root.dataset.zoom = view.k.toFixed(4);
  }

  function fitView(root) {
    const view = views.get(root);
    if (!view || !view.size) return;
    const box = root.getBoundingClientRect();
    const k = Math.min(MAX_ZOOM, 1, box.width / view.size.width, box.height / view.size.height);
    view.k = k;
    view.x = (box.width - view.size.width * k) / 2;
    view.y = (box.height - view.size.height * k) / 2;
    apply(root, view);
  }

  function attach(root) {
    if (root.dataset.interactive) return;
    root.dataset.interactive = "1";
    root.addEventListener("wheel", (event) => {
      const view = views.get(root);
      if (!view) return;
      event.preventDefault();
      const box = root.getBoundingClientRect();
      const px = event.clientX - box.left, py = event.clientY - box.top;
      const k = Math.min(MAX_ZOOM, Math.max(MIN_ZOOM, view.k * Math.exp(-event.deltaY * 0.0015)));
      view.x = px - ((px - view.x) * k) / view.k; // the point under the cursor stays put
      view.y = py - ((py - view.y) * k) / view.k;
      view.k = k;
      apply(root, view);
    }, { passive: false });
    let drag = null;
    root.addEventListener("pointerdown", (event) => {
      const view = views.get(root);
      if (!view || event.button !== 0) return;
      drag = { x: event.clientX - view.x, y: event.clientY - view.y, id: event.pointerId };
      root.setPointerCapture(event.pointerId);
      root.classList.add("dragging");
    });
    root.addEventListener("pointermove", (event) => {
      const view = views.get(root);
      if (!drag || !view) return;
      view.x = event.clientX - drag.x; view.y = event.clientY - drag.y;
      apply(root, view);
    });
    const end = () => { if (drag) { root.releasePointerCapture(drag.id); drag = null; root.classList.remove("dragging"); } };
    root.addEventListener("pointerup", end);
    root.addEventListener("pointercancel", end);
  }

  // draw `steps` (the reactor's graph) with the run's state into the svg element `root`.
  // `describe(step, state)` gives a step's status word and tooltip (dashboard.js's phrasing)
  function draw(root, steps, run, describe) {
    attach(root);
    const g = shape(steps);
    const structure = g.drawn.map((s) => s.key + ">" + s.deps.join(",") + "^" + s.level).join("|");
    const holder = root.parentElement;
    const box = { width: Math.max(holder.clientWidth, 200), height: Math.max(holder.clientHeight, 200) };
    let view = views.get(root);
    if (!view || view.structure !== structure) {
      view = { k: 1, x: 0, y: 0, structure, placed: layout(g, box), fitted: false };
      views.set(root, view);
    }
    const placed = view.placed;
    view.size = placed.size;
    root.dataset.rankdir = placed.rankdir;
    const viewport = svg("g", { class: "viewport" });
    root.replaceChildren(svg("defs"), viewport);
    const marker = svg("marker", { id: "arrow", viewBox: "0 0 10 10", refX: "9", refY: "5", markerWidth: "7",
      markerHeight: "7", orient: "auto" });
    marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }));
    root.firstChild.append(marker);
    const groups = svg("g", { class: "groups" }), edges = svg("g", { class: "edges" }), nodes = svg("g", { class: "nodes" });
    viewport.append(groups, edges, nodes);
    const toFit = [];
    // outer groups first, so inner ones are drawn over them
    const depth = (key) => { let d = 0; for (let s = g.byKey[key]; s && s.level && g.groups.has(s.level); s = g.byKey[s.level]) d++; return d; };
    for (const key of [...g.groups].sort((a, b) => depth(a) - depth(b))) {
      const r = placed.rects[key], state = run.steps[key] || { status: "pending" };
      const group = svg("g", { class: "group s-" + state.status, "data-group": key, "data-step": key });
      group.append(svg("rect", { x: r.x, y: r.y, width: r.width, height: r.height }));
      const text = svg("text", { x: r.x + PAD, y: r.y + 14 });
      text.textContent = key + " \u00b7 " + describe(g.byKey[key], state).word;
      const title = svg("title"); title.textContent = describe(g.byKey[key], state).title;
      group.append(text, title);
      groups.append(group);
      toFit.push([text, r.width - 2 * PAD]);
    }
    for (const e of placed.graph.edges()) {
      const points = placed.graph.edge(e).points;
      const d = points.map((p, i) => (i ? "L" : "M") + p.x.toFixed(1) + "," + p.y.toFixed(1)).join(" ");
      edges.append(svg("path", { class: "edge", d, "data-from": e.v, "data-to": e.w, "marker-end": "url(#arrow)" }));
    }
    const maps = run.maps || {};
    for (const s of g.drawn) {
      if (g.groups.has(s.key)) continue;
      const r = placed.rects[s.key];
      const state = run.steps[s.key] || { status: "pending" };
      const said = describe(s, state);
      const node = svg("g", { class: "node kind-" + s.kind + " s-" + state.status, "data-step": s.key, transform: `translate(${r.x},${r.y})` });
      node.append(svg("rect", { width: r.width, height: r.height }));
      const text = svg("text", { class: "label", x: PAD, y: s.kind === "map" ? 17 : 21 });
      // inside a group, its own name (the group names the child); the full key in the tooltip
      const name = s.level && g.groups.has(s.level) ? s.key.slice(s.level.length + 1) : s.key;
      text.textContent = name + " \u00b7 " + said.word;
      const title = svg("title");
      title.textContent = said.title + (g.elements[s.key] ? "; for each element: " + g.elements[s.key].join(", ") : "");
      node.append(text, title);
      toFit.push([text, r.width - 2 * PAD]);
      if (s.kind === "map") {
        const progress = maps[s.key] || { total: 0, done: 0, failed: 0, running: 0 };
        toFit.push([progressBar(node, progress, r.width), r.width - 2 * PAD]);
        title.textContent += ` (${progress.done} done, ${progress.failed} failed, ${progress.running} running of ${progress.total})`;
      }
      nodes.append(node);
    }
    for (const [text, room] of toFit) fit(text, room);
    if (!view.fitted) { view.fitted = true; fitView(root); } else apply(root, view);
  }

  return Object.freeze({ draw, fit: fitView });
})();
