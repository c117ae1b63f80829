// The view's side of the MCP Apps host protocol (`io.modelcontextprotocol/ui`, 2026-01-26):
// JSON-RPC 2.0 over postMessage with the host that framed this page, written by hand so the
// view needs no SDK and loads nothing. It does the handshake (`ui/initialize`, then
// `ui/notifications/initialized`), follows the host's theme, reports the view's size, says
// when the host cancelled the call (in the view's `#meta`), and lets
// the view ask the server through the host (`tools/call`, `resources/read`).
"use strict";

const host = (() => {
  const PROTOCOL = "2026-01-26";
  const TIMEOUT_MS = 60000;     // a request the host never answers fails instead of hanging
  const handlers = new Map();   // notification method -> function(params)
  const pending = new Map();    // request id -> {resolve, reject, timer}
  let nextId = 1;
  let context = {};             // the host's context: theme, display mode, sizes

  const post = (message) => window.parent.postMessage(Object.assign({ jsonrpc: "2.0" }, message), "*");

  function request(method, params) {
    const id = nextId++;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        pending.delete(id);
        reject(new Error(`the host did not answer ${method} within ${TIMEOUT_MS / 1000} s`));
      }, TIMEOUT_MS);
      pending.set(id, { resolve, reject, timer });
      post({ id, method, params });
    });
  }

  const notify = (method, params) => post({ method, params });

  // `theme` is "light" or "dark"; anything else leaves the browser's preference.
  function follow(changed) {
    context = Object.assign(context, changed || {});
    const root = document.documentElement;
    if (context.theme === "light" || context.theme === "dark") {
      root.dataset.theme = context.theme;
      root.style.colorScheme = context.theme;
    }
  }

  // A call the host cancelled brings no result: said where every view tells its state.
  function cancelled({ reason }) {
    const meta = document.getElementById("meta");
    if (meta) meta.textContent = `the call was cancelled${reason ? ` (${reason})` : ""}: nothing to draw`;
  }

  // The document's height as drawn and the frame's width, sent when either changes.
  function reportSize() {
    let queued = false, width = 0, height = 0;
    const measure = () => {
      if (queued) return;
      queued = true;
      requestAnimationFrame(() => {
        queued = false;
        const root = document.documentElement;
        const before = root.style.height;
        root.style.height = "max-content";
        const h = Math.ceil(root.getBoundingClientRect().height);
        root.style.height = before;
        const w = Math.ceil(window.innerWidth);
        if (w !== width || h !== height) {
          width = w;
          height = h;
          notify("ui/notifications/size-changed", { width, height });
        }
      });
    };
    measure();
    const observer = new ResizeObserver(measure);
    observer.observe(document.documentElement);
    observer.observe(document.body);
  }

  window.addEventListener("message", (event) => {
    if (event.source !== window.parent) return;
    const message = event.data;
    if (!message || message.jsonrpc !== "2.0") return;
    if (message.method === undefined) {
      const waiting = pending.get(message.id);
      if (!waiting) return;
      pending.delete(message.id);
      clearTimeout(waiting.timer);
      if (message.error) waiting.reject(new Error(message.error.message || "the host refused"));
      else waiting.resolve(message.result);
    } else if (message.id !== undefined) {
      // The host's requests: a ping, or the teardown it waits for before removing the frame.
      const known = message.method === "ping" || message.method === "ui/resource-teardown";
      post(known ? { id: message.id, result: {} }
        : { id: message.id, error: { code: -32601, message: `${message.method} is not handled by this view` } });
    } else {
      if (message.method === "ui/notifications/host-context-changed") follow(message.params);
      if (message.method === "ui/notifications/tool-cancelled") cancelled(message.params || {});
      const handler = handlers.get(message.method);
      if (handler) handler(message.params || {});
    }
  });

  return {
    // Handles notification `method` (register before `connect`: the tool's input and result
    // come once, right after the handshake).
    on(method, handler) { handlers.set(method, handler); },
    // The handshake; resolves with the host's answer.
    async connect(name, version) {
      const answer = await request("ui/initialize",
        { protocolVersion: PROTOCOL, appInfo: { name, version }, appCapabilities: {} });
      follow(answer && answer.hostContext);
      notify("ui/notifications/initialized", {});
      reportSize();
      return answer;
    },
    // A tool's result (errors of the tool come back as results with `isError`).
    callTool: (name, args) => request("tools/call", { name, arguments: args }),
    // A resource's first content's text.
    async readText(uri) {
      const answer = await request("resources/read", { uri });
      const first = answer && answer.contents && answer.contents[0];
      if (!first || typeof first.text !== "string") throw new Error(`${uri} read back no text`);
      return first.text;
    },
  };
})();

// The text a tool result gives the model (what a view shows when it has nothing to draw).
const resultText = (result) => (result.content || []).filter((c) => c.type === "text").map((c) => c.text).join("\n");
