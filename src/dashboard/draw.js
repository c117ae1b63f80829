// The dashboard's drawing code, shared with the MCP Apps views (src/mcp/apps.rs): functions
// from data to DOM and SVG elements. They read no page element, fetch nothing and keep no
// state: what a drawing depends on (folded branches, growing mailboxes, a click) is passed in.
"use strict";

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === null || v === undefined || v === false) continue;
    if (k === "class") node.className = v;
    else if (k === "text") node.textContent = v;
    else if (k.startsWith("on")) node.addEventListener(k.slice(2), v);
    else node.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c !== null && c !== undefined && c !== false) node.append(c);
  }
  return node;
}

const fmtBytes = (n) => n == null ? "" : n >= 1 << 30 ? (n / (1 << 30)).toFixed(1) + " GB"
  : n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + " MB" : n >= 1024 ? Math.round(n / 1024) + " KB" : n + " B";

// ---------------------------------------------------------------------------------------------
// Vital signs: the server samples every node it started every 2 s and keeps an hour; each plot
// is drawn here in SVG from that history.

const SVG = "http://www.w3.org/2000/svg";
const PLOTS = [
  { title: "memory by type", unit: "bytes",
    series: ["memory_total", "memory_processes", "memory_binary", "memory_ets", "memory_code", "memory_atom", "os_rss"] },
  { title: "against their limits (%)", unit: "percent",
    series: [["processes", "process_limit"], ["ports", "port_limit"], ["atoms", "atom_limit"], ["ets_tables", "ets_limit"], ["os_fds", "os_fd_limit"]] },
  { title: "run queue", unit: "count", series: ["run_queue"] },
  { title: "errors per minute", unit: "rate", series: ["errors"] },
];

function svgEl(tag, attrs) {
  const node = document.createElementNS(SVG, tag);
  for (const [k, v] of Object.entries(attrs)) node.setAttribute(k, v);
  return node;
}

// [[t, v], …] of one series: a meter, a meter against its limit (%), or a counter's rate.
function points(data, spec, unit) {
  const col = (key) => data.keys.indexOf(key);
  const rows = data.rows;
  if (Array.isArray(spec)) {
    const [v, l] = spec.map(col);
    return rows.filter((r) => r[v] !== null && r[l]).map((r) => [r[0], (100 * r[v]) / r[l]]);
  }
  const c = col(spec);
  if (unit === "rate") {
    const out = [];
    for (let i = 1; i < rows.length; i++) {
      const [a, b] = [rows[i - 1], rows[i]];
      if (a[c] !== null && b[c] !== null && b[0] > a[0]) out.push([b[0], Math.max(0, ((b[c] - a[c]) * 60000) / (b[0] - a[0]))]);
    }
    return out;
  }
  return rows.filter((r) => r[c] !== null).map((r) => [r[0], r[c]]);
}

function shown(v, unit) {
  if (unit === "bytes") return fmtBytes(v);
  if (unit === "percent") return v.toFixed(1) + " %";
  return Number.isInteger(v) ? String(v) : v.toFixed(1);
}

// `s` seconds as the time left to a limit: `in 40 s`, `in 12 min`, `in 6 h`.
const untilText = (s) => s < 120 ? `in ${Math.round(s)} s` : s < 7200 ? `in ${Math.round(s / 60)} min` : `in ${Math.round(s / 3600)} h`;

// `ahead`: series a finding says rise toward a limit, each `{series, seconds, to}` (`to`: the
// limit in the plot's unit). With one, the history takes the left of the plot and the series
// goes on, dashed, to its limit at the right edge, labelled with the time left.
function plot(data, p, ahead = []) {
  const W = 320, H = 90;
  const lines = p.series.map((spec) => ({ name: Array.isArray(spec) ? spec[0] : spec, pts: points(data, spec, p.unit) }))
    .filter((l) => l.pts.length > 0);
  const all = lines.flatMap((l) => l.pts);
  const box = el("figure", { class: "plot" });
  box.append(el("figcaption", { text: p.title }));
  if (all.length < 2) {
    box.append(el("div", { class: "meta", text: "not enough samples yet" }));
    return box;
  }
  const going = ahead.filter((a) => a.seconds > 0 && a.to > 0 && lines.some((l) => l.name === a.series));
  const now = going.length ? Math.round(W * 0.7) : W;  // where the history ends
  const t0 = Math.min(...all.map((q) => q[0])), t1 = Math.max(...all.map((q) => q[0]));
  // Limits are drawn on at least 0–10 % so a few percent does not look like a full table.
  const top = Math.max(p.unit === "percent" ? 10 : 1, ...all.map((q) => q[1]), ...going.map((a) => a.to));
  const x = (t) => (((t - t0) / Math.max(1, t1 - t0)) * (now - 4) + 2).toFixed(1);
  const y = (v) => (H - 2 - (v / top) * (H - 6)).toFixed(1);
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": p.title });
  svg.append(svgEl("rect", { x: 0, y: 0, width: W, height: H, class: "plot-bg" }));
  const scale = svgEl("text", { x: W - 4, y: 11, "text-anchor": "end", class: "plot-scale" });
  scale.textContent = "top " + shown(top, p.unit === "rate" ? "count" : p.unit);
  svg.append(scale);
  if (going.length) svg.append(svgEl("line", { x1: now, y1: 0, x2: now, y2: H, class: "plot-now" }));
  const legend = el("ul", { class: "legend" });
  lines.forEach((l, i) => {
    svg.append(svgEl("polyline", { points: l.pts.map(([t, v]) => `${x(t)},${y(v)}`).join(" "), class: `series s${i}`, "data-series": l.name }));
    legend.append(el("li", { class: `s${i}`, "data-series": l.name, text: `${l.name} ${shown(l.pts[l.pts.length - 1][1], p.unit)}` }));
    for (const a of going.filter((a) => a.series === l.name)) {
      const [tl, vl] = l.pts[l.pts.length - 1];
      svg.append(svgEl("line", { x1: x(tl), y1: y(vl), x2: W - 2, y2: y(a.to), class: `ahead s${i}`, "data-series": l.name }));
      const label = svgEl("text", { x: W - 4, y: Number(y(a.to)) + 22, "text-anchor": "end", class: "plot-ahead", "data-series": l.name });
      label.textContent = `${l.name}: limit ${untilText(a.seconds)}`;
      svg.append(label);
    }
  });
  box.append(svg, legend);
  return box;
}

// ---------------------------------------------------------------------------------------------
// Supervision tree: a <details> per supervisor (folded as the person left it), a line per worker.

const SUPERVISORS = ["supervisor", "dynamic_supervisor"];

function label(n) {
  // A folded run of alike siblings (a pool) shows as its first, with the count.
  return (n.name || n.id || n.pid || "?") + (n.folded ? ` ×${n.folded} alike (e.g. this one)` : "");
}

function growthMark(n, growing) {
  const g = n.pid && growing.get(n.pid);
  return g ? el("span", { class: "grow", title: `mailbox grew by ${g.growth} in 500 ms (now ${g.queue})`, text: ` ▲ mailbox +${g.growth}` }) : null;
}

// The path a root's branches are remembered under (see `treeNode`).
const treeRootPath = (root) => root.application || root.name || root.id || "root";

// A child's restarts (`restarted`), or a supervisor's unnamed children's (`child_restarts`),
// as the helper counted them from the supervisors' reports.
function restartedMark(n) {
  const r = n.restarted || n.child_restarts;
  if (!r) return null;
  const at = new Date(r.last_at_ms).toLocaleTimeString();
  const what = n.restarted ? "restarted" : "children restarted";
  return el("span", { class: "restarted", title: `last at ${at}: ${r.last_reason}`, text: ` ↻ ${what} ${r.count}×, last at ${at}` });
}

// `n` drawn with its children. `seen.closed` is the set of branch paths the person closed (kept
// up to date here), `seen.growing` maps a pid to its mailbox's growth.
function treeNode(n, path, seen) {
  const restart = n.restart ? el("span", { class: "restart", text: " " + n.restart }) : null;
  const pid = n.pid ? el("span", { class: "pid", text: " " + n.pid }) : el("span", { class: "pid", text: " " + (n.status || "") });
  if (!SUPERVISORS.includes(n.kind) && !(n.children && n.children.length)) {
    return el("div", { class: "leaf", "data-pid": n.pid || "" },
      el("span", { class: "kind", text: n.kind === "worker" ? "○ " : "· " }), label(n), pid, restart, restartedMark(n), growthMark(n, seen.growing));
  }
  const counts = n.counts || {};
  const total = counts.active !== undefined ? counts.active : n.child_count !== null && n.child_count !== undefined ? n.child_count : (n.children || []).length;
  const details = el("details", { "data-path": path, open: !seen.closed.has(path) },
    el("summary", {},
      el("span", { class: "kind", text: n.kind === "dynamic_supervisor" ? "◆ " : "■ " }),
      n.application ? el("b", { text: n.application + ": " }) : null,
      label(n),
      n.strategy ? el("span", { class: "strategy", text: " " + n.strategy }) : null,
      n.intensity !== null && n.intensity !== undefined ? el("span", { class: "pid", text: ` (${n.intensity} in ${n.period} s)` }) : null,
      el("span", { class: "pid", text: ` ${total} children` + (counts.supervisors ? `, ${counts.supervisors} supervisors` : "") }),
      restart, pid, restartedMark(n), growthMark(n, seen.growing)),
    (n.children || []).map((c, i) => treeNode(c, path + "/" + (c.id || c.name || c.pid || i), seen)),
    n.truncated_children ? el("div", { class: "leaf pid", text: `… ${n.truncated_children} more not shown` }) : null,
    n.children_note ? el("div", { class: "leaf pid", text: n.children_note }) : null);
  details.addEventListener("toggle", () => {
    if (details.open) seen.closed.delete(path); else seen.closed.add(path);
  });
  return details;
}

// ---------------------------------------------------------------------------------------------
// Profile: one process's stack read every 5 ms for a second (process_info's profile_ms), drawn
// as a flame graph of the folded stacks: the root at the bottom, each frame as wide as the
// share of samples in which it was on the stack, the application's own frames in the accent
// colour, the application's functions seen most listed above.

const FRAME_H = 18;
const CHAR_W = 6.7;           // width of one character of the labels (11px monospace)

// `Elixir.Shop.Cart:add/2` as Elixir writes it (`Shop.Cart.add/2`); Erlang frames as they are.
function frameLabel(frame) {
  if (!frame.startsWith("Elixir.")) return frame;
  const colon = frame.indexOf(":");
  return colon < 0 ? frame.slice(7) : frame.slice(7, colon) + "." + frame.slice(colon + 1);
}

// The folded stacks (`a;b;c`, root first) as a tree of {frame, count, children}.
function flameTree(folded) {
  const root = { frame: "", count: 0, children: new Map() };
  for (const { stack, count } of folded) {
    root.count += count;
    let node = root;
    for (const frame of stack.split(";")) {
      let child = node.children.get(frame);
      if (!child) node.children.set(frame, child = { frame, count: 0, children: new Map() });
      child.count += count;
      node = child;
    }
  }
  return root;
}

function depthOf(node) {
  let deepest = 0;
  for (const child of node.children.values()) deepest = Math.max(deepest, 1 + depthOf(child));
  return deepest;
}

// A warm colour that stays the same for a module from one profile to the next.
function warm(frame) {
  let h = 0;
  for (const c of frame.split(":")[0]) h = (h * 31 + c.charCodeAt(0)) >>> 0;
  return `hsl(${10 + (h % 40)}, ${70 + (h % 20)}%, ${58 + (h % 12)}%)`;
}

// One line on a profile (`process_info`'s data with `profile`): whose, how often it ran.
function profileSummary(data) {
  const p = data.profile;
  const who = data.registered_name || data.pid;
  const cut = p.folded_cut ? `; ${p.folded_cut} rarer stacks not drawn` : "";
  return `${who}: running or runnable in ${p.running} of ${p.reads} reads over ${p.duration_ms} ms${cut}`;
}

// The flame graph of a profile, `width` pixels wide: an <svg>, or a note when it never ran.
function drawFlame(data, width) {
  const p = data.profile;
  const who = data.registered_name || data.pid;
  const root = flameTree(p.folded);
  if (!root.count) return el("div", { class: "meta", text: "never caught running: it waited the whole time" });
  // The application's modules: those of the functions it listed as hot.
  const hot = new Set(p.hot.map((h) => h.split(" (")[0]));
  const appModules = new Set();
  (function mark(node) {
    for (const child of node.children.values()) {
      if (hot.has(frameLabel(child.frame)) || hot.has(child.frame)) appModules.add(child.frame.split(":")[0]);
      mark(child);
    }
  })(root);
  const total = Math.max(p.running, root.count);
  const W = Math.max(300, width);
  const H = (depthOf(root) + 1) * FRAME_H;
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": `flame graph of ${who}` });
  const frame = (node, x, depth, label) => {
    const w = (node.count / total) * W;
    if (w < 1) return;
    const y = H - (depth + 1) * FRAME_H;
    const app = node.frame && appModules.has(node.frame.split(":")[0]);
    const g = svgEl("g", { class: node.frame ? "frame" + (app ? " app" : "") : "frame all", "data-frame": node.frame });
    g.append(svgEl("rect", { x: x.toFixed(1), y, width: Math.max(0.5, w - 0.5).toFixed(1), height: FRAME_H - 1, fill: warm(node.frame) }));
    const fits = Math.floor((w - 6) / CHAR_W);
    if (fits >= 2) {
      const text = svgEl("text", { x: (x + 3).toFixed(1), y: y + 12.5 });
      text.textContent = label.length > fits ? label.slice(0, fits - 1) + "…" : label;
      g.append(text);
    }
    const title = svgEl("title", {});
    title.textContent = `${node.frame || who}\n${node.count} samples, ${((100 * node.count) / total).toFixed(1)} %`;
    g.append(title);
    svg.append(g);
    let at = x;
    for (const child of [...node.children.values()].sort((a, b) => b.count - a.count)) {
      frame(child, at, depth + 1, frameLabel(child.frame));
      at += (child.count / total) * W;
    }
  };
  frame(root, 0, 0, `all: ${root.count} samples of ${who}`);
  return svg;
}

// ---------------------------------------------------------------------------------------------
// Clusters: members on a circle, a line where two see each other, a dashed red one where a
// partition cuts them; a click (or Enter) calls `onSelect` with the member's name.

function clusterFigure(view, onSelect) {
  const n = view.members.length;
  const size = 180, r = 62, c = size / 2;
  const at = (i) => [c + r * Math.cos(2 * Math.PI * i / n - Math.PI / 2),
                     c + r * Math.sin(2 * Math.PI * i / n - Math.PI / 2)];
  const svg = svgEl("svg", { viewBox: `0 0 ${size} ${size}`, width: size, height: size, role: "img",
                             "aria-label": `cluster ${view.cluster}` });
  view.members.forEach((a, i) => view.members.forEach((b, j) => {
    if (j <= i) return;
    const [x1, y1] = at(i), [x2, y2] = at(j);
    const cut = a.blocks.includes(b.member) || b.blocks.includes(a.member);
    const both = a.sees.includes(b.member) && b.sees.includes(a.member);
    if (!cut && !both) return;
    svg.append(svgEl("line", { x1, y1, x2, y2, class: cut ? "cut" : "link",
                               "data-pair": `${a.member} ${b.member}` }));
  }));
  view.members.forEach((m, i) => {
    const [x, y] = at(i);
    const g = svgEl("g", { class: "member " + (m.status === "ok" ? "ok" : "down"), "data-member": m.member,
                           tabindex: 0 });
    g.append(svgEl("circle", { cx: x, cy: y, r: 9 }));
    const t = svgEl("text", { x, y: y - 13, "text-anchor": "middle" });
    t.textContent = m.member;
    g.append(t);
    const title = svgEl("title", {});
    title.textContent = `${m.member} (${m.state}): ${m.status}; sees ${m.sees.join(", ") || "nobody"}` +
      (m.blocks.length ? `; blocks ${m.blocks.join(", ")}` : "");
    g.append(title);
    g.addEventListener("click", () => onSelect(m.member));
    g.addEventListener("keydown", (e) => { if (e.key === "Enter") onSelect(m.member); });
    svg.append(g);
  });
  const summary = view.split
    ? "split: " + view.split.map((side) => "[" + side.join(", ") + "]").join(" | ")
    : view.fully_connected ? "fully connected" : "not fully connected";
  return el("figure", { class: "cluster" + (view.split ? " split" : ""), "data-cluster": view.cluster },
    el("figcaption", {}, el("strong", { text: view.cluster }), " " + summary), svg);
}

