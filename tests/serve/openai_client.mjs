// The real openai npm client against brisk serve (tests/cli_serve_openai.sh).
// usage: node openai_client.mjs OPENAI_MODULE_DIR BASE_URL BUSY_BASE_URL API_KEY
import { createRequire } from "node:module";
const [dir, base, busyBase, key] = process.argv.slice(2);
const require = createRequire(dir + "/");
const OpenAI = require("openai").default ?? require("openai");

let pass = 0, fail = 0;
function check(name, cond, info) {
  if (cond) pass++;
  else { fail++; console.log("FAIL " + name + (info !== undefined ? ": " + JSON.stringify(info).slice(0, 500) : "")); }
}

const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 60000 });
const messages = [{ role: "user", content: "def f():" }];

// non-stream chat
const r = await client.chat.completions.create({ model: "anything", messages, max_tokens: 12, temperature: 0 });
check("chat: shape", r.object === "chat.completion" && r.choices.length === 1 && r.choices[0].message.role === "assistant" &&
      typeof r.choices[0].message.content === "string" && ["stop", "length"].includes(r.choices[0].finish_reason), r);
check("chat: usage", r.usage.prompt_tokens > 0 && r.usage.total_tokens === r.usage.prompt_tokens + r.usage.completion_tokens &&
      typeof r.usage.prompt_tokens_details.cached_tokens === "number", r.usage);

// stream with include_usage: the same text, usage null on every chunk but the last
const stream = await client.chat.completions.create({ model: "anything", messages, max_tokens: 12, temperature: 0, stream: true,
                                                      stream_options: { include_usage: true } });
let text = "", chunks = [], sawRole = false;
for await (const ch of stream) {
  chunks.push(ch);
  if (ch.choices.length && ch.choices[0].delta.role === "assistant") sawRole = true;
  if (ch.choices.length && ch.choices[0].delta.content) text += ch.choices[0].delta.content;
}
check("stream: text equals non-stream", text === r.choices[0].message.content, { text, want: r.choices[0].message.content });
check("stream: role", sawRole);
const last = chunks[chunks.length - 1];
check("stream: include_usage", last.choices.length === 0 && last.usage && last.usage.completion_tokens === r.usage.completion_tokens &&
      chunks.slice(0, -1).every(c => c.usage === null), last);

// n = 2 and logprobs
const r2 = await client.chat.completions.create({ model: "x", messages, max_tokens: 5, temperature: 0, n: 2, logprobs: true,
                                                  top_logprobs: 2, ignore_eos: true });
check("n=2", r2.choices.length === 2 && r2.choices[1].index === 1 && r2.usage.completion_tokens === 10, r2.usage);
check("logprobs", r2.choices[0].logprobs.content.length === 5 && r2.choices[0].logprobs.content[0].top_logprobs.length === 2,
      r2.choices[0].logprobs);

// legacy completions
const c = await client.completions.create({ model: "x", prompt: "import os\n", max_tokens: 6, temperature: 0, ignore_eos: true });
check("completions", c.object === "text_completion" && typeof c.choices[0].text === "string" && c.usage.completion_tokens === 6, c);
const cs = await client.completions.create({ model: "x", prompt: "import os\n", max_tokens: 6, temperature: 0, ignore_eos: true,
                                             stream: true });
let ctext = "";
for await (const ch of cs) ctext += ch.choices[0]?.text ?? "";
check("completions stream", ctext === c.choices[0].text, { ctext, want: c.choices[0].text });

// echo with prompt logprobs and max_tokens 0 (what evaluation harnesses send); brisk's usage.brisk rides along
const e = await client.completions.create({ model: "x", prompt: "import os\n", max_tokens: 0, echo: true, logprobs: 1, temperature: 0 });
check("echo", e.choices[0].text === "import os\n" && e.choices[0].logprobs.token_logprobs[0] === null &&
      e.choices[0].logprobs.tokens.length === e.usage.prompt_tokens && e.usage.completion_tokens === 0 &&
      e.choices[0].logprobs.token_logprobs.slice(1).every((v) => v <= 0), e.choices[0]);
check("usage.brisk", c.usage.brisk && c.usage.brisk.flops > 0 && c.usage.brisk.sampled_tokens === 6, c.usage);

// models
const models = await client.models.list();
check("models", models.data.length === 1 && models.data[0].id === "tiny", models.data);

// errors: a 400 naming the parameter, a 401
try {
  await client.chat.completions.create({ model: "x", messages, temperature: "hot" });
  check("400 raised", false);
} catch (e) {
  check("400", e instanceof OpenAI.BadRequestError && e.status === 400 && e.code === "invalid_type" && e.param === "temperature",
        { status: e.status, code: e.code, param: e.param, msg: e.message });
}
try {
  await new OpenAI({ baseURL: base, apiKey: "wrong", maxRetries: 0 }).models.list();
  check("401 raised", false);
} catch (e) {
  check("401", e instanceof OpenAI.AuthenticationError && e.status === 401, { status: e.status, msg: e.message });
}

// 429 from a full server: -np 1 --max-queue 0 with one long stream running
const busy = new OpenAI({ baseURL: busyBase, apiKey: "none", maxRetries: 0, timeout: 60000 });
const ac = new AbortController();
const longStream = await busy.completions.create({ model: "x", prompt: "def f():", max_tokens: 30000, ignore_eos: true,
                                                   stream: true }, { signal: ac.signal });
const it = longStream[Symbol.asyncIterator]();
await it.next();   // it is running
try {
  await busy.completions.create({ model: "x", prompt: "x", max_tokens: 2 });
  check("429 raised", false);
} catch (e) {
  check("429", e instanceof OpenAI.RateLimitError && e.status === 429 && e.code === "queue_full", { status: e.status, msg: e.message });
}
// the client's automatic retries honour Retry-After: once the stream is aborted, a retrying request gets through
ac.abort();
try { await it.next(); } catch (e) { /* aborted */ }
const retrying = new OpenAI({ baseURL: busyBase, apiKey: "none", maxRetries: 5, timeout: 60000 });
const after = await retrying.completions.create({ model: "x", prompt: "x", max_tokens: 2 });
check("retry after 429", after.choices.length === 1, after);

console.log(`openai client: ${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
