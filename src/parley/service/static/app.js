// parley's chat page: plain ES2020, no framework, no build step, nothing loaded from elsewhere.
//
// It speaks the service's protocol (docs/service-protocol.md): threads, agents, runs streamed
// as server-sent events in the "parley" event mode, approvals, feedback and bearer keys.
// Model output is only ever put in the page as text nodes (see renderMarkdown): never as HTML.

const KEY_STORAGE = "parley.apiKey";
const AGENT_STORAGE = "parley.agent";
const SPEAK_STORAGE = "parley.speak";
const THREAD_PAGE = 30;

const $ = (id) => document.getElementById(id);

const ui = {
  app: $("app"),
  sidebar: $("sidebar"),
  toggleSidebar: $("toggle-sidebar"),
  newChat: $("new-chat"),
  threadList: $("thread-list"),
  threadsEmpty: $("threads-empty"),
  threadsMore: $("threads-more"),
  keyButton: $("key-button"),
  threadTitle: $("thread-title"),
  agentSelect: $("agent-select"),
  modelChip: $("model-chip"),
  modelName: $("model-name"),
  modelNote: $("model-note"),
  authPanel: $("auth-panel"),
  authForm: $("auth-form"),
  authInput: $("api-key-input"),
  authError: $("auth-error"),
  authCancel: $("auth-cancel"),
  messages: $("messages"),
  emptyState: $("empty-state"),
  globalError: $("global-error"),
  composer: $("composer"),
  input: $("message-input"),
  send: $("send"),
  stop: $("stop"),
  speak: $("speak"),
  statusLine: $("status-line"),
};

const state = {
  apiKey: readStorage(KEY_STORAGE),
  agents: [],
  agent: readStorage(AGENT_STORAGE),
  threads: [],
  threadsNext: null,
  threadId: null,
  run: null, // the stream being read: {controller, runId, threadId, turn, stopping}
  loadToken: 0, // guards against a slow thread load landing after another was opened
};

// -- small helpers ---------------------------------------------------------------------------

function readStorage(key) {
  try {
    return window.localStorage.getItem(key) || "";
  } catch {
    return "";
  }
}

function writeStorage(key, value) {
  try {
    if (value) window.localStorage.setItem(key, value);
    else window.localStorage.removeItem(key);
  } catch {
    // storage disabled: the value lives for this page only
  }
}

/** Build an element: el("div", {class: "x", dataset: {testid: "y"}}, child, "text", ...). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "class") node.className = value;
    else if (name === "dataset") Object.assign(node.dataset, value);
    else if (name === "text") node.textContent = value;
    else if (name.startsWith("on") && typeof value === "function") {
      node.addEventListener(name.slice(2), value);
    } else if (value === true) node.setAttribute(name, "");
    else node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/**
 * The sources a `retrieval` result names: its passages are "[n] source, page p" lines, each
 * followed by the passage's text, one blank line apart.
 */
function citations(text) {
  const lines = [];
  for (const passage of (text || "").split(/\n\n(?=\[\d+\] )/)) {
    const match = /^\[(\d+)\] (.+)$/m.exec(passage.split("\n", 1)[0]);
    if (match) lines.push(`[${match[1]}] ${match[2]}`);
  }
  return lines;
}

function pretty(value) {
  if (value === undefined || value === null) return "";
  if (typeof value === "string") {
    try {
      return JSON.stringify(JSON.parse(value), null, 2);
    } catch {
      return value;
    }
  }
  try {
    return JSON.stringify(value, null, 2);
  } catch {
    return String(value);
  }
}

function callArguments(call) {
  if (!call) return "";
  const input = call.input ?? call.args;
  if (input && typeof input === "object" && Object.keys(input).length) return pretty(input);
  if (call.raw_input) return pretty(call.raw_input);
  return pretty(input ?? {});
}

function outputText(output) {
  if (typeof output === "string") return output;
  if (Array.isArray(output)) {
    return output
      .map((block) => {
        if (!block || typeof block !== "object") return String(block);
        if (block.type === "text") return block.text;
        const name = block.filename || block.source?.url || block.source?.media_type || "";
        return `[${block.type}${name ? `: ${name}` : ""}]`;
      })
      .join("\n");
  }
  return pretty(output);
}

function formatTime(iso) {
  if (!iso) return "";
  const date = new Date(iso);
  if (Number.isNaN(date.getTime())) return "";
  const now = new Date();
  const sameDay = date.toDateString() === now.toDateString();
  return sameDay
    ? date.toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" })
    : date.toLocaleDateString([], { month: "short", day: "numeric" });
}

function setStatus(text) {
  ui.statusLine.textContent = text || "";
}

// -- the HTTP layer --------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message, detail) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.detail = detail;
  }
}

/** Words an error body's `detail`: a string, or FastAPI's list of validation errors. */
function describeDetail(detail) {
  if (detail === undefined || detail === null) return "";
  if (typeof detail === "string") return detail;
  if (Array.isArray(detail)) {
    return detail
      .map((item) => {
        if (item && typeof item === "object") {
          const where = Array.isArray(item.loc) ? item.loc.join(".") : "";
          return where ? `${where}: ${item.msg ?? ""}` : String(item.msg ?? pretty(item));
        }
        return String(item);
      })
      .join("; ");
  }
  if (typeof detail === "object" && detail.message) return String(detail.message);
  return pretty(detail);
}

function headers(json) {
  const result = { Accept: json ? "application/json" : "text/event-stream" };
  if (state.apiKey) result.Authorization = `Bearer ${state.apiKey}`;
  return result;
}

async function errorFrom(response) {
  let detail;
  let text = "";
  try {
    text = await response.text();
    detail = JSON.parse(text).detail;
  } catch {
    detail = undefined;
  }
  const words = describeDetail(detail) || text.slice(0, 300) || response.statusText;
  if (response.status === 401) askForKey(state.apiKey ? "The API key was refused." : "");
  return new ApiError(response.status, `${response.status}: ${words || "request failed"}`, detail);
}

/** Fetch with the key; returns the Response, throwing ApiError for any non-2xx answer. */
async function request(method, path, body, { stream = false, signal } = {}) {
  const init = { method, headers: headers(!stream), signal, cache: "no-store" };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  let response;
  try {
    response = await fetch(path, init);
  } catch (err) {
    if (err.name === "AbortError") throw err;
    throw new ApiError(0, `Network error: ${err.message || err}`);
  }
  if (!response.ok) throw await errorFrom(response);
  return response;
}

async function api(method, path, body) {
  const response = await request(method, path, body);
  if (response.status === 204) return null;
  const text = await response.text();
  return text ? JSON.parse(text) : null;
}

/**
 * Read a server-sent event stream: frames of `data: ...` lines separated by blank lines.
 * Calls onEvent(parsed JSON) per frame; resolves true at `data: [DONE]`, false if the stream
 * ended without it.
 */
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  const handleFrame = (frame) => {
    const data = frame
      .split(/\r\n|\r|\n/)
      .filter((line) => line.startsWith("data:"))
      .map((line) => line.slice(line.startsWith("data: ") ? 6 : 5))
      .join("\n");
    if (!data) return false;
    if (data.trim() === "[DONE]") return true;
    let event;
    try {
      event = JSON.parse(data);
    } catch {
      return false; // a frame we cannot read is skipped, not fatal
    }
    onEvent(event);
    return false;
  };
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buffer += decoder.decode(value, { stream: true });
      let match;
      while ((match = /\r\n\r\n|\n\n|\r\r/.exec(buffer))) {
        const frame = buffer.slice(0, match.index);
        buffer = buffer.slice(match.index + match[0].length);
        if (handleFrame(frame)) {
          reader.cancel().catch(() => {});
          return true;
        }
      }
    }
    buffer += decoder.decode();
    return buffer.trim() ? handleFrame(buffer) : false;
  } finally {
    reader.releaseLock?.();
  }
}

// -- text rendering (markdown-light, text nodes only) ----------------------------------------

const INLINE = /(`+)([\s\S]*?[^`])\1(?!`)|\*\*([^*\n]+?)\*\*|\*([^*\s][^*\n]*?)\*|\[([^\]\n]+)\]\((https?:\/\/[^\s)]+)\)/g;

function renderInline(text, parent) {
  let last = 0;
  for (const match of text.matchAll(INLINE)) {
    if (match.index > last) parent.append(text.slice(last, match.index));
    if (match[1]) parent.append(el("code", { text: match[2] }));
    else if (match[3]) parent.append(el("strong", { text: match[3] }));
    else if (match[4]) parent.append(el("em", { text: match[4] }));
    else {
      parent.append(
        el("a", { href: match[6], target: "_blank", rel: "noopener noreferrer", text: match[5] }),
      );
    }
    last = match.index + match[0].length;
  }
  if (last < text.length) parent.append(text.slice(last));
}

function renderLines(lines, parent) {
  lines.forEach((line, index) => {
    if (index) parent.append(el("br"));
    renderInline(line, parent);
  });
}

/** Markdown-light into a fragment: code fences, headings, lists, paragraphs, inline marks. */
function renderMarkdown(source) {
  const fragment = document.createDocumentFragment();
  const lines = source.replace(/\r\n?/g, "\n").split("\n");
  let paragraph = [];
  let list = null;
  const flush = () => {
    if (paragraph.length) {
      const p = el("p");
      renderLines(paragraph, p);
      fragment.append(p);
      paragraph = [];
    }
    list = null;
  };
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i];
    const fence = /^\s*(```|~~~)\s*([\w+-]*)\s*$/.exec(line);
    if (fence) {
      flush();
      const body = [];
      i++;
      while (i < lines.length && !lines[i].trim().startsWith(fence[1])) body.push(lines[i++]);
      const code = el("code", { text: body.join("\n") });
      if (fence[2]) code.dataset.lang = fence[2];
      fragment.append(el("pre", { class: "code" }, code));
      continue;
    }
    const heading = /^(#{1,6})\s+(.*)$/.exec(line);
    if (heading) {
      flush();
      const h = el("p", { class: `md-h md-h${heading[1].length}` });
      renderInline(heading[2], h);
      fragment.append(h);
      continue;
    }
    const item = /^\s*([-*+]|\d{1,3}[.)])\s+(.*)$/.exec(line);
    if (item) {
      const ordered = /\d/.test(item[1]);
      if (paragraph.length) {
        const keep = list;
        flush();
        list = keep;
      }
      if (!list || list.ordered !== ordered) {
        list = { ordered, node: el(ordered ? "ol" : "ul") };
        fragment.append(list.node);
      }
      const li = el("li");
      renderInline(item[2], li);
      list.node.append(li);
      continue;
    }
    if (!line.trim()) {
      flush();
      continue;
    }
    if (list && /^\s{2,}\S/.test(line)) {
      const li = list.node.lastElementChild;
      li.append(el("br"));
      renderInline(line.trim(), li);
      continue;
    }
    list = null;
    paragraph.push(line);
  }
  flush();
  return fragment;
}

// -- the conversation view -------------------------------------------------------------------

function scrollToEnd(force = false) {
  const box = ui.messages;
  const near = box.scrollHeight - box.scrollTop - box.clientHeight < 120;
  if (force || near) box.scrollTop = box.scrollHeight;
}

function clearMessages() {
  ui.messages.replaceChildren(ui.emptyState);
  ui.emptyState.hidden = false;
}

function appendToLog(node) {
  ui.emptyState.hidden = true;
  ui.messages.append(node);
  scrollToEnd(true);
}

function userBubble(text) {
  const body = el("div", { class: "bubble" });
  body.append(renderMarkdown(text));
  return el(
    "article",
    { class: "msg msg-user", dataset: { testid: "user-message" }, "aria-label": "You" },
    el("div", { class: "msg-role", "aria-hidden": "true", text: "You" }),
    body,
  );
}

function inlineError(message, testid = "error") {
  return el(
    "div",
    { class: "inline-error", role: "alert", dataset: { testid } },
    el("span", { class: "inline-error-icon", "aria-hidden": "true", text: "!" }),
    el("span", { class: "inline-error-text", text: message }),
  );
}

/**
 * One assistant turn: everything a run (and the runs resuming it after approvals) adds,
 * in order: thinking, text, tool cards, approval prompts, notes, then the feedback bar.
 */
class Turn {
  constructor(agentName) {
    this.body = el("div", { class: "turn-body" });
    this.sourceList = el("ol", { class: "sources-list" });
    this.sources = el(
      "aside",
      { class: "sources", hidden: true, dataset: { testid: "sources" }, "aria-label": "Sources" },
      el("div", { class: "sources-label", text: "Sources" }),
      this.sourceList,
    );
    this.footer = el("div", { class: "turn-footer" });
    this.node = el(
      "article",
      { class: "msg msg-assistant", dataset: { testid: "assistant-message" }, "aria-label": "Assistant" },
      el("div", { class: "msg-role", "aria-hidden": "true", text: agentName || "Assistant" }),
      this.body,
      this.sources,
      this.footer,
    );
    this.text = null; // {node, source}: the text segment deltas go to
    this.thinking = null; // {node, pre}
    this.cards = new Map(); // call id -> card
    this.runIds = [];
    this.streamedText = false; // text deltas arrived since the last completed message
    this.streamedThinking = false; // thinking deltas, likewise
    this.renderPending = false;
    this.feedback = null;
  }

  setRun(runId) {
    if (!runId || this.runIds.includes(runId)) return;
    this.runIds.push(runId);
    this.node.dataset.runId = runId;
  }

  get runId() {
    return this.runIds[this.runIds.length - 1] || null;
  }

  setBusy(busy) {
    this.node.classList.toggle("is-streaming", busy);
    this.node.setAttribute("aria-busy", busy ? "true" : "false");
  }

  appendText(delta) {
    this.thinking = null;
    if (!this.text) {
      const node = el("div", { class: "text", dataset: { testid: "assistant-text" } });
      this.text = { node, source: "" };
      this.body.append(node);
    }
    this.text.source += delta;
    this.streamedText = true;
    this.scheduleRender();
  }

  scheduleRender() {
    if (this.renderPending) return;
    this.renderPending = true;
    requestAnimationFrame(() => {
      this.renderPending = false;
      this.renderText();
    });
  }

  renderText() {
    if (!this.text) return;
    this.text.node.replaceChildren(renderMarkdown(this.text.source));
    scrollToEnd();
  }

  appendThinking(delta) {
    if (!this.thinking) {
      const pre = el("div", { class: "thinking-text" });
      const node = el(
        "details",
        { class: "thinking", dataset: { testid: "thinking" } },
        el("summary", {}, el("span", { class: "chev", "aria-hidden": "true" }), "Thinking"),
        pre,
      );
      this.thinking = { node, pre };
      this.text = null;
      this.body.append(node);
    }
    this.thinking.pre.append(delta);
    this.streamedThinking = true;
    scrollToEnd();
  }

  card(callId, name) {
    let card = this.cards.get(callId);
    if (!card) {
      card = new ToolCard(callId, name);
      this.cards.set(callId, card);
      this.text = null;
      this.thinking = null;
      this.body.append(card.node);
      scrollToEnd();
    } else if (name) {
      card.setName(name);
    }
    return card;
  }

  toolResult(result) {
    if (!result) return;
    const card = this.card(result.tool_call_id, result.name);
    card.setResult(result.output, Boolean(result.is_error));
    if (result.name === "retrieval" && !result.is_error) this.addSources(citations(outputText(result.output)));
  }

  /** The documents a retrieval found, once each, under the answer (text only, never HTML). */
  addSources(lines) {
    const shown = new Set([...this.sourceList.children].map((item) => item.textContent));
    for (const line of lines) {
      if (shown.has(line)) continue;
      shown.add(line);
      this.sourceList.append(el("li", { dataset: { testid: "source" }, text: line }));
    }
    this.sources.hidden = this.sourceList.children.length === 0;
  }

  /** A whole message: fills in what the deltas did not bring (or a non-streaming model). */
  completed(msg) {
    if (!msg) return;
    const meta = msg.metadata || {};
    if (meta.run_id) this.setRun(meta.run_id);
    if (msg.role === "assistant") {
      const streamedText = this.streamedText;
      const streamedThinking = this.streamedThinking;
      for (const block of msg.content || []) {
        if (block.type === "text") {
          if (!streamedText && block.text) this.appendText(block.text);
        } else if (block.type === "thinking") {
          if (!streamedThinking && block.thinking) this.appendThinking(block.thinking);
        } else if (block.type === "tool_call") {
          this.card(block.id, block.name).setArguments(callArguments(block), true);
        } else if (["image", "audio", "video", "file"].includes(block.type)) {
          this.text = null;
          this.body.append(mediaNote(block));
        }
      }
      if (this.text) this.renderText();
      this.text = null;
      this.thinking = null;
      this.streamedText = false;
      this.streamedThinking = false;
      if (meta.interrupted) this.markInterrupted();
    } else if (msg.role === "tool") {
      for (const block of msg.content || []) {
        if (block.type !== "tool_result") continue;
        const card = this.cards.get(block.tool_call_id);
        if (!card || !card.hasResult) this.toolResult(block);
      }
    }
  }

  approval(interruptId, calls, awaiting) {
    const box = new ApprovalBox(this, interruptId, calls, awaiting);
    this.text = null;
    this.body.append(box.node);
    for (const call of box.calls) this.card(call.id, call.name).setAwaiting(callArguments(call));
    scrollToEnd(true);
    return box;
  }

  markInterrupted() {
    if (this.node.dataset.interrupted === "true") return;
    this.node.dataset.interrupted = "true";
    this.node.classList.add("is-interrupted");
    for (const card of this.cards.values()) if (!card.hasResult) card.setStatus("not run", "muted");
    this.footer.prepend(
      el("span", { class: "badge badge-warn", dataset: { testid: "interrupted" }, text: "Interrupted" }),
    );
  }

  note(text, testid = "note") {
    this.text = null;
    this.body.append(el("p", { class: "turn-note", dataset: { testid }, text }));
  }

  error(message) {
    this.text = null;
    this.body.append(inlineError(message));
    scrollToEnd(true);
  }

  offerFeedback() {
    const runId = this.runId;
    if (!runId || this.feedback) return;
    this.feedback = new FeedbackBar(runId);
    this.footer.append(this.feedback.node);
  }

  ensureSomething() {
    if (!this.body.childElementCount) {
      this.body.append(el("p", { class: "turn-note muted", text: "(no answer)" }));
    }
  }
}

function mediaNote(block) {
  const src = block.source || {};
  const label = block.filename || src.url || src.media_type || block.type;
  return el("p", { class: "turn-note", text: `[${block.type}: ${label}]` });
}

class ToolCard {
  constructor(callId, name) {
    this.callId = callId;
    this.hasResult = false;
    this.nameNode = el("span", { class: "tool-name", dataset: { testid: "tool-name" }, text: name || "tool" });
    this.status = el("span", { class: "badge", dataset: { testid: "tool-status" } });
    this.preview = el("span", { class: "tool-preview" });
    this.args = el("pre", { class: "tool-pre", dataset: { testid: "tool-args" } });
    this.resultSection = el("div", { class: "tool-section", hidden: true });
    this.result = el("pre", { class: "tool-pre", dataset: { testid: "tool-result" } });
    this.resultSection.append(el("div", { class: "tool-label", text: "Result" }), this.result);
    this.node = el(
      "details",
      { class: "tool-card", dataset: { testid: "tool-card", callId: callId || "" } },
      el(
        "summary",
        {},
        el("span", { class: "chev", "aria-hidden": "true" }),
        el("span", { class: "tool-icon", "aria-hidden": "true", text: "⚙" }),
        this.nameNode,
        this.preview,
        this.status,
      ),
      el(
        "div",
        { class: "tool-details" },
        el("div", { class: "tool-section" }, el("div", { class: "tool-label", text: "Arguments" }), this.args),
        this.resultSection,
      ),
    );
    this.rawArgs = "";
    this.setStatus("calling…", "busy");
  }

  setName(name) {
    this.nameNode.textContent = name;
  }

  setStatus(text, kind = "") {
    this.status.textContent = text;
    this.status.className = `badge${kind ? ` badge-${kind}` : ""}`;
    this.node.dataset.status = text.replace(/[^a-z ]/g, "").trim();
  }

  appendArguments(delta) {
    this.rawArgs += delta;
    this.args.textContent = this.rawArgs;
    this.updatePreview(this.rawArgs);
  }

  setArguments(text, whole = false) {
    if (whole && this.args.textContent && this.hasResult) return;
    this.args.textContent = text;
    this.updatePreview(text);
    if (!this.hasResult && this.status.textContent === "calling…") this.setStatus("running…", "busy");
  }

  updatePreview(text) {
    const flat = text.replace(/\s+/g, " ").trim();
    this.preview.textContent = flat.length > 60 ? `${flat.slice(0, 59)}…` : flat;
  }

  setAwaiting(text) {
    this.setArguments(text);
    if (!this.hasResult) this.setStatus("needs approval", "warn");
  }

  setResult(output, isError) {
    this.hasResult = true;
    this.result.textContent = outputText(output);
    this.resultSection.hidden = false;
    this.node.classList.toggle("is-error", isError);
    this.node.dataset.error = isError ? "true" : "false";
    this.setStatus(isError ? "error" : "done", isError ? "error" : "ok");
    if (isError) this.node.open = true;
  }
}

class ApprovalBox {
  constructor(turn, interruptId, calls, awaiting) {
    this.turn = turn;
    this.interruptId = interruptId;
    const wanted = Array.isArray(awaiting) && awaiting.length ? new Set(awaiting) : null;
    this.calls = (calls || []).filter((c) => !wanted || wanted.has(c.id));
    this.approve = el(
      "button",
      { type: "button", class: "btn btn-primary", dataset: { testid: "approve" }, onclick: () => this.answer(true) },
      "Approve",
    );
    this.deny = el(
      "button",
      { type: "button", class: "btn btn-ghost", dataset: { testid: "deny" }, onclick: () => this.answer(false) },
      "Deny",
    );
    this.outcome = el("span", { class: "approval-outcome small", dataset: { testid: "approval-outcome" } });
    const list = el("ul", { class: "approval-calls" });
    for (const call of this.calls) {
      list.append(
        el(
          "li",
          { dataset: { testid: "approval-call" } },
          el("span", { class: "tool-name", text: call.name }),
          el("pre", { class: "tool-pre", text: callArguments(call) }),
        ),
      );
    }
    const headingId = `approval-${Math.random().toString(36).slice(2)}`;
    this.node = el(
      "section",
      {
        class: "approval",
        dataset: { testid: "approval", interruptId },
        role: "group",
        "aria-labelledby": headingId,
      },
      el(
        "p",
        { class: "approval-title", id: headingId },
        this.calls.length === 1 ? "The agent wants to run this tool:" : "The agent wants to run these tools:",
      ),
      list,
      el("div", { class: "approval-actions" }, this.approve, this.deny, this.outcome),
    );
  }

  async answer(approved) {
    if (state.run) {
      this.outcome.textContent = "Wait for the current run to end.";
      return;
    }
    this.approve.disabled = true;
    this.deny.disabled = true;
    this.outcome.textContent = approved ? "Approved" : "Denied";
    this.node.classList.add(approved ? "is-approved" : "is-denied");
    for (const call of this.calls) {
      const card = this.turn.cards.get(call.id);
      if (card && !card.hasResult) card.setStatus(approved ? "running…" : "denied", approved ? "busy" : "error");
    }
    const ok = await streamRun(
      `/approvals/${encodeURIComponent(this.interruptId)}/stream`,
      { approved, stream_tokens: true, events: "parley", ...(speaking() ? { speak: true } : {}) },
      this.turn,
      state.threadId,
    );
    if (!ok) {
      this.approve.disabled = false;
      this.deny.disabled = false;
      this.outcome.textContent = "";
      this.node.classList.remove("is-approved", "is-denied");
    }
  }
}

const SVG = "http://www.w3.org/2000/svg";
const THUMB =
  "M7 10v11H3V10h4zm2 11h8.2a2 2 0 0 0 2-1.6l1.3-6.5A2 2 0 0 0 18.5 10H14l.8-4.1a1.6 " +
  "1.6 0 0 0-2.9-1.2L9 9.5V21z";

/** A thumb icon drawn inline (no emoji font needed); pointing down when `down`. */
function thumbIcon(down) {
  const svg = document.createElementNS(SVG, "svg");
  svg.setAttribute("viewBox", "0 0 24 24");
  svg.setAttribute("width", "16");
  svg.setAttribute("height", "16");
  svg.setAttribute("aria-hidden", "true");
  svg.setAttribute("focusable", "false");
  const path = document.createElementNS(SVG, "path");
  path.setAttribute("d", THUMB);
  path.setAttribute("fill", "none");
  path.setAttribute("stroke", "currentColor");
  path.setAttribute("stroke-width", "1.8");
  path.setAttribute("stroke-linejoin", "round");
  if (down) svg.setAttribute("class", "flip");
  svg.append(path);
  return svg;
}

class FeedbackBar {
  constructor(runId) {
    this.runId = runId;
    this.up = this.button("up", "Good answer", 1);
    this.down = this.button("down", "Bad answer", 0);
    this.status = el("span", { class: "feedback-status small muted", dataset: { testid: "feedback-status" }, role: "status" });
    this.node = el(
      "div",
      { class: "feedback", role: "group", "aria-label": "Rate this answer" },
      this.up,
      this.down,
      this.status,
    );
  }

  button(which, label, score) {
    return el(
      "button",
      {
        type: "button",
        class: "btn btn-ghost icon-btn feedback-btn",
        dataset: { testid: `feedback-${which}` },
        "aria-label": label,
        "aria-pressed": "false",
        title: label,
        onclick: () => this.send(score),
      },
      thumbIcon(which === "down"),
    );
  }

  async send(score) {
    this.up.disabled = true;
    this.down.disabled = true;
    this.status.textContent = "Sending…";
    try {
      await api("POST", "/feedback", {
        run_id: this.runId,
        key: "human-feedback-stars",
        score,
        kwargs: {},
      });
      this.up.setAttribute("aria-pressed", String(score === 1));
      this.down.setAttribute("aria-pressed", String(score === 0));
      this.node.dataset.recorded = score === 1 ? "up" : "down";
      this.status.textContent = "Feedback recorded — thank you";
      this.up.disabled = false;
      this.down.disabled = false;
    } catch (err) {
      this.status.textContent = "";
      this.status.append(inlineError(`Feedback not recorded: ${err.message}`));
      this.up.disabled = false;
      this.down.disabled = false;
    }
  }
}

// -- running ---------------------------------------------------------------------------------

function setRunning(running) {
  ui.stop.disabled = !running;
  ui.app.classList.toggle("is-running", running);
  updateSend();
  setStatus(running ? "The agent is answering…" : "");
}

function updateSend() {
  ui.send.disabled = Boolean(state.run) || !ui.input.value.trim() || !state.agent;
}

// -- speech ----------------------------------------------------------------------------------

/**
 * Plays the answer's audio as it arrives: each audio_delta (base64 16-bit PCM, its rate in the
 * media type) becomes an AudioBuffer scheduled right after the previous one, so playback
 * starts with the first sentence while the rest is still being written. Every buffer
 * scheduled is logged in `window.__parleyAudio` (time, seconds, loudness) for tests.
 */
const speaker = {
  context: null,
  next: 0, // when the last scheduled buffer ends, on the context's clock
  sources: new Set(),
  log: (window.__parleyAudio = []),

  note(kind) {
    this.log.push({ kind, at: performance.now() });
  },

  audioContext() {
    if (!this.context) {
      const Context = window.AudioContext || window.webkitAudioContext;
      if (!Context) return null;
      this.context = new Context();
    }
    if (this.context.state === "suspended") this.context.resume().catch(() => {});
    return this.context;
  },

  play(event) {
    const rate = Number(/rate=(\d+)/i.exec(event.media_type || "")?.[1]);
    const channels = Number(/channels=(\d+)/i.exec(event.media_type || "")?.[1] || 1);
    if (!rate || !event.data) return; // not raw PCM: nothing this page can play
    const context = this.audioContext();
    if (!context) return;
    const raw = atob(event.data);
    const view = new DataView(new ArrayBuffer(raw.length));
    for (let i = 0; i < raw.length; i++) view.setUint8(i, raw.charCodeAt(i));
    const frames = Math.floor(raw.length / (2 * channels));
    if (!frames) return;
    const buffer = context.createBuffer(channels, frames, rate);
    let energy = 0;
    for (let c = 0; c < channels; c++) {
      const out = buffer.getChannelData(c);
      for (let i = 0; i < frames; i++) {
        const sample = view.getInt16((i * channels + c) * 2, true);
        energy += sample * sample;
        out[i] = sample / 32768;
      }
    }
    const source = context.createBufferSource();
    source.buffer = buffer;
    source.connect(context.destination);
    const at = Math.max(this.next, context.currentTime + 0.05);
    source.start(at);
    this.next = at + buffer.duration;
    this.sources.add(source);
    source.onended = () => this.sources.delete(source);
    this.log.push({
      kind: "buffer",
      at: performance.now(),
      block: event.block_id,
      start: at,
      seconds: buffer.duration,
      rate,
      rms: Math.sqrt(energy / (frames * channels)),
    });
  },

  stop() {
    for (const source of this.sources) {
      try {
        source.stop();
      } catch {
        // not started yet, or ended
      }
    }
    this.sources.clear();
    this.next = 0;
  },
};

function speaking() {
  return ui.speak.checked;
}

/** Apply one event of the "parley" stream to a turn. Returns the run status at run_ended. */
function applyEvent(turn, event, run) {
  if (event.run_id) {
    turn.setRun(event.run_id);
    run.runId = event.run_id;
  }
  if (event.thread_id && !run.threadId) run.threadId = event.thread_id;
  switch (event.type) {
    case "run_started":
      break;
    case "text_delta":
      turn.appendText(event.text || "");
      speaker.note("text");
      break;
    case "audio_delta":
      speaker.play(event);
      break;
    case "audio_started":
    case "audio_ended":
      break;
    case "thinking_delta":
      turn.appendThinking(event.text || "");
      break;
    case "tool_call_started":
      turn.card(event.call_id, event.name);
      break;
    case "tool_call_arguments_delta":
      turn.card(event.call_id).appendArguments(event.delta || "");
      break;
    case "tool_call_ended":
      if (event.call) turn.card(event.call.id, event.call.name).setArguments(callArguments(event.call));
      break;
    case "tool_result":
      turn.toolResult(event.result);
      break;
    case "message_completed":
      turn.completed(event.msg);
      break;
    case "approval_requested":
      turn.approval(event.interrupt_id, event.calls);
      break;
    case "max_iters_reached":
      turn.note(`Stopped after ${event.iters} model calls (the agent's limit) without a final answer.`, "max-iters");
      break;
    case "run_error":
      run.failed = true;
      turn.error(event.kind ? `${event.kind}: ${event.message}` : event.message || "The run failed.");
      break;
    case "run_ended":
      speaker.note("run_ended");
      run.status = event.status;
      if (event.final && !turn.body.childElementCount) turn.completed(event.final);
      break;
    default:
      // the toolkit's own frames, should the server ever send them
      if (event.type === "error") {
        run.failed = true;
        turn.error(describeDetail(event.content) || "The run failed.");
      } else if (event.type === "token") {
        turn.appendText(String(event.content ?? ""));
      }
  }
}

/**
 * POST a streaming request and render its events into `turn`. Resolves true when the stream
 * was read (whatever the run's outcome), false when the request itself failed.
 */
async function streamRun(path, body, turn, threadId) {
  const run = { controller: new AbortController(), runId: null, threadId, turn, stopping: false, status: null, failed: false };
  state.run = run;
  turn.setBusy(true);
  setRunning(true);
  let finished = false;
  let ok = true;
  try {
    const response = await request("POST", path, body, { stream: true, signal: run.controller.signal });
    const headerThread = response.headers.get("X-Thread-Id");
    const headerRun = response.headers.get("X-Run-Id");
    if (headerThread) run.threadId = headerThread;
    if (headerRun) {
      run.runId = headerRun;
      turn.setRun(headerRun);
    }
    if (run.threadId && !state.threadId && state.openingNew) {
      state.threadId = run.threadId;
      state.openingNew = false;
      markCurrentThread();
      refreshThreads();
    }
    if (run.stopping && run.runId) cancelRun(run);
    finished = await readEvents(response, (event) => applyEvent(turn, event, run));
    if (!finished && !run.stopping) turn.error("The connection closed before the run ended.");
  } catch (err) {
    if (err.name === "AbortError") {
      if (!run.status) run.status = "interrupted";
    } else {
      ok = false;
      turn.error(err.message || String(err));
    }
  } finally {
    turn.renderText();
    turn.setBusy(false);
    if (state.run === run) state.run = null;
    setRunning(false);
  }
  if (run.status === "interrupted" || (run.stopping && run.status !== "completed")) turn.markInterrupted();
  if ((run.status === "completed" || run.status === "max_iters") && !run.failed) turn.offerFeedback();
  if (run.status === "completed" || run.status === "interrupted") turn.ensureSomething();
  refreshThreads();
  return ok;
}

async function cancelRun(run) {
  try {
    await api("POST", `/runs/${encodeURIComponent(run.runId)}/cancel`);
  } catch (err) {
    if (err.status !== 404) run.turn.error(`Could not stop the run: ${err.message}`);
    run.controller.abort();
    return;
  }
  // The stream should end with the interrupted partial answer; if it does not, hang up
  // (a disconnect cancels the run too).
  setTimeout(() => {
    if (state.run === run) run.controller.abort();
  }, 8000);
}

function stop() {
  const run = state.run;
  if (!run || run.stopping) return;
  run.stopping = true;
  speaker.stop();
  ui.stop.disabled = true;
  setStatus("Stopping…");
  if (run.runId) cancelRun(run);
  else run.controller.abort();
}

async function send() {
  const text = ui.input.value;
  if (!text.trim() || state.run || !state.agent) return;
  ui.globalError.hidden = true;
  ui.input.value = "";
  autosize();
  appendToLog(userBubble(text));
  const turn = new Turn(state.agent);
  appendToLog(turn.node);
  if (!state.threadId) {
    state.openingNew = true;
    ui.threadTitle.textContent = text.trim().split("\n")[0].slice(0, 80);
  }
  speaker.stop(); // a new question silences the last answer
  const body = { message: text, thread_id: state.threadId, stream_tokens: true, events: "parley" };
  if (speaking()) body.speak = true;
  const ok = await streamRun(`/${encodeURIComponent(state.agent)}/stream`, body, turn, state.threadId);
  state.openingNew = false;
  if (!ok && !turn.runIds.length && !ui.input.value) {
    ui.input.value = text; // the message was not taken: give it back
    autosize();
    updateSend();
  }
  ui.input.focus();
}

// -- threads ---------------------------------------------------------------------------------

function threadTitle(info) {
  return (info && info.title && String(info.title).trim()) || "Untitled conversation";
}

function renderThreads() {
  ui.threadList.replaceChildren();
  for (const info of state.threads) {
    const current = info.thread_id === state.threadId;
    const open = el(
      "button",
      {
        type: "button",
        class: "thread-open",
        dataset: { testid: "thread-open" },
        "aria-current": current ? "true" : null,
        onclick: () => openThread(info.thread_id),
      },
      el("span", { class: "thread-name", text: threadTitle(info) }),
      el(
        "span",
        { class: "thread-meta" },
        info.status && info.status !== "idle"
          ? el("span", { class: `dot dot-${info.status}`, title: info.status.replace("_", " ") }, info.status.replace("_", " "))
          : null,
        el("span", { text: [info.agent, formatTime(info.updated_at || info.created_at)].filter(Boolean).join(" · ") }),
      ),
    );
    const remove = el(
      "button",
      {
        type: "button",
        class: "btn btn-ghost icon-btn thread-delete",
        dataset: { testid: "thread-delete" },
        "aria-label": `Delete “${threadTitle(info)}”`,
        title: "Delete",
        onclick: () => deleteThread(info.thread_id),
      },
      el("span", { "aria-hidden": "true", text: "✕" }),
    );
    ui.threadList.append(
      el(
        "li",
        { class: `thread-item${current ? " is-current" : ""}`, dataset: { testid: "thread-item", threadId: info.thread_id } },
        open,
        remove,
      ),
    );
  }
  ui.threadsEmpty.hidden = state.threads.length > 0;
  ui.threadsMore.hidden = !state.threadsNext;
}

function markCurrentThread() {
  for (const item of ui.threadList.children) {
    const current = item.dataset.threadId === state.threadId;
    item.classList.toggle("is-current", current);
    const button = item.querySelector(".thread-open");
    if (current) button.setAttribute("aria-current", "true");
    else button.removeAttribute("aria-current");
  }
}

let refreshing = null;
async function refreshThreads() {
  if (refreshing) return refreshing;
  refreshing = (async () => {
    try {
      const page = await api("GET", `/threads?limit=${THREAD_PAGE}`);
      state.threads = page?.threads || [];
      state.threadsNext = page?.next || null;
      renderThreads();
    } catch (err) {
      if (err.status !== 401) showGlobalError(`Could not list the threads: ${err.message}`);
    } finally {
      refreshing = null;
    }
  })();
  return refreshing;
}

async function moreThreads() {
  if (!state.threadsNext) return;
  try {
    const page = await api(
      "GET",
      `/threads?limit=${THREAD_PAGE}&before=${encodeURIComponent(state.threadsNext)}`,
    );
    const known = new Set(state.threads.map((t) => t.thread_id));
    state.threads.push(...(page?.threads || []).filter((t) => !known.has(t.thread_id)));
    state.threadsNext = page?.next || null;
    renderThreads();
  } catch (err) {
    showGlobalError(`Could not list more threads: ${err.message}`);
  }
}

function newChat() {
  state.threadId = null;
  state.loadToken++;
  clearMessages();
  ui.threadTitle.textContent = "New chat";
  markCurrentThread();
  closeSidebar();
  ui.input.focus();
}

/** Render a thread's stored messages: user bubbles and assistant turns. */
function renderHistory(detail) {
  clearMessages();
  let turn = null;
  const msgs = detail.messages || [];
  const runIds = detail.run_ids || [];
  msgs.forEach((msg, index) => {
    if (msg.role === "system") return;
    if (msg.role === "user") {
      if (turn) finishHistoryTurn(turn);
      turn = null;
      const text = (msg.content || [])
        .map((b) => (b.type === "text" ? b.text : `[${b.type}]`))
        .join("\n");
      appendToLog(userBubble(text));
      return;
    }
    if (!turn) {
      turn = new Turn(msg.name || detail.agent);
      appendToLog(turn.node);
    }
    if (runIds[index]) turn.setRun(runIds[index]);
    turn.completed(msg);
  });
  for (const pending of detail.pending || []) {
    if (!turn) {
      turn = new Turn(detail.agent);
      appendToLog(turn.node);
    }
    turn.approval(pending.interrupt_id, pending.calls, pending.awaiting);
  }
  if (turn && !(detail.pending || []).length) finishHistoryTurn(turn);
  scrollToEnd(true);
}

function finishHistoryTurn(turn) {
  const lastRun = turn.runId;
  if (lastRun && turn.node.dataset.interrupted !== "true") turn.offerFeedback();
}

async function openThread(threadId) {
  if (!threadId) return;
  const token = ++state.loadToken;
  state.threadId = threadId;
  markCurrentThread();
  closeSidebar();
  ui.globalError.hidden = true;
  setStatus("Loading…");
  try {
    const detail = await api("GET", `/threads/${encodeURIComponent(threadId)}`);
    if (token !== state.loadToken) return;
    ui.threadTitle.textContent = threadTitle(detail);
    if (detail.agent && state.agents.some((a) => a.key === detail.agent)) selectAgent(detail.agent);
    renderHistory(detail);
    setStatus(detail.status === "running" ? "A run is still going on in this thread." : "");
  } catch (err) {
    if (token !== state.loadToken) return;
    setStatus("");
    if (err.status === 404) {
      showGlobalError("That conversation no longer exists.");
      state.threadId = null;
      refreshThreads();
    } else if (err.status !== 401) {
      showGlobalError(`Could not open the conversation: ${err.message}`);
    }
  }
}

async function deleteThread(threadId) {
  try {
    await api("DELETE", `/threads/${encodeURIComponent(threadId)}`);
  } catch (err) {
    if (err.status !== 404) {
      showGlobalError(`Could not delete the conversation: ${err.message}`);
      return;
    }
  }
  state.threads = state.threads.filter((t) => t.thread_id !== threadId);
  renderThreads();
  if (state.threadId === threadId) newChat();
  refreshThreads();
}

// -- agents ----------------------------------------------------------------------------------

async function loadAgents() {
  let agents = null;
  let fallbackDefault = "";
  try {
    const list = await api("GET", "/agents");
    if (Array.isArray(list)) {
      agents = list;
      fallbackDefault = list.find((a) => a && a.default)?.key || "";
    }
  } catch (err) {
    if (err.status === 401) throw err;
  }
  if (!agents) {
    const info = await api("GET", "/info");
    agents = info?.agents || [];
    fallbackDefault = info?.default_agent || "";
  }
  state.agents = agents.filter((a) => a && a.key);
  ui.agentSelect.replaceChildren(
    ...state.agents.map((a) =>
      el("option", { value: a.key, title: a.description || null }, a.key),
    ),
  );
  const keys = state.agents.map((a) => a.key);
  const chosen = [state.agent, fallbackDefault].find((k) => k && keys.includes(k)) || keys[0] || "";
  selectAgent(chosen);
  ui.agentSelect.disabled = !keys.length;
  if (!keys.length) showGlobalError("This service has no agents.");
}

function selectAgent(key) {
  state.agent = key;
  ui.agentSelect.value = key;
  const info = state.agents.find((a) => a.key === key);
  ui.agentSelect.title = info?.description || "";
  writeStorage(AGENT_STORAGE, key);
  updateSend();
}

/** The model the service's own agent runs on (`/info`'s `model`), and a note when it is tiny. */
async function loadModel() {
  let model = null;
  try {
    model = (await api("GET", "/info"))?.model || null;
  } catch {
    // an older service, or one behind a proxy: the header just does not say
  }
  ui.modelChip.hidden = !model?.spec;
  ui.modelName.textContent = model?.spec || "";
  ui.modelChip.title = model?.reason || "";
  ui.modelNote.hidden = !model?.tiny;
}

// -- authentication --------------------------------------------------------------------------

function askForKey(reason) {
  ui.authPanel.hidden = false;
  ui.authError.hidden = !reason;
  ui.authError.textContent = reason || "";
  ui.authCancel.hidden = true;
  ui.keyButton.hidden = false;
  if (!ui.authPanel.contains(document.activeElement)) ui.authInput.focus();
}

async function saveKey(event) {
  event.preventDefault();
  const key = ui.authInput.value.trim();
  if (!key) return;
  state.apiKey = key;
  writeStorage(KEY_STORAGE, key);
  ui.authInput.value = "";
  ui.authPanel.hidden = true;
  ui.authError.hidden = true;
  ui.keyButton.hidden = false;
  await start();
}

function showKeyForm() {
  ui.authPanel.hidden = false;
  ui.authError.hidden = true;
  ui.authCancel.hidden = false;
  ui.authInput.focus();
}

// -- page wiring -----------------------------------------------------------------------------

function showGlobalError(message) {
  ui.globalError.replaceChildren(inlineError(message, "error"));
  ui.globalError.hidden = false;
}

function autosize() {
  ui.input.style.height = "auto";
  ui.input.style.height = `${Math.min(ui.input.scrollHeight, 240)}px`;
}

function openSidebar() {
  ui.app.classList.add("sidebar-open");
  ui.toggleSidebar.setAttribute("aria-expanded", "true");
}

function closeSidebar() {
  ui.app.classList.remove("sidebar-open");
  ui.toggleSidebar.setAttribute("aria-expanded", "false");
}

async function start() {
  ui.globalError.hidden = true;
  try {
    await loadAgents();
  } catch (err) {
    if (err.status !== 401) showGlobalError(`Could not load the agents: ${err.message}`);
    return;
  }
  await Promise.all([refreshThreads(), loadModel()]);
  if (state.threadId) openThread(state.threadId);
}

ui.composer.addEventListener("submit", (event) => {
  event.preventDefault();
  send();
});
ui.input.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && !event.shiftKey && !event.isComposing && !event.altKey) {
    event.preventDefault();
    send();
  }
});
ui.input.addEventListener("input", () => {
  autosize();
  updateSend();
});
ui.stop.addEventListener("click", stop);
ui.speak.checked = readStorage(SPEAK_STORAGE) === "1";
ui.speak.addEventListener("change", () => {
  writeStorage(SPEAK_STORAGE, ui.speak.checked ? "1" : "");
  if (ui.speak.checked) speaker.audioContext(); // a click: the browser lets audio start
  else speaker.stop();
});
ui.newChat.addEventListener("click", newChat);
ui.threadsMore.addEventListener("click", moreThreads);
ui.agentSelect.addEventListener("change", () => selectAgent(ui.agentSelect.value));
ui.authForm.addEventListener("submit", saveKey);
ui.authCancel.addEventListener("click", () => {
  ui.authPanel.hidden = true;
});
ui.keyButton.addEventListener("click", showKeyForm);
ui.toggleSidebar.addEventListener("click", () => {
  if (ui.app.classList.contains("sidebar-open")) closeSidebar();
  else openSidebar();
});
ui.app.addEventListener("click", (event) => {
  // a tap beside the open drawer (narrow screens) closes it
  if (ui.app.classList.contains("sidebar-open") && !ui.sidebar.contains(event.target)
      && !ui.toggleSidebar.contains(event.target)) closeSidebar();
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape") {
    if (ui.app.classList.contains("sidebar-open")) closeSidebar();
    else if (state.run) stop();
  }
});
ui.keyButton.hidden = !state.apiKey;
ui.app.dataset.ready = "false";
start().finally(() => {
  ui.app.dataset.ready = "true";
});
