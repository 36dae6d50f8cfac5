// The graph's geometry in screen pixels, read by test_graph_layout.py (page.evaluate).
() => {
  const root = document.getElementById("graph");
  const box = (el) => { const r = el.getBoundingClientRect(); return { x: r.left, y: r.top, w: r.width, h: r.height }; };
  const nodes = {};
  for (const g of root.querySelectorAll("g.node")) nodes[g.dataset.step] = box(g.querySelector("rect"));
  const groups = {};
  for (const g of root.querySelectorAll("g.group")) groups[g.dataset.group] = box(g.querySelector("rect"));
  const labels = [];
  for (const g of root.querySelectorAll("g.node, g.group")) for (const t of g.querySelectorAll(":scope > text, .map-progress text"))
    labels.push({ step: g.dataset.step, text: t.textContent, box: box(t), owner: box(g.querySelector("rect")) });
  const edges = [];
  for (const path of root.querySelectorAll("path.edge")) {
    const m = path.getScreenCTM();
    const points = path.getAttribute("d").trim().split(/\s+/).map((cmd) => {
      const [x, y] = cmd.slice(1).split(",").map(Number);
      const p = new DOMPoint(x, y).matrixTransform(m);
      return [p.x, p.y];
    });
    edges.push({ from: path.dataset.from, to: path.dataset.to, points });
  }
  return { nodes, groups, labels, edges, view: box(root) };
}
