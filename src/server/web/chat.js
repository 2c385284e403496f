"use strict";
const log = document.getElementById("log"), input = document.getElementById("input");
const sendBtn = document.getElementById("send"), stopBtn = document.getElementById("stop");
const stats = document.getElementById("stats");
const history = [];
let controller = null;

function add(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.textContent = text;
  log.appendChild(d);
  log.scrollTop = log.scrollHeight;
  return d;
}

fetch("/v1/models").then(r => r.json()).then(j => {
  if (j.data && j.data[0]) document.getElementById("model").textContent = j.data[0].id;
}).catch(() => {});

async function send(text) {
  history.push({role: "user", content: text});
  add("user", text);
  const out = add("assistant", "");
  controller = new AbortController();
  sendBtn.disabled = true; stopBtn.disabled = false;
  const t0 = performance.now();
  let ttft = 0, n = 0, reply = "", usage = null;
  try {
    const r = await fetch("/v1/chat/completions", {
      method: "POST", headers: {"Content-Type": "application/json"}, signal: controller.signal,
      body: JSON.stringify({messages: history, stream: true, stream_options: {include_usage: true}})
    });
    if (!r.ok) {
      const j = await r.json().catch(() => ({}));
      throw new Error((j.error && j.error.message) || ("HTTP " + r.status));
    }
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let k;
      while ((k = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, k); buf = buf.slice(k + 2);
        if (!ev.startsWith("data: ")) continue;
        const data = ev.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        if (j.usage) usage = j.usage;
        const c = j.choices && j.choices[0];
        if (c && c.delta && c.delta.content) {
          if (!ttft) ttft = performance.now() - t0;
          n++;
          reply += c.delta.content;
          out.textContent = reply;
          log.scrollTop = log.scrollHeight;
        }
      }
    }
  } catch (e) {
    if (e.name === "AbortError") out.textContent = reply + " [stopped]";
    else { out.className = "msg error"; out.textContent = reply + " [" + e.message + "]"; }
  }
  const secs = (performance.now() - t0) / 1000;
  let s = "TTFT " + (ttft / 1000).toFixed(2) + " s";
  if (usage) {
    s += " | " + usage.completion_tokens + " tokens, " + (usage.completion_tokens / Math.max(secs - ttft / 1000, 1e-3)).toFixed(1) + " tok/s";
    if (usage.prompt_tokens_details) s += " | cached " + usage.prompt_tokens_details.cached_tokens + "/" + usage.prompt_tokens;
  }
  stats.textContent = s;
  history.push({role: "assistant", content: reply});
  controller = null;
  sendBtn.disabled = false; stopBtn.disabled = true;
}

document.getElementById("form").addEventListener("submit", e => {
  e.preventDefault();
  const text = input.value.trim();
  if (!text || controller) return;
  input.value = "";
  send(text);
});
input.addEventListener("keydown", e => {
  if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); document.getElementById("form").requestSubmit(); }
});
stopBtn.addEventListener("click", () => { if (controller) controller.abort(); });
