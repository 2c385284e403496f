"use strict";
// The chat page of brisk serve: streams /v1/chat/completions (SSE), Stop aborts
// the fetch (the server cancels the request when its client goes away), and
// the stats line shows TTFT, tokens/s and cached prompt tokens from usage.
// Each reply's element carries data-state: streaming, done, stopped or error.
const $ = id => document.getElementById(id);
const log = $("log"), input = $("input"), sendBtn = $("send"), stopBtn = $("stop"), stats = $("stats");
const keyRow = $("key-row"), keyInput = $("api-key");
let history = [];
let controller = null;

keyInput.value = localStorage.getItem("brisk-api-key") || "";
keyInput.addEventListener("change", () => localStorage.setItem("brisk-api-key", keyInput.value));

function headers() {
  const h = {"Content-Type": "application/json"};
  if (keyInput.value) h["Authorization"] = "Bearer " + keyInput.value;
  return h;
}

function add(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.textContent = text;
  log.appendChild(d);
  log.scrollTop = log.scrollHeight;
  return d;
}

fetch("/v1/models", {headers: headers()}).then(r => {
  if (r.status === 401) keyRow.hidden = false;
  return r.json();
}).then(j => {
  if (j.data && j.data[0]) $("model").textContent = j.data[0].id;
}).catch(() => {});

// the SSE payloads ("data: ..." lines) of the complete events in buf; the rest stays in buf
function takeEvents(state) {
  const out = [];
  let k;
  while ((k = state.buf.indexOf("\n\n")) >= 0) {
    const block = state.buf.slice(0, k);
    state.buf = state.buf.slice(k + 2);
    for (const line of block.split("\n")) if (line.startsWith("data: ")) out.push(line.slice(6));   // ": ping" comments skipped
  }
  return out;
}

function showStats(ttft, secs, usage, state) {
  let s = ttft ? "TTFT " + (ttft / 1000).toFixed(2) + " s" : "no token";
  if (usage) {
    const gen = usage.completion_tokens;
    const decode = Math.max(secs - ttft / 1000, 1e-3);
    s += " | " + gen + " tokens, " + (gen > 1 ? ((gen - 1) / decode).toFixed(1) : "-") + " tok/s";
    const cached = usage.prompt_tokens_details ? usage.prompt_tokens_details.cached_tokens : 0;
    s += " | prompt " + usage.prompt_tokens + " tokens, " + cached + " cached";
  } else if (state !== "done") {
    s += " | " + state;
  }
  stats.textContent = s;
}

async function send(text) {
  history.push({role: "user", content: text});
  add("user", text);
  const out = add("assistant", "");
  out.dataset.state = "streaming";
  controller = new AbortController();
  sendBtn.disabled = true; stopBtn.disabled = false;
  const t0 = performance.now();
  let ttft = 0, reply = "", usage = null, state = "done";
  const body = {messages: history, stream: true, stream_options: {include_usage: true}};
  const maxTokens = parseInt($("max-tokens").value, 10), temp = parseFloat($("temperature").value);
  if (maxTokens > 0) body.max_tokens = maxTokens;
  if (temp >= 0) body.temperature = temp;
  try {
    const r = await fetch("/v1/chat/completions", {method: "POST", headers: headers(), signal: controller.signal, body: JSON.stringify(body)});
    if (!r.ok) {
      if (r.status === 401) keyRow.hidden = false;
      const j = await r.json().catch(() => ({}));
      throw new Error((j.error && j.error.message) || ("HTTP " + r.status));
    }
    const reader = r.body.getReader(), dec = new TextDecoder();
    const sse = {buf: ""};
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      sse.buf += dec.decode(value, {stream: true});
      for (const data of takeEvents(sse)) {
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.usage) usage = j.usage;
        const c = j.choices && j.choices[0];
        if (c && c.delta && c.delta.content) {
          if (!ttft) ttft = performance.now() - t0;
          reply += c.delta.content;
          out.textContent = reply;
          log.scrollTop = log.scrollHeight;
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") {
      state = "stopped";
      out.textContent = reply + " [stopped]";
    } else {
      state = "error";
      out.classList.add("error");
      out.textContent = reply + " [" + e.message + "]";
    }
  }
  out.dataset.state = state;
  showStats(ttft, (performance.now() - t0) / 1000, usage, state);
  history.push({role: "assistant", content: reply});
  controller = null;
  sendBtn.disabled = false; stopBtn.disabled = true;
  input.focus();
}

$("form").addEventListener("submit", e => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || controller) return;
  input.value = "";
  send(text);
});
input.addEventListener("keydown", e => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("form").requestSubmit(); }
});
stopBtn.addEventListener("click", () => { if (controller) controller.abort(); });
$("new").addEventListener("click", () => {
  if (controller) controller.abort();
  history = [];
  log.textContent = "";
  stats.textContent = "";
});
