// The os_sup_mcp dashboard: polls the JSON API of the server that served it (nothing else,
// the page's CSP forbids it) and redraws with draw.js (loaded before this script). Every loop
// survives errors and a server restart.
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
// is drawn from that history (draw.js).

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
  $("tree").replaceChildren(...t.roots.map((root) => treeNode(root, treeRootPath(root), state)));
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
// as a flame graph (draw.js), the application's functions seen most listed above it.

const PROFILE_MS = 1000;

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

function drawProfile(data) {
  $("profile-meta").textContent = profileSummary(data);
  $("profile-hot").replaceChildren(...data.profile.hot.map((h) => el("li", { text: h })));
  $("flame").replaceChildren(drawFlame(data, $("flame").clientWidth || 900));
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
// Clusters (draw.js); a click on a member selects it.

async function refreshClusters() {
  const data = await api("/api/clusters");
  $("clusters").replaceChildren(...data.clusters.map((view) => clusterFigure(view, select)));
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
