// The os_sup_mcp dashboard: polls the JSON API of the server that served it (nothing else,
// the page's CSP forbids it) and redraws. Every loop survives errors and a server restart.
"use strict";

const LOG_KEEP = 2000;        // lines kept in the page
const LOG_SHOWN = 600;        // lines drawn (the newest that pass the filters)
const LEVELS = ["emergency", "alert", "critical", "error", "warning", "notice", "info", "debug"];

const state = {
  instance: null,        // the server's instance id: a new one resets every cursor
  readOnly: true,
  nodes: [],
  selected: null,
  logSince: null,
  logLines: [],
  logNode: null,
  activitySince: 0,
  growing: new Map(),    // pid -> growth of its queue over the window
  closed: new Set(),     // tree branches the person closed
  lastTree: "",
  profiling: 0,          // the latest profile asked for: an older answer is not drawn
};

const $ = (id) => document.getElementById(id);
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

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

async function api(path, options) {
  const response = await fetch(path, Object.assign({ cache: "no-store" }, options));
  let body = null;
  try { body = await response.json(); } catch (_) { body = null; }
  if (!response.ok) {
    const error = new Error((body && body.error) || `${response.status} ${response.statusText}`);
    error.status = response.status;
    throw error;
  }
  return body;
}

function link(up, text) {
  const badge = $("link");
  badge.className = "badge " + (up ? "up" : "down");
  badge.textContent = text;
}

// Runs `step` forever, every `ms` (slower while the tab is hidden); errors are shown, not fatal.
async function every(ms, step) {
  for (;;) {
    try { await step(); } catch (e) { if (!e.status) link(false, "disconnected, retrying…"); }
    await sleep(document.hidden ? Math.max(ms, 5000) : ms);
  }
}

const fmtBytes = (n) => n == null ? "" : n >= 1 << 30 ? (n / (1 << 30)).toFixed(1) + " GB"
  : n >= 1 << 20 ? (n / (1 << 20)).toFixed(1) + " MB" : n >= 1024 ? Math.round(n / 1024) + " KB" : n + " B";
function fmtAge(ms) {
  if (ms == null) return "";
  const s = Math.floor(ms / 1000);
  if (s < 60) return s + " s";
  if (s < 3600) return Math.floor(s / 60) + " min " + (s % 60) + " s";
  return Math.floor(s / 3600) + " h " + Math.floor((s % 3600) / 60) + " min";
}

// ---------------------------------------------------------------------------------------------
// Nodes

async function refreshNodes() {
  const data = await api("/api/nodes");
  link(true, "live");
  if (state.instance !== data.server.instance) {
    if (state.instance !== null) resetCursors();
    state.instance = data.server.instance;
  }
  state.readOnly = data.server.read_only;
  $("mode").hidden = !state.readOnly;
  $("version").textContent = "v" + data.server.version;
  state.nodes = data.nodes;
  if (!state.selected || !data.nodes.some((n) => n.name === state.selected)) {
    select(data.nodes.length ? data.nodes[0].name : null);
  }
  drawNodes();
}

function resetCursors() {
  state.logSince = null;
  state.logLines = [];
  state.activitySince = 0;
  $("activity").replaceChildren();
  state.lastTree = "";
}

function drawNodes() {
  const list = $("nodes");
  if (!state.nodes.length) {
    list.replaceChildren(el("li", { class: "empty" }, "no nodes yet: the agent starts them with ", el("code", { text: "start" })));
    return;
  }
  list.replaceChildren(...state.nodes.map(nodeCard));
  const node = state.nodes.find((n) => n.name === state.selected);
  const note = $("node-note");
  if (node && !["running", "attached"].includes(node.state)) {
    note.hidden = false;
    note.textContent = `${node.name} is ${node.state}` +
      (node.last_exit ? `; last exit: ${node.last_exit}` : "") +
      (node.failure ? `\nfailure: ${node.failure}` : "") +
      (node.last_error ? `\nlast error: ${node.last_error}` : "") +
      (["stopped", "failed"].includes(node.state) ? "\nIts log below is kept until it is started again." : "");
  } else {
    note.hidden = true;
  }
}

function nodeCard(node) {
  const facts = [];
  const fact = (k, v) => { if (v !== null && v !== undefined && v !== "") facts.push(el("dt", { text: k }), el("dd", { text: String(v) })); };
  fact("uptime", fmtAge(node.uptime_ms));
  fact("restarts", node.restarts);
  if (node.info) {
    fact("memory", fmtBytes(node.info.memory_total));
    fact("processes", node.info.process_count);
    fact("OTP", node.info.otp_release + (node.info.elixir_version ? " / Elixir " + node.info.elixir_version : ""));
  }
  fact("OS pid", node.os_pid);
  fact("last exit", node.last_exit);
  fact("last error", node.last_error);
  fact("failure", node.failure);
  for (const app of node.apps || []) fact("app " + app.name, app.state + (app.reason ? " (" + app.reason + ")" : ""));
  for (const warning of node.warnings || []) fact("warning", warning);
  const actions = [];
  if (!state.readOnly && node.state !== "attached") {
    const live = !["stopped", "failed"].includes(node.state);
    if (!live) actions.push(actionButton(node.name, "start"));
    if (live) actions.push(actionButton(node.name, "restart"), actionButton(node.name, "stop"));
  }
  return el("li", {
    "data-node": node.name,
    class: node.name === state.selected ? "selected" : "",
    tabindex: "0",
    onclick: () => select(node.name),
    onkeydown: (e) => { if (e.key === "Enter") select(node.name); },
  },
  el("span", { class: "name", text: node.name }),
  el("span", { class: "state " + node.state, text: node.state }),
  el("dl", { class: "facts" }, facts),
  actions.length ? el("div", { class: "actions" }, actions) : null);
}

function actionButton(name, action) {
  return el("button", {
    "data-action": action,
    class: action === "start" ? "" : "danger",
    text: action,
    onclick: (e) => { e.stopPropagation(); confirmAction(name, action); },
  });
}

function confirmAction(name, action) {
  const dialog = $("confirm");
  $("confirm-text").textContent = `${action[0].toUpperCase() + action.slice(1)} node ${name}?`;
  dialog.onclose = async () => {
    if (dialog.returnValue !== "ok") return;
    try {
      await api(`/api/nodes/${encodeURIComponent(name)}/${action}`, { method: "POST", headers: { "X-OS-Sup": "1" } });
    } catch (e) {
      alertNote(`${action} ${name}: ${e.message}`);
    }
    refreshNodes().catch(() => {});
  };
  dialog.returnValue = "";
  dialog.showModal();
}

function alertNote(text) {
  const note = $("node-note");
  note.hidden = false;
  note.textContent = text;
}

function select(name) {
  if (state.selected === name) return;
  state.selected = name;
  state.logSince = null;
  state.logLines = [];
  state.lastTree = "";
  state.growing = new Map();
  $("node-title").textContent = name ? "Node " + name : "Select a node";
  $("tree").replaceChildren();
  $("vitals").replaceChildren();
  $("procs").tBodies[0].replaceChildren();
  $("log").replaceChildren();
  state.profiling++;
  $("profile-box").hidden = true;
  drawNodes();
  // Show the selection's data now rather than at the next tick.
  refreshLogs().catch(() => {});
  refreshTree().catch(() => {});
  refreshProcesses().catch(() => {});
  refreshVitals().catch(() => {});
}

const selectedNode = () => state.nodes.find((n) => n.name === state.selected);
const isLive = (node) => node && ["running", "attached"].includes(node.state);

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

function plot(data, p) {
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
  const t0 = Math.min(...all.map((q) => q[0])), t1 = Math.max(...all.map((q) => q[0]));
  // Limits are drawn on at least 0–10 % so a few percent does not look like a full table.
  const top = Math.max(p.unit === "percent" ? 10 : 1, ...all.map((q) => q[1]));
  const svg = svgEl("svg", { viewBox: `0 0 ${W} ${H}`, width: W, height: H, role: "img", "aria-label": p.title });
  svg.append(svgEl("rect", { x: 0, y: 0, width: W, height: H, class: "plot-bg" }));
  const scale = svgEl("text", { x: W - 4, y: 11, "text-anchor": "end", class: "plot-scale" });
  scale.textContent = "top " + shown(top, p.unit === "rate" ? "count" : p.unit);
  svg.append(scale);
  const legend = el("ul", { class: "legend" });
  lines.forEach((l, i) => {
    const xy = l.pts.map(([t, v]) => `${(((t - t0) / Math.max(1, t1 - t0)) * (W - 4) + 2).toFixed(1)},${(H - 2 - (v / top) * (H - 6)).toFixed(1)}`);
    svg.append(svgEl("polyline", { points: xy.join(" "), class: `series s${i}`, "data-series": l.name }));
    legend.append(el("li", { class: `s${i}`, text: `${l.name} ${shown(l.pts[l.pts.length - 1][1], p.unit)}` }));
  });
  box.append(svg, legend);
  return box;
}

async function refreshVitals() {
  const node = selectedNode();
  if (!node || !$("vitals-box").open) return;
  const name = node.name;
  let data;
  try {
    data = await api(`/api/nodes/${encodeURIComponent(name)}/vitals`);
  } catch (e) {
    if (state.selected === name) { $("vitals-meta").textContent = e.message; $("vitals").replaceChildren(); }
    throw e;
  }
  if (state.selected !== name) return;
  const rows = data.rows;
  const span = rows.length > 1 ? (rows[rows.length - 1][0] - rows[0][0]) / 1000 : 0;
  $("vitals-meta").textContent = `${rows.length} samples over ${fmtAge(span * 1000)}`;
  $("vitals").replaceChildren(...PLOTS.map((p) => plot(data, p)));
}

// ---------------------------------------------------------------------------------------------
// Supervision tree

async function refreshTree() {
  const node = selectedNode();
  if (!isLive(node) || !$("tree-box").open) return;
  const name = node.name;
  let data;
  try {
    data = await api(`/api/nodes/${encodeURIComponent(name)}/tree`);
  } catch (e) {
    if (state.selected === name) $("tree-meta").textContent = e.message;
    throw e;
  }
  if (state.selected !== name) return;
  state.growing = new Map(data.growing.map((g) => [g.pid, g]));
  const t = data.tree;
  $("tree-meta").textContent = `${t.node_count} processes` + (t.truncated ? " (cut)" : "") +
    (data.growing.length ? `, ${data.growing.length} with a growing mailbox` : "");
  const key = JSON.stringify(data);
  if (key === state.lastTree) return;
  state.lastTree = key;
  $("tree").replaceChildren(...t.roots.map((root) => treeNode(root, root.application || root.name || root.id || "root")));
}

const SUPERVISORS = ["supervisor", "dynamic_supervisor"];

function label(n) {
  // A folded run of alike siblings (a pool) shows as its first, with the count.
  return (n.name || n.id || n.pid || "?") + (n.folded ? ` ×${n.folded} alike (e.g. this one)` : "");
}

function growthMark(n) {
  const g = n.pid && state.growing.get(n.pid);
  return g ? el("span", { class: "grow", title: `mailbox grew by ${g.growth} in 500 ms (now ${g.queue})`, text: ` ▲ mailbox +${g.growth}` }) : null;
}

function treeNode(n, path) {
  const restart = n.restart ? el("span", { class: "restart", text: " " + n.restart }) : null;
  const pid = n.pid ? el("span", { class: "pid", text: " " + n.pid }) : el("span", { class: "pid", text: " " + (n.status || "") });
  if (!SUPERVISORS.includes(n.kind) && !(n.children && n.children.length)) {
    return el("div", { class: "leaf", "data-pid": n.pid || "" },
      el("span", { class: "kind", text: n.kind === "worker" ? "○ " : "· " }), label(n), pid, restart, growthMark(n));
  }
  const counts = n.counts || {};
  const total = counts.active !== undefined ? counts.active : n.child_count !== null && n.child_count !== undefined ? n.child_count : (n.children || []).length;
  const details = el("details", { "data-path": path, open: !state.closed.has(path) },
    el("summary", {},
      el("span", { class: "kind", text: n.kind === "dynamic_supervisor" ? "◆ " : "■ " }),
      n.application ? el("b", { text: n.application + ": " }) : null,
      label(n),
      n.strategy ? el("span", { class: "strategy", text: " " + n.strategy }) : null,
      n.intensity !== null && n.intensity !== undefined ? el("span", { class: "pid", text: ` (${n.intensity} in ${n.period} s)` }) : null,
      el("span", { class: "pid", text: ` ${total} children` + (counts.supervisors ? `, ${counts.supervisors} supervisors` : "") }),
      restart, pid, growthMark(n)),
    (n.children || []).map((c, i) => treeNode(c, path + "/" + (c.id || c.name || c.pid || i))),
    n.truncated_children ? el("div", { class: "leaf pid", text: `… ${n.truncated_children} more not shown` }) : null,
    n.children_note ? el("div", { class: "leaf pid", text: n.children_note }) : null);
  details.addEventListener("toggle", () => {
    if (details.open) state.closed.delete(path); else state.closed.add(path);
  });
  return details;
}

// ---------------------------------------------------------------------------------------------
// Top processes

async function refreshProcesses() {
  const node = selectedNode();
  if (!isLive(node) || !$("procs-box").open) return;
  const name = node.name;
  const sort = $("sort-by").value;
  const windowMs = $("window").value;
  const data = await api(`/api/nodes/${encodeURIComponent(name)}/processes?sort_by=${sort}&window_ms=${windowMs}&limit=15`);
  if (state.selected !== name) return;
  $("value-head").textContent = sort.replace(/_/g, " ") + (data.window_ms ? ` Δ ${data.window_ms} ms` : "");
  $("procs-meta").textContent = `${data.total} processes, sampled in ${(data.duration_us / 1000).toFixed(0)} ms`;
  $("procs").tBodies[0].replaceChildren(...data.rows.map((r) => el("tr", {},
    el("td", { text: r.pid }),
    el("td", { class: "wrap", text: r.name }),
    el("td", { class: "wrap", text: r.current_function }),
    el("td", { class: "num", text: sort === "memory" ? fmtBytes(r.value) : String(r.value) }),
    el("td", { class: "num", text: fmtBytes(r.memory) }),
    el("td", { class: "num" + (r.message_queue_len > 0 ? " grow" : ""), text: r.message_queue_len == null ? "" : String(r.message_queue_len) }),
    el("td", {}, el("button", { "data-profile": r.pid, text: "profile", title: `where ${r.name || r.pid} spends its time: its stack sampled for ${PROFILE_MS / 1000} s`, onclick: () => profile(r.pid) })))));
}

// ---------------------------------------------------------------------------------------------
// Profile: one process's stack read every 5 ms for a second (process_info's profile_ms), drawn
// as a flame graph of the folded stacks: the root at the bottom, each frame as wide as the
// share of samples in which it was on the stack, the application's own frames in the accent
// colour, the application's functions seen most listed above.

const PROFILE_MS = 1000;
const FRAME_H = 18;
const CHAR_W = 6.7;           // width of one character of the labels (11px monospace)

async function profile(pid) {
  const name = state.selected;
  const ticket = ++state.profiling;
  const box = $("profile-box");
  box.hidden = false;
  box.open = true;
  $("profile-meta").textContent = `sampling ${pid} for ${PROFILE_MS / 1000} s…`;
  $("profile-hot").replaceChildren();
  $("flame").replaceChildren();
  let data;
  try {
    data = await api(`/api/nodes/${encodeURIComponent(name)}/profile?pid=${encodeURIComponent(pid)}&ms=${PROFILE_MS}`,
      { headers: { "X-OS-Sup": "1" } });
  } catch (e) {
    if (ticket === state.profiling) $("profile-meta").textContent = `${pid}: ${e.message}`;
    return;
  }
  if (ticket !== state.profiling) return;
  drawProfile(data);
}

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

function drawProfile(data) {
  const p = data.profile;
  const who = data.registered_name || data.pid;
  const cut = p.folded_cut ? `; ${p.folded_cut} rarer stacks not drawn` : "";
  $("profile-meta").textContent = `${who}: running or runnable in ${p.running} of ${p.reads} reads over ${p.duration_ms} ms${cut}`;
  $("profile-hot").replaceChildren(...p.hot.map((h) => el("li", { text: h })));
  const root = flameTree(p.folded);
  if (!root.count) {
    $("flame").replaceChildren(el("div", { class: "meta", text: "never caught running: it waited the whole time" }));
    return;
  }
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
  const W = Math.max(300, $("flame").clientWidth || 900);
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
  $("flame").replaceChildren(svg);
}

// ---------------------------------------------------------------------------------------------
// Log

async function refreshLogs() {
  const name = state.selected;
  if (!name) return;
  const query = state.logSince === null ? "" : `?since=${state.logSince}`;
  const page = await api(`/api/nodes/${encodeURIComponent(name)}/logs${query}`);
  if (state.selected !== name) return;
  if (state.logSince !== null && page.next_seq < state.logSince) {
    // Another server (or a new log): start over.
    state.logSince = null;
    state.logLines = [];
    return;
  }
  state.logSince = page.next_seq;
  $("log-meta").textContent = `${page.buffered} lines kept` + (page.dropped ? `, ${page.dropped} dropped` : "");
  if (!page.lines.length && state.logNode === name) return;
  state.logNode = name;
  state.logLines.push(...page.lines);
  if (state.logLines.length > LOG_KEEP) state.logLines.splice(0, state.logLines.length - LOG_KEEP);
  drawLog();
}

function logFilter() {
  const min = $("level").value;
  const search = $("search").value.trim();
  let test = null;
  if (search) {
    const re = search.length > 2 && search.startsWith("/") && search.endsWith("/") ? safeRegex(search.slice(1, -1)) : null;
    const lower = search.toLowerCase();
    test = re ? (t) => re.test(t) : (t) => t.toLowerCase().includes(lower);
  }
  const rank = min ? LEVELS.indexOf(min) : -1;
  return (line) => (rank < 0 || (line.level && LEVELS.indexOf(line.level) <= rank)) && (!test || test(line.text));
}

function safeRegex(source) {
  try { return new RegExp(source, "i"); } catch (_) { return null; }
}

function drawLog() {
  const pane = $("log");
  const atBottom = pane.scrollHeight - pane.scrollTop - pane.clientHeight < 40;
  const wanted = logFilter();
  const shown = state.logLines.filter(wanted).slice(-LOG_SHOWN);
  pane.replaceChildren(...shown.map((l) => el("div", { class: "line " + (l.level || l.source), "data-seq": l.seq },
    el("span", { class: "seq", text: `${l.time.slice(11, 23)} ${l.source === "logger" ? "log" : l.source === "stdout" ? "out" : "err"} ` }),
    l.level ? `[${l.level}] ` : "", l.text)));
  if ($("follow").checked && (atBottom || pane.dataset.follow !== "no")) pane.scrollTop = pane.scrollHeight;
}

// ---------------------------------------------------------------------------------------------
// Activity

async function refreshActivity() {
  const data = await api(`/api/activity?since=${state.activitySince}`);
  if (!data.calls.length) return;
  const list = $("activity");
  list.querySelector(".empty")?.remove();
  for (const call of data.calls) {
    state.activitySince = Math.max(state.activitySince, call.id);
    list.prepend(el("li", { "data-call": call.id, "data-tool": call.tool },
      el("span", { class: call.ok ? "ok" : "fail", text: call.ok ? "✓ " : "✗ " }),
      el("span", { class: "tool", text: call.tool }),
      call.node ? " on " + call.node : "",
      el("span", { class: "meta", text: ` ${call.duration_ms} ms, ${call.time.slice(11, 19)}` }),
      call.code ? el("pre", { class: "code", text: call.code }) : null,
      el("details", {}, el("summary", { class: "meta", text: call.ok ? "result" : "error" }), el("pre", { text: call.result }))));
  }
  while (list.children.length > 200) list.lastElementChild.remove();
}

// ---------------------------------------------------------------------------------------------
// Clusters: members on a circle, a line where two see each other, a dashed red one where a
// partition cuts them; a click picks the member.

async function refreshClusters() {
  const data = await api("/api/clusters");
  $("clusters").replaceChildren(...data.clusters.map(clusterFigure));
}

function clusterFigure(view) {
  const n = view.members.length;
  const size = 180, r = 62, c = size / 2;
  const at = (i) => [c + r * Math.cos(2 * Math.PI * i / n - Math.PI / 2),
                     c + r * Math.sin(2 * Math.PI * i / n - Math.PI / 2)];
  const svg = svgEl("svg", { viewBox: `0 0 ${size} ${size}`, width: size, height: size, role: "img",
                             "aria-label": `cluster ${view.cluster}` });
  const row = (m) => view.members.find((x) => x.member === m);
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
    g.addEventListener("click", () => select(m.member));
    g.addEventListener("keydown", (e) => { if (e.key === "Enter") select(m.member); });
    svg.append(g);
  });
  const summary = view.split
    ? "split: " + view.split.map((side) => "[" + side.join(", ") + "]").join(" | ")
    : view.fully_connected ? "fully connected" : "not fully connected";
  return el("figure", { class: "cluster" + (view.split ? " split" : ""), "data-cluster": view.cluster },
    el("figcaption", {}, el("strong", { text: view.cluster }), " " + summary), svg);
}

// ---------------------------------------------------------------------------------------------

function start() {
  $("level").addEventListener("change", drawLog);
  $("search").addEventListener("input", drawLog);
  $("follow").addEventListener("change", drawLog);
  for (const id of ["sort-by", "window"]) $(id).addEventListener("change", () => refreshProcesses().catch(() => {}));
  $("confirm-cancel").addEventListener("click", () => { $("confirm").returnValue = "cancel"; });
  every(2000, refreshNodes);
  every(3000, refreshClusters);
  every(500, refreshLogs);
  every(1000, refreshActivity);
  every(3000, refreshTree);
  every(4000, refreshVitals);
  every(3000, refreshProcesses);
}

start();
