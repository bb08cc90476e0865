// The chat page of `sinklm serve` (GET /, embedded in the binary): one conversation bound to a server session,
// streamed over server-sent events, with the session's stream length and K/V entries drawn live so the bounded
// cache is visible. Plain JavaScript for current browsers, no build step, no other origin.
//
// Safety: every string that comes from the server or the user (model output, session text, error messages,
// the model card) reaches the page through setText(), as text and never as markup; the server's
// Content-Security-Policy (no inline script, no other origin) is the second wall. The API key is kept in
// sessionStorage (localStorage when "remember" is ticked) and only ever sent in the Authorization header,
// never in a URL.
"use strict";

const STORE = { session: "sinklm.session", settings: "sinklm.settings", key: "sinklm.key", chart: "sinklm.chart." };
const SHOWN_MESSAGES = 200;  // a session can run for days: only its latest messages are rendered
const CHART_POINTS = 400;    // samples kept per session; beyond that every other one is dropped
const BUSY_RETRIES = 20;     // a stopped reply frees its session a moment later (409 until then)
const COLORS = { stream: "#2f6fde", kv: "#d9480f", budget: "#868e96", axis: "#adb5bd", text: "#495057" };
const ROLE_LABELS = { user: "You", assistant: "Model", stream: "Stream", notice: "" };

const $ = (id) => document.getElementById(id);

const state = {
  model: null,       // the model id (/v1/models)
  cache: null,       // the model card's cache: policy, window, sinks, recent
  session: null,     // the session id, also in localStorage
  controller: null,  // the AbortController of the reply being streamed
  chart: [],         // [{length, kv}] samples of the session's stream
};

// The one way text enters the page: as text, whatever markup it contains.
function setText(node, text) {
  node.textContent = text;
}

function element(tag, className, text) {
  const node = document.createElement(tag);
  if (className) node.className = className;
  if (text !== undefined) setText(node, text);
  return node;
}

// Chunks of a reply can arrive hundreds of times a second: the page draws at most once a frame, the latest
// state of each thing (reply text, numbers, chart), so it stays responsive and Stop can be clicked. The work
// of a frame is keyed: a newer job for the same key replaces the older one.
const frame = { requested: false, jobs: new Map() };

function onNextFrame(key, job) {
  frame.jobs.set(key, job);
  if (frame.requested) return;
  frame.requested = true;
  requestAnimationFrame(drawFrame);
}

function drawFrame() {
  frame.requested = false;
  const jobs = [...frame.jobs.values()];
  frame.jobs.clear();
  for (const job of jobs) job();
}

function status(text, kind = "info") {
  const line = $("status");
  setText(line, text);
  line.dataset.kind = kind;
}

// ---- the API: bearer key, JSON errors -------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

function apiKey() {
  return sessionStorage.getItem(STORE.key) || localStorage.getItem(STORE.key) || "";
}

function storeKey(key, remember) {
  sessionStorage.removeItem(STORE.key);
  localStorage.removeItem(STORE.key);
  if (key) (remember ? localStorage : sessionStorage).setItem(STORE.key, key);
}

function needKey() {
  status("This server needs an API key: enter it under Settings and press Save.", "error");
  $("api-key").focus();
}

async function errorOf(response) {
  let message = `HTTP ${response.status}`;
  try {
    const error = (await response.json()).error;
    if (error && error.message) message = error.message;
  } catch (_) {
    // not a JSON error body: keep the status line
  }
  if (response.status === 401) needKey();
  return new ApiError(response.status, message);
}

async function api(path, { method = "GET", body, signal } = {}) {
  const headers = {};
  const key = apiKey();
  if (key) headers.Authorization = `Bearer ${key}`;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(path, { method, headers, signal, cache: "no-store",
                                   body: body === undefined ? undefined : JSON.stringify(body) });
  } catch (e) {
    if (e.name === "AbortError") throw e;
    throw new ApiError(0, "cannot reach the server (is `sinklm serve` running?)");
  }
  if (!response.ok) throw await errorOf(response);
  return response;
}

async function apiJson(path, options) {
  return (await api(path, options)).json();
}

// Retries while the session answers another request (409), e.g. the reply just stopped.
async function whenIdle(request) {
  for (let attempt = 0; ; ++attempt) {
    try {
      return await request();
    } catch (e) {
      if (!(e instanceof ApiError && e.status === 409) || attempt >= BUSY_RETRIES) throw e;
    }
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
}

// Server-sent events from a fetch response: calls onEvent with each `data: {json}` until `data: [DONE]`.
async function readEvents(response, onEvent) {
  const reader = response.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true });
      for (let cut = buffer.indexOf("\n\n"); cut >= 0; cut = buffer.indexOf("\n\n")) {
        const block = buffer.slice(0, cut);
        buffer = buffer.slice(cut + 2);
        for (const line of block.split("\n")) {
          if (!line.startsWith("data: ")) continue;
          if (line === "data: [DONE]") return;
          onEvent(JSON.parse(line.slice(6)));
        }
      }
    }
  } finally {
    reader.cancel().catch(() => {});
  }
}

// ---- model card and /metrics ----------------------------------------------------------------------------

function fillList(list, pairs) {
  list.replaceChildren();
  for (const [name, value] of pairs) list.append(element("dt", "", name), element("dd", "", value === undefined ? "–" : String(value)));
}

function budgetText(cache) {
  return `${cache.window} = ${cache.sinks} sink${cache.sinks === 1 ? "" : "s"} + ${cache.recent} recent`;
}

async function loadCard() {
  const model = (await apiJson("/v1/models")).data[0];
  const card = model.sinklm;
  state.model = model.id;
  state.cache = card.cache;
  const sinks = card.sink_tokens ? `${card.sink_mode} (${card.sink_tokens} sink token${card.sink_tokens > 1 ? "s" : ""})` : card.sink_mode;
  fillList($("card"), [["checkpoint", card.checkpoint], ["model id", model.id], ["sink mode", sinks],
                       ["cache policy", card.cache.policy], ["window W", budgetText(card.cache)],
                       ["positions", card.cache.positions], ["K/V dtype", card.cache.kv_dtype], ["device", card.device]]);
  setText($("card-summary"), `${card.checkpoint} · sink ${card.sink_mode} · ${card.cache.policy} cache, window ${card.cache.window}`);
  setText($("stat-budget"), budgetText(card.cache));
  $("max-tokens").max = card.max_tokens_limit;
  drawChart();
}

function parseMetrics(text) {
  const values = new Map();
  for (const line of text.split("\n")) {
    if (!line || line.startsWith("#")) continue;
    const cut = line.lastIndexOf(" ");
    values.set(line.slice(0, cut), Number(line.slice(cut + 1)));
  }
  return values;
}

function sumMetric(values, prefix, test) {
  let total = 0;
  for (const [name, value] of values) if (name.startsWith(prefix) && test(name)) total += value;
  return total;
}

async function loadMetrics() {
  const m = parseMetrics(await (await api("/metrics")).text());
  const step = m.get("sinklm_step_seconds_sum") / m.get("sinklm_step_seconds_count");
  const completions = (name) => name.includes("completions\"");
  fillList($("metrics"), [
    ["generated tokens", m.get("sinklm_generated_tokens_total")],
    ["active streams", m.get("sinklm_active_streams")],
    ["K/V entries held", m.get("sinklm_kv_entries")],
    ["sessions memory / disk", `${m.get('sinklm_sessions{where="memory"}')} / ${m.get('sinklm_sessions{where="disk"}')}`],
    ["completion requests", sumMetric(m, "sinklm_http_responses_total", completions)],
    ["5xx responses", sumMetric(m, "sinklm_http_responses_total", (name) => name.includes('status="5'))],
    ["mean step", Number.isFinite(step) ? `${(step * 1000).toFixed(2)} ms` : "–"],
  ]);
}

// ---- session stats and the chart ------------------------------------------------------------------------

function loadChart(id) {
  try {
    const points = JSON.parse(localStorage.getItem(STORE.chart + id) || "[]");
    return Array.isArray(points) ? points.filter((p) => Number.isFinite(p.length) && Number.isFinite(p.kv)) : [];
  } catch (_) {
    return [];
  }
}

function saveChart() {
  if (state.session) localStorage.setItem(STORE.chart + state.session, JSON.stringify(state.chart));
}

function showStats(length, kv) {
  const last = state.chart[state.chart.length - 1];
  if (!last || last.length !== length || last.kv !== kv) state.chart.push({ length, kv });
  if (state.chart.length > CHART_POINTS) state.chart = state.chart.filter((_, i, all) => i % 2 === 0 || i === all.length - 1);
  onNextFrame("stats", () => {
    setText($("stat-stream"), String(length));
    setText($("stat-kv"), String(kv));
    drawChart();
  });
}

function plotLine(g, points, x, y, color, dashed) {
  g.strokeStyle = color;
  g.lineWidth = 2;
  g.setLineDash(dashed ? [5, 4] : []);
  g.beginPath();
  points.forEach((v, i) => (i === 0 ? g.moveTo(x(i), y(v)) : g.lineTo(x(i), y(v))));
  g.stroke();
}

// Stream length and K/V entries per sample (left to right): one climbs without end, the other stops at W.
function drawChart() {
  const canvas = $("chart");
  const ratio = window.devicePixelRatio || 1;
  const width = canvas.clientWidth || canvas.width, height = canvas.clientHeight || canvas.height;
  canvas.width = Math.round(width * ratio);
  canvas.height = Math.round(height * ratio);
  const g = canvas.getContext("2d");
  g.setTransform(ratio, 0, 0, ratio, 0, 0);
  g.clearRect(0, 0, width, height);
  const points = state.chart;
  const budget = state.cache ? state.cache.window : 0;
  const top = Math.max(1, budget * 1.25, ...points.map((p) => p.length));
  const left = 44, right = 6, above = 8, below = 16;
  const x = (i) => left + (points.length < 2 ? 0 : i / (points.length - 1)) * (width - left - right);
  const y = (v) => height - below - (v / top) * (height - above - below);
  g.fillStyle = COLORS.text;
  g.font = "11px system-ui, sans-serif";
  g.textAlign = "right";
  for (const v of new Set([0, budget, Math.round(top)])) g.fillText(String(v), left - 4, y(v) + 4);
  g.textAlign = "left";
  g.fillText("samples →", left, height - 3);
  g.strokeStyle = COLORS.axis;
  g.lineWidth = 1;
  g.setLineDash([]);
  g.strokeRect(left, above, width - left - right, height - above - below);
  if (budget) plotLine(g, [budget, budget], (i) => (i === 0 ? left : width - right), y, COLORS.budget, true);
  if (points.length === 0) return;
  plotLine(g, points.map((p) => p.length), x, y, COLORS.stream, false);
  plotLine(g, points.map((p) => p.kv), x, y, COLORS.kv, false);
}

// ---- the transcript -------------------------------------------------------------------------------------

// The server's chat template (serve/openai_server.h): each turn is "User: <text>\nAssistant:" then the reply;
// a reply cut at its stop string keeps the "\nUser:" in the stream, which is not shown. Text before the first
// turn (a session fed through /v1/completions, say) is shown as it is.
function parseTranscript(text) {
  const turns = [...text.matchAll(/User: ([\s\S]*?)\nAssistant:/g)];
  const messages = [];
  const before = text.slice(0, turns.length ? turns[0].index : text.length);
  if (before.trim()) messages.push({ role: "stream", text: before });
  turns.forEach((turn, i) => {
    const end = i + 1 < turns.length ? turns[i + 1].index : text.length;
    messages.push({ role: "user", text: turn[1] });
    messages.push({ role: "assistant", text: text.slice(turn.index + turn[0].length, end).replace(/\nUser:$/, "") });
  });
  return messages;
}

// A reply as shown: without the space models put after "Assistant:".
function replyText(raw) {
  return raw.replace(/^\s+/, "");
}

function nearBottom() {
  const t = $("transcript");
  return t.scrollHeight - t.scrollTop - t.clientHeight < 80;
}

function addMessage(role, text, meta = "") {
  $("empty-note").hidden = true;
  const item = element("article", `msg ${role}`);
  const body = element("div", "body", role === "assistant" ? replyText(text) : text);
  const metaLine = element("p", "meta", meta);
  if (ROLE_LABELS[role]) item.append(element("h3", "who", ROLE_LABELS[role]));
  item.append(body, metaLine);
  $("transcript").append(item);
  return { item, body, meta: metaLine };
}

function showTranscript(messages) {
  const note = $("empty-note");
  $("transcript").replaceChildren(note);
  note.hidden = messages.length > 0;
  const hidden = messages.length - SHOWN_MESSAGES;
  if (hidden > 0) addMessage("notice", `${hidden} earlier messages are in the session and not shown here.`);
  for (const m of messages.slice(-SHOWN_MESSAGES)) addMessage(m.role, m.text, m.role === "assistant" ? "from the session log" : "");
  $("transcript").scrollTop = $("transcript").scrollHeight;
}

// ---- sessions -------------------------------------------------------------------------------------------

function rememberSession(id) {
  state.session = id;
  if (id) localStorage.setItem(STORE.session, id);
  else localStorage.removeItem(STORE.session);
  setText($("session-id"), id || "none yet");
  state.chart = id ? loadChart(id) : [];
  setText($("stat-stream"), "0");
  setText($("stat-kv"), "0");
  drawChart();
}

async function createSession() {
  rememberSession((await apiJson("/v1/sessions", { method: "POST", body: {} })).id);
}

// The session's numbers as the server keeps them (the whole logged stream), and the chart saved with them.
async function refreshSession() {
  const s = await apiJson(`/v1/sessions/${encodeURIComponent(state.session)}`);
  showStats(s.tokens, s.kv_entries);
  saveChart();
  return s;
}

async function resumeSession() {
  rememberSession(localStorage.getItem(STORE.session));
  if (!state.session) return showTranscript([]);
  try {
    showTranscript(parseTranscript((await refreshSession()).text));
  } catch (e) {
    if (e.status !== 404) throw e;
    status(`Session ${state.session} no longer exists on this server; your next message starts a new one.`);
    rememberSession(null);
    showTranscript([]);
  }
}

async function newChat() {
  if (state.controller) return;
  await createSession();
  showTranscript([]);
  status("New session created.");
}

async function deleteSession() {
  if (!state.session || state.controller) return;
  if (!window.confirm(`Delete session ${state.session} and its whole stream? This cannot be undone.`)) return;
  const id = state.session;
  try {
    await whenIdle(() => api(`/v1/sessions/${encodeURIComponent(id)}`, { method: "DELETE" }));
  } catch (e) {
    if (e.status !== 404) throw e;
  }
  localStorage.removeItem(STORE.chart + id);
  rememberSession(null);
  showTranscript([]);
  status(`Session ${id} deleted.`);
}

// ---- sending --------------------------------------------------------------------------------------------

function numberSetting(id, name, min, max, integer) {
  const input = $(id);
  const value = Number(input.value);
  const upper = input.max ? Math.min(max, Number(input.max)) : max;
  if (input.value === "" || !Number.isFinite(value) || value < min || value > upper || (integer && !Number.isInteger(value)))
    throw new ApiError(400, `Settings: ${name} must be ${integer ? "an integer" : "a number"} in [${min}, ${upper}]`);
  return value;
}

function readSettings() {
  return { temperature: numberSetting("temperature", "temperature", 0, 2, false),
           top_p: numberSetting("top-p", "top-p", 0.01, 1, false),
           max_tokens: numberSetting("max-tokens", "max tokens", 1, 1e9, true) };
}

function setBusy(busy) {
  $("send").disabled = busy;
  $("stop").disabled = !busy;
  $("new-session").disabled = busy;
  $("delete-session").disabled = busy;
}

function replyMeta(tokens, timing, finish) {
  const parts = [];
  if (tokens !== null) parts.push(`${tokens} tokens`);
  if (tokens > 1 && timing.last > timing.first) parts.push(`${((tokens - 1) / ((timing.last - timing.first) / 1000)).toFixed(1)} tokens/s`);
  if (timing.first !== null) parts.push(`first token ${Math.round(timing.first - timing.start)} ms`);
  if (finish) parts.push(finish === "length" ? "max tokens reached" : finish);
  return parts.join(" · ");
}

// One streamed chunk: its text, finish reason and usage, and the session's numbers as of that chunk.
function takeChunk(event, progress, reply, timing) {
  if (event.error) throw new ApiError(400, event.error.message);
  const choice = event.choices && event.choices[0];
  const piece = choice && choice.delta && choice.delta.content;
  if (piece) {
    if (timing.first === null) timing.first = performance.now();
    timing.last = performance.now();
    progress.raw += piece;
    const shown = progress.raw;
    onNextFrame("reply", () => {
      const follow = nearBottom();
      setText(reply.body, replyText(shown));
      setText(reply.meta, replyMeta(null, timing, null));
      if (follow) $("transcript").scrollTop = $("transcript").scrollHeight;
    });
  }
  if (choice && choice.finish_reason) progress.finish = choice.finish_reason;
  if (event.usage) progress.tokens = event.usage.completion_tokens;
  if (event.sinklm) showStats(event.sinklm.stream_length, event.sinklm.kv_entries);
}

// Streams one reply into `reply`, keeping what arrived in `progress` ({raw, tokens, finish}).
async function streamReply(text, settings, reply, timing, progress, signal) {
  const body = { model: state.model || undefined, messages: [{ role: "user", content: text }], stream: true,
                 stream_options: { include_usage: true }, sinklm: { stream_state: true }, session: state.session,
                 ...settings };
  const response = await whenIdle(() => api("/v1/chat/completions", { method: "POST", body, signal }));
  try {
    await readEvents(response, (event) => takeChunk(event, progress, reply, timing));
  } finally {
    drawFrame();  // the reply as received, before its final line replaces the running one
  }
}

async function send() {
  const input = $("message");
  const text = input.value;
  if (!text.trim() || state.controller) return;
  let settings;
  try {
    settings = readSettings();
    if (!state.session) await createSession();
  } catch (e) {
    return status(e.message, "error");
  }
  input.value = "";
  addMessage("user", text);
  const reply = addMessage("assistant", "");
  reply.item.dataset.state = "streaming";
  state.controller = new AbortController();
  setBusy(true);
  const timing = { start: performance.now(), first: null, last: null };
  const progress = { raw: "", tokens: null, finish: null };
  status("");
  try {
    await streamReply(text, settings, reply, timing, progress, state.controller.signal);
    setText(reply.meta, replyMeta(progress.tokens, timing, progress.finish));
    reply.item.dataset.state = "done";
  } catch (e) {
    const stopped = e.name === "AbortError";
    reply.item.dataset.state = stopped ? "stopped" : "error";
    const received = `${progress.raw.length} characters received`;
    setText(reply.meta, stopped ? `${received} · ${replyMeta(null, timing, null)} · stopped` : `error: ${e.message}`);
    if (!stopped) status(e.message, "error");
  } finally {
    state.controller = null;
    await refreshSession().catch(() => {});  // the server may be gone; the next load shows it
    drawFrame();  // the session's numbers are final when Send is back
    setBusy(false);
    loadMetrics().catch(() => {});
    input.focus();
  }
}

// ---- settings and start-up ------------------------------------------------------------------------------

function loadSettings() {
  let saved = {};
  try {
    saved = JSON.parse(localStorage.getItem(STORE.settings) || "{}") || {};
  } catch (_) {
    // unreadable: keep the defaults in the page
  }
  for (const id of ["temperature", "top-p", "max-tokens"]) if (typeof saved[id] === "string") $(id).value = saved[id];
  $("remember-key").checked = localStorage.getItem(STORE.key) !== null;
  $("api-key").value = apiKey();
}

async function saveSettings() {
  const values = {};
  for (const id of ["temperature", "top-p", "max-tokens"]) values[id] = $(id).value;
  localStorage.setItem(STORE.settings, JSON.stringify(values));
  storeKey($("api-key").value.trim(), $("remember-key").checked);
  status("Settings saved.");
  await connect();
}

async function connect() {
  try {
    await loadCard();
    if (!state.controller) await resumeSession();  // not under a reply that is still streaming
    document.body.dataset.ready = "true";
    if ($("status").dataset.kind === "error") status("");
  } catch (e) {
    if (e.status !== 401) status(e.message, "error");
  }
  loadMetrics().catch(() => {});
}

function report(promise) {
  promise.catch((e) => status(e.message, "error"));
}

function init() {
  $("composer").addEventListener("submit", (e) => {
    e.preventDefault();
    report(send());
  });
  $("message").addEventListener("keydown", (e) => {
    if (e.key !== "Enter" || e.shiftKey || e.isComposing) return;  // Shift+Enter: a new line
    e.preventDefault();
    report(send());
  });
  $("stop").addEventListener("click", () => state.controller && state.controller.abort());
  $("new-session").addEventListener("click", () => report(newChat()));
  $("delete-session").addEventListener("click", () => report(deleteSession()));
  $("settings").addEventListener("submit", (e) => {
    e.preventDefault();
    report(saveSettings());
  });
  window.addEventListener("resize", drawChart);
  setInterval(() => loadMetrics().catch(() => {}), 5000);
  loadSettings();
  report(connect());
}

init();
