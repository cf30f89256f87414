// The agent's shape beside the branch graph (issue 30): its nodes and edges from the server
// (graph.get_graph(); conditional edges dashed), drawn with the vendored Cytoscape.js, with the
// nodes the selected checkpoint runs next highlighted.
"use strict";

(() => {
  const el = document.getElementById("agent");
  if (!el || typeof cytoscape === "undefined") return;
  const style = [
    { selector: "node", style: { label: "data(label)", "font-size": 11, "text-valign": "center", "text-halign": "center", shape: "round-rectangle",
      width: "label", height: 22, padding: "6px", "background-color": "#eef2ff", "border-width": 1, "border-color": "#6366f1", color: "#1e1b4b" } },
    { selector: "node.terminal", style: { shape: "ellipse", "background-color": "#f3f4f6", "border-color": "#9ca3af", color: "#6b7280" } },
    { selector: "node.next", style: { "background-color": "#e58a00", "border-color": "#9a3412", color: "#fff", "font-weight": 700 } },
    { selector: "edge", style: { width: 1.5, "line-color": "#94a3b8", "target-arrow-color": "#94a3b8", "target-arrow-shape": "triangle", "curve-style": "bezier" } },
    { selector: "edge.conditional", style: { "line-style": "dashed" } },
  ];
  let cy = null;

  function highlight(next) {
    if (!cy) return;
    cy.nodes().removeClass("next");
    for (const n of next || []) cy.getElementById(n).addClass("next");
    el.dataset.next = JSON.stringify(next || []);
  }

  TL.get(el.dataset.agentUrl, "json").then((shape) => {
    const elements = [
      ...shape.nodes.map((n) => ({ data: { id: n.id, label: n.label }, classes: n.id.startsWith("__") ? "terminal" : "" })),
      ...shape.edges.map((e, i) => ({ data: { id: `e${i}`, source: e.source, target: e.target }, classes: e.conditional ? "conditional" : "" })),
    ];
    cy = cytoscape({ container: el, elements, style, layout: { name: "breadthfirst", directed: true, spacingFactor: 1.1 },
                     userZoomingEnabled: false, autoungrabify: true });
    highlight(JSON.parse(el.dataset.next || "[]"));
    window.tlAgent = { cy, highlight };
    el.dataset.ready = "1";
  }).catch(() => { el.textContent = "cannot draw the agent's graph"; });

  // the selected checkpoint (the side panel) names what runs next
  const panel = document.getElementById("panel");
  if (panel) new MutationObserver(() => {
    const next = panel.querySelector("#panel-next");
    if (next) highlight(JSON.parse(next.dataset.next || "[]"));
  }).observe(panel, { childList: true });
})();
