// modelexport report: the module tree, an icicle chart of the hierarchy and each module's nodes.
// Reads the JSON in #report-data; draws with d3-hierarchy (layout) and d3-selection (DOM).
(function () {
  "use strict";
  const data = JSON.parse(document.getElementById("report-data").textContent);
  const header = data.header;
  const modules = data.modules;
  const nodes = data.nodes;
  const NODE_ROWS = 300; // rows of a node list drawn at first; the rest on request
  const ROW_HEIGHT = 22;

  modules.forEach((m, i) => {
    m.index = i;
    m.children = [];
    m.name = m.tag.split("/").pop() || "(untagged root)";
    m.depth = m.parent < 0 ? 0 : modules[m.parent].depth + 1;
    m.search = (m.tag + " " + m.module).toLowerCase();
    if (m.parent >= 0) modules[m.parent].children.push(i);
  });
  const ownNodes = modules.map(() => []);
  nodes.module.forEach((mi, ni) => { if (mi >= 0) ownNodes[mi].push(ni); });

  const number = (v) => (v === null || v === undefined ? "n/a" : v.toLocaleString("en-US"));
  const bytes = (v) => {
    if (v === null || v === undefined) return "n/a";
    const units = ["B", "KiB", "MiB", "GiB"];
    let i = 0;
    while (v >= 1024 && i < units.length - 1) { v /= 1024; i += 1; }
    return (i ? v.toFixed(1) : String(v)) + " " + units[i];
  };
  const ms = (us) => (us === null || us === undefined ? "n/a" : (us / 1000).toFixed(3) + " ms");
  const sci = (v) => (v === null || v === undefined ? "n/a" : typeof v === "string" ? v : v.toExponential(2));

  // A measure sizes the chart: `own` is what a module adds itself (the layout sums it up the tree),
  // `total` is the figure shown for the module with its descendants.
  const measures = [
    { key: "nodes", label: "nodes", own: (m) => m.nodes, total: (m) => m.total_nodes, format: number },
    { key: "parameters", label: "parameters", own: (m) => m.parameters, total: (m) => m.total_parameters, format: number },
    { key: "bytes", label: "parameter bytes", own: (m) => m.parameter_bytes, total: (m) => m.total_parameter_bytes, format: bytes },
  ];
  if (header.profile) {
    measures.push({ key: "time", label: "time", own: (m) => m.time_self_us || 0, total: (m) => m.time_us, format: ms });
  }
  if (header.numerics) {
    // error is not additive: the chart keeps node counts for size and colours each module by its error
    measures.push({ key: "error", label: "error (coloured; sized by nodes)", own: (m) => m.nodes, total: (m) => m.error_max_abs,
      format: sci, colour: true });
  }
  let measure = measures[0];
  const expanded = new Set([0]);
  modules.forEach((m) => { if (m.depth < 1) expanded.add(m.index); });
  let selected = -1;
  let zoom = 0;
  let matches = new Set();

  // ---- header
  function drawHeader() {
    const h = d3.select("#header");
    h.append("h1").text((header.model || header.file) + " · " + header.file);
    const rows = [
      ["model", header.model + (header.source ? " (" + header.source + ")" : "")],
      ["strategy", header.strategy || "n/a"],
      ["coverage", header.tagged + " of " + header.nodes + " nodes tagged (" + (100 * header.tagged / Math.max(header.nodes, 1)).toFixed(1) + "%)"],
      ["verification", header.verification],
      ["exporter", (header.exporter || "n/a") + ", opset " + header.opset],
      ["versions", "modelexport " + (header.modelexport_version || "n/a") + (header.producer ? ", " + header.producer : "")],
    ];
    if (header.evidence) {
      rows.push(["decided by", Object.entries(header.evidence).sort((a, b) => b[1] - a[1])
        .map(([k, v]) => k + " " + (100 * v).toFixed(0) + "%").join(", ")]);
    }
    rows.push(["modules", String(modules.length)]);
    if (header.profile) rows.push(["time", header.profile]);
    if (header.numerics) {
      rows.push(["error", header.numerics]);
      rows.push(["first divergent", header.first_divergent.length ? header.first_divergent.map((m) => m || "(root)").join(", ") : "none"]);
    }
    const dl = h.append("dl");
    rows.forEach(([k, v]) => { dl.append("dt").text(k); dl.append("dd").text(v); });
  }

  // ---- chart
  const root = d3.hierarchy(modules[0], (m) => m.children.map((i) => modules[i]));
  const byIndex = new Map();
  root.each((d) => byIndex.set(d.data.index, d));
  const palette = ["#9ecae1", "#a1d99b", "#fdd0a2", "#dadaeb", "#c7e9c0", "#fcbba1", "#c6dbef", "#fdae6b", "#bcbddc"];
  let maxError = 0;
  modules.forEach((m) => { if (typeof m.error_max_abs === "number" && m.error_max_abs > maxError) maxError = m.error_max_abs; });
  let maxTime = 0;
  modules.forEach((m) => { if (m.time_self_us > maxTime) maxTime = m.time_self_us; });

  function fill(d) {
    const m = d.data;
    if (measure.colour) {
      const e = typeof m.error_max_abs === "number" ? m.error_max_abs : null;
      if (e === null) return "#eeeeee";
      const t = maxError > 0 ? Math.max(0, Math.min(1, (Math.log10(e + 1e-12) + 12) / (Math.log10(maxError + 1e-12) + 12))) : 0;
      return m.diverges ? d3Heat(0.55 + 0.45 * t) : d3Heat(0.45 * t);
    }
    if (measure.key === "time") return d3Heat(maxTime > 0 ? (m.time_self_us || 0) / maxTime : 0);
    return palette[m.depth % palette.length];
  }
  function d3Heat(t) { // white-yellow-red
    const r = 255, g = Math.round(255 - 170 * t), b = Math.round(255 - 230 * Math.min(1, t * 1.6));
    return "rgb(" + r + "," + Math.max(g, 40) + "," + Math.max(b, 25) + ")";
  }

  function drawChart() {
    root.sum((m) => Math.max(0, measure.own(m) || 0));
    if (!root.value) root.sum((m) => m.nodes); // nothing to size by (no parameters, say): node counts
    const svg = d3.select("#chart-svg");
    const width = document.getElementById("chart").clientWidth - 32 || 800;
    const top = byIndex.get(zoom);
    const depth = root.height - top.depth + 1;
    const height = Math.min(depth, 12) * ROW_HEIGHT;
    svg.attr("viewBox", "0 0 " + width + " " + height).attr("height", height);
    d3.partition().size([width, (root.height + 1) * ROW_HEIGHT])(root);
    const span = top.x1 - top.x0 || 1;
    const sx = (x) => ((x - top.x0) / span) * width;
    const y0 = top.y0;
    const shown = top.descendants().filter((d) => d.y0 - y0 < height && sx(d.x1) - sx(d.x0) >= 0.5);
    const cells = svg.selectAll("g.cell").data(shown, (d) => d.data.index).join((enter) => {
      const g = enter.append("g").attr("class", "cell");
      g.append("rect");
      g.append("text").attr("dy", "1.1em").attr("dx", 3);
      g.on("click", (event, d) => { select(d.data.index, true); if (d.children) { zoom = d.data.index; drawChart(); } })
        .on("mousemove", (event, d) => showTooltip(event, d.data))
        .on("mouseleave", hideTooltip);
      return g;
    });
    cells.attr("transform", (d) => "translate(" + sx(d.x0) + "," + (d.y0 - y0) + ")")
      .classed("match", (d) => matches.has(d.data.index))
      .classed("selected", (d) => d.data.index === selected)
      .classed("enters", (d) => !!d.data.error_enters)
      .attr("data-tag", (d) => d.data.tag);
    cells.select("rect").attr("width", (d) => Math.max(0, sx(d.x1) - sx(d.x0))).attr("height", ROW_HEIGHT - 1).attr("fill", fill);
    cells.select("text").text((d) => {
      const w = sx(d.x1) - sx(d.x0);
      if (w < 40) return "";
      const label = d.data.name;
      const chars = Math.floor((w - 6) / 6.5);
      return label.length > chars ? label.slice(0, Math.max(chars - 1, 1)) + "…" : label;
    });
    drawBreadcrumb();
  }

  function drawBreadcrumb() {
    const path = byIndex.get(zoom).ancestors().reverse();
    const nav = d3.select("#breadcrumb");
    nav.selectAll("*").remove();
    nav.append("span").attr("class", "muted").text(path.length > 1 ? "chart shows " : "click a module in the chart to zoom into it");
    if (path.length > 1) {
      path.forEach((d, i) => {
        if (i) nav.append("span").text(" / ");
        nav.append("a").text(d.data.name).on("click", () => { zoom = d.data.index; drawChart(); });
      });
    }
  }

  function figuresOf(m) {
    const rows = [
      ["nodes", number(m.total_nodes) + " (own " + number(m.nodes) + ")"],
      ["parameters", number(m.total_parameters) + " (own " + number(m.parameters) + ")"],
      ["parameter bytes", bytes(m.total_parameter_bytes) + " (own " + bytes(m.parameter_bytes) + ")"],
    ];
    if (header.profile) {
      rows.push(["time", ms(m.time_us) + " (" + (100 * (m.time_share || 0)).toFixed(1) + "%), self " + ms(m.time_self_us)]);
    }
    if (header.numerics) {
      rows.push(["error", m.error_max_abs === null ? "not compared" : "max abs " + sci(m.error_max_abs) + ", max rel " + sci(m.error_max_rel)
        + ", inputs " + sci(m.error_input_max_abs) + (m.error_enters ? ", error comes in here" : m.diverges ? ", differs" : "")]);
    }
    return rows;
  }

  const tooltip = document.getElementById("tooltip");
  function showTooltip(event, m) {
    const t = d3.select(tooltip);
    t.selectAll("*").remove();
    t.append("strong").text(m.name);
    t.append("div").attr("class", "muted").text(m.module || m.tag);
    const table = t.append("table");
    figuresOf(m).forEach(([k, v]) => { const tr = table.append("tr"); tr.append("td").text(k); tr.append("td").text(v); });
    tooltip.hidden = false;
    const x = Math.min(event.clientX + 12, window.innerWidth - tooltip.offsetWidth - 8);
    tooltip.style.left = x + "px";
    tooltip.style.top = (event.clientY + 14) + "px";
  }
  function hideTooltip() { tooltip.hidden = true; }

  // ---- tree
  function visibleRows() {
    const rows = [];
    const stack = [0];
    while (stack.length) {
      const i = stack.pop();
      rows.push(i);
      if (expanded.has(i)) {
        const kids = modules[i].children;
        for (let k = kids.length - 1; k >= 0; k -= 1) stack.push(kids[k]);
      }
    }
    return rows;
  }

  function drawTree() {
    const rows = d3.select("#tree").selectAll("div.tree-row").data(visibleRows(), (i) => i).join((enter) => {
      const row = enter.append("div").attr("class", "tree-row");
      row.append("span").attr("class", "toggle").on("click", (event, i) => {
        event.stopPropagation();
        if (expanded.has(i)) expanded.delete(i); else expanded.add(i);
        drawTree();
      });
      row.append("span").attr("class", "name");
      row.append("span").attr("class", "mark");
      row.append("span").attr("class", "figure");
      row.on("click", (event, i) => select(i, false));
      return row;
    });
    rows.order()
      .attr("data-tag", (i) => modules[i].tag)
      .attr("data-module", (i) => modules[i].module)
      .style("padding-left", (i) => 6 + 14 * modules[i].depth + "px")
      .classed("selected", (i) => i === selected)
      .classed("match", (i) => matches.has(i))
      .classed("expanded", (i) => expanded.has(i));
    rows.select(".toggle").text((i) => (modules[i].children.length ? (expanded.has(i) ? "▾" : "▸") : ""));
    rows.select(".name").text((i) => modules[i].name);
    rows.select(".mark").text((i) => (modules[i].error_enters ? "error comes in here" : ""));
    rows.select(".figure").text((i) => measure.format(measure.total(modules[i])));
  }

  function revealInTree(i) {
    let p = modules[i].parent;
    while (p >= 0) { expanded.add(p); p = modules[p].parent; }
  }

  // ---- details
  function subtreeNodes(i) {
    const found = [];
    const stack = [i];
    while (stack.length) {
      const k = stack.pop();
      for (const n of ownNodes[k]) found.push(n);
      for (const c of modules[k].children) stack.push(c);
    }
    return found.sort((a, b) => a - b);
  }

  function drawDetails() {
    const box = d3.select("#details");
    box.selectAll("*").remove();
    if (selected < 0) return;
    const m = modules[selected];
    box.append("h2").text(m.name);
    box.append("div").attr("class", "muted").text(m.tag + (m.module ? "  ·  " + m.module : ""));
    if (m.error_enters) box.append("div").attr("class", "enters").text("the numerical error comes in here (first divergent)");
    const table = box.append("table").attr("id", "figures");
    figuresOf(m).forEach(([k, v]) => { const tr = table.append("tr"); tr.append("th").text(k); tr.append("td").text(v); });
    box.append("h3").text("own op types");
    const ops = box.append("div").attr("class", "ops");
    const entries = Object.entries(m.op_types);
    if (!entries.length) ops.append("span").attr("class", "muted").text("none: all its nodes are in its submodules");
    entries.forEach(([op, n]) => ops.append("span").text(op + " " + n));
    const list = subtreeNodes(selected);
    box.append("h3").text("nodes (" + list.length + ", with its submodules')");
    const nodeTable = box.append("table").attr("id", "node-table");
    const head = nodeTable.append("thead").append("tr");
    ["name", "op type", "module", "inputs", "outputs"].forEach((c) => head.append("th").text(c));
    const body = nodeTable.append("tbody");
    let shown = 0;
    const more = () => {
      const upto = Math.min(list.length, shown + (shown ? 5000 : NODE_ROWS));
      for (let k = shown; k < upto; k += 1) {
        const n = list[k];
        const tr = body.append("tr").attr("data-node", nodes.name[n]);
        tr.append("td").text(nodes.name[n]);
        tr.append("td").text(nodes.op_type[n]);
        const owner = modules[nodes.module[n]];
        tr.append("td").text(owner.index === selected ? "" : owner.tag.slice(m.tag.length + 1));
        tr.append("td").text(nodes.inputs[n].join(", "));
        tr.append("td").text(nodes.outputs[n].join(", "));
      }
      shown = upto;
      box.select("button.more").remove();
      if (shown < list.length) {
        box.append("button").attr("class", "more").text("show " + Math.min(5000, list.length - shown) + " more of " + (list.length - shown))
          .on("click", more);
      }
    };
    more();
  }

  function select(i, fromChart) {
    selected = i;
    revealInTree(i);
    drawTree();
    drawDetails();
    d3.select("#chart-svg").selectAll("g.cell").classed("selected", (d) => d.data.index === selected);
    if (fromChart) {
      const row = document.querySelector('#tree .tree-row.selected');
      if (row) row.scrollIntoView({ block: "nearest" });
    }
  }

  // ---- controls
  function drawControls() {
    d3.select("#measure").selectAll("option").data(measures).join("option")
      .attr("value", (d) => d.key).text((d) => d.label);
    d3.select("#measure").on("change", (event) => {
      measure = measures.find((d) => d.key === event.target.value) || measures[0];
      drawChart();
      drawTree();
    });
    let timer = null;
    d3.select("#search").on("input", (event) => {
      clearTimeout(timer);
      timer = setTimeout(() => search(event.target.value), 120);
    });
  }

  function search(text) {
    const query = text.trim().toLowerCase();
    matches = new Set();
    if (query) modules.forEach((m) => { if (m.search.includes(query)) matches.add(m.index); });
    let revealed = 0;
    for (const i of matches) { if (revealed++ >= 200) break; revealInTree(i); }
    d3.select("#search-count").text(query ? matches.size + " module" + (matches.size === 1 ? "" : "s") : "");
    drawTree();
    d3.select("#chart-svg").selectAll("g.cell").classed("match", (d) => matches.has(d.data.index));
    const first = document.querySelector("#tree .tree-row.match");
    if (first) first.scrollIntoView({ block: "nearest" });
  }

  modules.forEach((m) => { if (m.error_enters) revealInTree(m.index); }); // where the error comes in is in view
  drawHeader();
  drawControls();
  drawChart();
  drawTree();
  let resizeTimer = null;
  window.addEventListener("resize", () => { clearTimeout(resizeTimer); resizeTimer = setTimeout(drawChart, 150); });
  window.modelexportReport = { ready: true, readyMs: performance.now(), modules: modules.length, nodes: nodes.name.length };
})();
