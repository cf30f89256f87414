// The thread page: the checkpoint tree drawn as a branch graph with Cytoscape.js.
// Positions come from the server (layout.lay_out: lane = x, row = y, newest on top),
// so drawing is a preset layout of only the rows on screen (see sync below): the cost
// of a frame does not grow with the thread.
"use strict";

(() => {
  const el = document.getElementById("graph");
  if (!el) return;
  const LANE = 28, ROW = 26;
  const started = performance.now();
  const status = document.getElementById("graph-status");
  const panel = document.getElementById("panel");
  const picks = { a: null, b: null };

  const style = [
    { selector: "node", style: {
      width: 12, height: 12, "background-color": "#2f6fde", "border-width": 0,
      label: "data(label)", "font-size": 11, color: "#374151", "text-halign": "right", "text-valign": "center",
      "text-margin-x": "data(margin)", "min-zoomed-font-size": 7, "font-family": "system-ui, sans-serif" } },
    { selector: "node.off", style: { "background-color": "#93b4ee", color: "#6b7280" } },
    { selector: "node.input", style: { shape: "round-rectangle", "background-color": "#2e9d5b" } },
    { selector: "node.forked, node.update", style: { shape: "diamond", width: 14, height: 14, "background-color": "#8b5cf6" } },
    { selector: "node.fork", style: { "border-width": 2, "border-style": "dashed", "border-color": "#1e3a8a" } },
    { selector: "node.sub", style: { "border-width": 3, "border-style": "double", "border-color": "#0e7490" } },
    { selector: "node.interrupted", style: { "background-color": "#e58a00", width: 14, height: 14 } },
    { selector: "node.error", style: { "background-color": "#d23c3c", width: 14, height: 14 } },
    { selector: "node.head", style: { width: 18, height: 18, "border-width": 4, "border-color": "#111827", "border-style": "solid", "font-weight": 700 } },
    { selector: "node.concurrent", style: { "border-width": 4, "border-style": "double", "border-color": "#d23c3c" } },
    { selector: "node.pick-a", style: { "overlay-color": "#2f6fde", "overlay-opacity": 0.25, "overlay-padding": 6 } },
    { selector: "node.pick-b", style: { "overlay-color": "#e58a00", "overlay-opacity": 0.3, "overlay-padding": 6 } },
    { selector: "edge", style: { width: 2, "line-color": "#9db5e6", "curve-style": "haystack", "haystack-radius": 0 } },
    { selector: "edge.branch", style: { "curve-style": "taxi", "taxi-direction": "vertical", "taxi-turn": "100%", "taxi-turn-min-distance": 4 } },
    { selector: "edge.head-path", style: { "line-color": "#2f6fde", width: 2.5 } },
    { selector: "edge.merge", style: { "line-style": "dashed", "line-color": "#8b5cf6", "curve-style": "bezier" } },
  ];

  function label(n) {
    const who = n.writers.length ? n.writers.join(", ") : (n.source || "");
    const marks = [n.head ? "HEAD" : "", n.interrupted ? "· interrupt" : "", n.error ? "· error" : "", n.fork ? "· fork" : "",
                   n.concurrent !== undefined ? "· concurrent run" : "",
                   n.subgraphs.length ? `· ${n.subgraphs.length} subgraph run${n.subgraphs.length > 1 ? "s" : ""}` : "",
                   n.merge !== undefined ? "· merge" : "", ...(n.tags || []).map((t) => `· tag: ${t}`)].filter(Boolean);
    return `${n.step === null ? "" : n.step} ${who}${marks.length ? "  " + marks.join(" ") : ""}`;
  }

  function classes(n) {
    const c = [];
    if (n.source === "input") c.push("input");
    if (n.source === "fork") c.push("forked");
    if (n.source === "update") c.push("update");
    if (!n.on_head_path) c.push("off");
    if (n.fork) c.push("fork");
    if (n.subgraphs.length) c.push("sub");
    if (n.interrupted) c.push("interrupted");
    if (n.error) c.push("error");
    if (n.concurrent !== undefined) c.push("concurrent");
    if (n.head) c.push("head");
    if (picks.a === n.id) c.push("pick-a");
    if (picks.b === n.id) c.push("pick-b");
    return c.join(" ");
  }

  // Virtualized drawing: Cytoscape holds only the rows in (and half a screen around) the
  // viewport, plus the edges crossing them; panning swaps rows in and out. Row r is
  // layout.nodes[r] (rows are checkpoint_id order), so a window is a slice.
  let cy = null;
  let L = null;
  let top = 0;
  let edges = [];
  const MAX_ROWS = 400; // rows visible at the smallest zoom

  // The server sends each node's row as its index and its parent as a row (see layout.lay_out).
  function prepare(layout) {
    layout.nodes.forEach((n, i) => { n.row = i; n.writers = n.writers || []; n.subgraphs = n.subgraphs || []; });
    L = layout;
    top = layout.nodes.length - 1;
    edges = layout.nodes.filter((n) => n.parent !== undefined).map((n) => {
      const p = layout.nodes[n.parent];
      return {
        group: "edges", data: { id: `e${n.id}`, source: p.id, target: n.id },
        classes: [p.lane !== n.lane ? "branch" : "", n.on_head_path ? "head-path" : ""].filter(Boolean).join(" "),
        lo: n.parent, hi: n.row,
      };
    });
    // a merge checkpoint's second parent: the branch merged in, dashed
    layout.nodes.filter((n) => n.merge !== undefined).forEach((n) => {
      const p = layout.nodes[n.merge];
      edges.push({ group: "edges", data: { id: `m${n.id}`, source: p.id, target: n.id }, classes: "merge",
                   lo: Math.min(n.merge, n.row), hi: Math.max(n.merge, n.row) });
    });
  }

  // Every label starts right of the last lane (as git log --graph writes its text after the
  // graph), so no lane's line runs through another lane's labels.
  function nodeElement(n) {
    const margin = (L.lanes - 1 - n.lane) * LANE + 10;
    return { group: "nodes", data: { id: n.id, label: label(n), node: n, margin }, position: { x: n.lane * LANE, y: (top - n.row) * ROW },
             classes: classes(n) };
  }

  function windowRows() {
    const ext = cy.extent();
    const pad = (ext.y2 - ext.y1) / 2;
    return [Math.max(0, top - Math.ceil((ext.y2 + pad) / ROW)), Math.min(top, top - Math.floor((ext.y1 - pad) / ROW))];
  }

  function sync() {
    const [lo, hi] = windowRows();
    const want = new Map();
    for (let r = lo; r <= hi; r++) want.set(L.nodes[r].id, L.nodes[r]);
    const wantEdges = edges.filter((e) => e.hi >= lo && e.lo <= hi);
    for (const e of wantEdges) {
      for (const r of [e.lo, e.hi]) want.set(L.nodes[r].id, L.nodes[r]);
    }
    const keep = new Set([...want.keys(), ...wantEdges.map((e) => e.data.id)]);
    cy.batch(() => {
      cy.elements().forEach((e) => { if (!keep.has(e.id())) e.remove(); });
      const add = [];
      for (const [id, n] of want) if (cy.getElementById(id).empty()) add.push(nodeElement(n));
      for (const e of wantEdges) if (cy.getElementById(e.data.id).empty()) add.push(e);
      cy.add(add);
    });
  }

  let queued = false;
  function queueSync() {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; sync(); });
  }

  function draw(layout) {
    prepare(layout);
    cy = cytoscape({
      container: el, elements: [], style, layout: { name: "preset" }, userZoomingEnabled: false,
      minZoom: Math.min(1, el.clientHeight / (MAX_ROWS * ROW)), maxZoom: 3, boxSelectionEnabled: false, autoungrabify: true,
    });
    // A click selects (shift: the second of a pair to compare); a second click on the same node opens it.
    let last = { id: null, at: 0 };
    cy.on("tap", "node", (evt) => {
      const id = evt.target.id();
      const shift = Boolean(evt.originalEvent && evt.originalEvent.shiftKey);
      if (!shift && last.id === id && performance.now() - last.at < 400) { window.location = checkpointUrl(id); return; }
      last = { id, at: performance.now() };
      select(id, shift ? "b" : "a");
    });
    cy.on("viewport", queueSync);
    // The wheel scrolls through history; with Ctrl (or a pinch) it zooms.
    el.addEventListener("wheel", (evt) => {
      evt.preventDefault();
      if (evt.ctrlKey) {
        const box = el.getBoundingClientRect();
        cy.zoom({ level: cy.zoom() * Math.pow(0.998, evt.deltaY), renderedPosition: { x: evt.clientX - box.left, y: evt.clientY - box.top } });
      } else cy.panBy({ x: -evt.deltaX, y: -evt.deltaY });
      clamp();
    }, { passive: false });
    home();
  }

  // Scrolling stops at the newest and at the oldest checkpoint.
  function clamp() {
    const pan = cy.pan();
    const height = top * ROW * cy.zoom();
    const y = Math.max(Math.min(40, el.clientHeight - 40 - height), Math.min(40, pan.y));
    if (y !== pan.y) cy.pan({ x: pan.x, y });
  }

  // The whole graph when it fits, else the head at zoom 1 near the top.
  function home() {
    if (L.nodes.length <= 60) {
      cy.viewport({ zoom: Math.min(1.4, Math.max(cy.minZoom(), (el.clientHeight - 60) / ((top + 1) * ROW))), pan: { x: 0, y: 0 } });
      const z = cy.zoom();
      cy.pan({ x: el.clientWidth / 3 - (L.lanes * LANE * z) / 2, y: 30 });
    } else {
      cy.viewport({ zoom: 1, pan: { x: Math.max(40, el.clientWidth / 4 - L.lanes * LANE), y: 40 } });
    }
    sync();
  }

  function summary(layout) {
    const forks = (layout.concurrent_forks || []).length;
    status.title = (layout.concurrent_forks || []).join("\n");
    return `${layout.nodes.length.toLocaleString()} checkpoints · ${layout.lanes} lane${layout.lanes === 1 ? "" : "s"}` +
      (forks ? ` · ${forks} concurrent fork${forks === 1 ? "" : "s"} (two runs overlapped; hover for details)` : "");
  }

  function update(layout) {
    prepare(layout);
    cy.elements().remove();
    sync();
    status.textContent = `${summary(layout)} · updated ${new Date().toLocaleTimeString()}`;
  }

  function checkpointUrl(id) {
    const u = new URL("/checkpoint", window.location.origin);
    u.searchParams.set("thread_id", el.dataset.thread);
    if (el.dataset.ns) u.searchParams.set("ns", el.dataset.ns);
    u.searchParams.set("checkpoint_id", id);
    return u.pathname + u.search;
  }

  async function select(id, which) {
    picks[which] = id;
    cy.nodes().forEach((n) => n.classes(classes(n.data("node"))));
    document.getElementById(`pick-${which}`).textContent = `${which.toUpperCase()} …${id.slice(-8)}`;
    const link = document.getElementById("diff-link");
    if (picks.a && picks.b && picks.a !== picks.b) {
      const u = new URL("/diff", window.location.origin);
      u.searchParams.set("thread_id", el.dataset.thread);
      if (el.dataset.ns) u.searchParams.set("ns", el.dataset.ns);
      u.searchParams.set("a", picks.a);
      u.searchParams.set("b", picks.b);
      link.href = u.pathname + u.search;
      link.classList.remove("disabled");
      link.removeAttribute("aria-disabled");
    }
    if (which === "a") {
      const u = new URL(el.dataset.panelUrl, window.location.origin);
      u.searchParams.set("checkpoint_id", id);
      panel.innerHTML = await TL.get(u.pathname + u.search, "html");
    }
  }

  panel.addEventListener("click", (evt) => {
    const b = evt.target.closest("button[data-pick]");
    if (b) select(b.dataset.id, b.dataset.pick);
  });
  document.getElementById("fit").addEventListener("click", () => {
    cy.viewport({ zoom: Math.max(cy.minZoom(), Math.min(1.4, (el.clientHeight - 60) / ((top + 1) * ROW))), pan: { x: el.clientWidth / 3, y: 30 } });
  });
  document.getElementById("to-head").addEventListener("click", home);

  TL.get(el.dataset.graphUrl, "json").then((layout) => {
    const fetched = performance.now();
    draw(layout);
    cy.one("render", () => requestAnimationFrame(() => {
      const done = performance.now();
      // performance.now() counts from the navigation's start: since_navigation_ms is what the user waits
      const timings = { checkpoints: layout.nodes.length, lanes: layout.lanes, fetch_ms: Math.round(fetched - started),
                        draw_ms: Math.round(done - fetched), total_ms: Math.round(done - started), since_navigation_ms: Math.round(done) };
      window.tlGraph = { cy, timings, select };
      el.dataset.ready = "1";
      status.textContent = `${summary(layout)} · drawn in ${timings.total_ms} ms`;
    }));
    TL.watch(el.dataset.changesUrl, async () => update(await TL.get(el.dataset.graphUrl, "json")));
  }).catch((e) => { status.textContent = `cannot draw the graph: ${e.message}`; });
})();
