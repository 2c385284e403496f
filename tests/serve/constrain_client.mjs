// Structured output and tool calls of brisk serve through the real openai npm client, every output checked by
// ajv (tests/cli_serve_constrain.sh).
// usage: node constrain_client.mjs OPENAI_MODULES AJV_MODULES HERMES_URL LLAMA3_URL MISTRAL_URL
import { createRequire } from "node:module";
const [openaiDir, ajvDir, hermes, llama3, mistral] = process.argv.slice(2);
const OpenAI = createRequire(openaiDir + "/")("openai").default;
const ajvReq = createRequire(ajvDir + "/");
const Ajv2020 = ajvReq("ajv/dist/2020").default;
const addFormats = ajvReq("ajv-formats").default;
const ajv = new Ajv2020({ strict: false, allErrors: true, logger: false });
addFormats(ajv);

let pass = 0, fail = 0;
function check(name, cond, info) {
  if (cond) pass++;
  else { fail++; console.log("FAIL " + name + (info !== undefined ? ": " + JSON.stringify(info).slice(0, 700) : "")); }
}
// parses as JSON and validates: [ok, why]
function valid(schema, text) {
  let doc;
  try { doc = JSON.parse(text); } catch (e) { return [false, "not JSON: " + text.slice(0, 200)]; }
  const v = ajv.compile(schema);
  return v(doc) ? [true, ""] : [false, JSON.stringify(v.errors).slice(0, 300) + " on " + text.slice(0, 200)];
}
const client = (url) => new OpenAI({ baseURL: url, apiKey: "none", maxRetries: 0, timeout: 120000 });
const H = client(hermes), L = client(llama3), M = client(mistral);
const user = [{ role: "user", content: "Give me the data." }];
// BRISK_TEST_QUICK (the sanitizer runs): fewer schemas and seeds, every kind of check still made
const quick = !!process.env.BRISK_TEST_QUICK;

// ---- response_format: json_schema on every choice (n = 2, temperature 1), json_object -------------------------
const schemas = [
  { type: "object", properties: { name: { type: "string", minLength: 1, maxLength: 12 }, age: { type: "integer", minimum: 0, maximum: 130 } },
    required: ["name", "age"], additionalProperties: false },
  { type: "object", properties: { tags: { type: "array", items: { enum: ["red", "green", "blue"] }, minItems: 1, maxItems: 3 },
    ok: { type: "boolean" } }, required: ["tags", "ok"], additionalProperties: false },
  { type: "object", properties: { id: { type: "string", format: "uuid" }, when: { type: "string", format: "date" },
    score: { type: "number", minimum: -5, maximum: 5 } }, required: ["id", "when", "score"], additionalProperties: false },
  { $defs: { node: { type: "object", properties: { v: { type: "integer" }, next: { anyOf: [{ $ref: "#/$defs/node" }, { type: "null" }] } },
    required: ["v", "next"], additionalProperties: false } }, $ref: "#/$defs/node" },
];
let complete = 0, total = 0;
for (const [i, schema] of schemas.entries()) {
  if (quick && i % 2) continue;
  for (const seed of quick ? [1] : [1, 2]) {
    const r = await H.chat.completions.create({ model: "m", messages: user, max_tokens: 400, temperature: 1, seed, n: 2,
      response_format: { type: "json_schema", json_schema: { name: "s" + i, schema, strict: true } } });
    for (const c of r.choices) {
      total++;
      if (c.finish_reason !== "stop") continue;   // cut by max_tokens: nothing to validate
      complete++;
      const [ok, why] = valid(schema, c.message.content);
      check(`json_schema ${i} seed ${seed} choice ${c.index} validates`, ok, why);
    }
  }
}
check("json_schema: most outputs complete", complete * 2 >= total, { complete, total });
{
  const r = await H.chat.completions.create({ model: "m", messages: user, max_tokens: 300, temperature: 1, seed: 3, n: 3,
                                             response_format: { type: "json_object" } });
  for (const c of r.choices) {
    if (c.finish_reason !== "stop") continue;
    let doc = null;
    try { doc = JSON.parse(c.message.content); } catch (e) { /* checked below */ }
    check(`json_object choice ${c.index} is an object`, doc !== null && typeof doc === "object" && !Array.isArray(doc), c.message.content);
  }
}

// ---- streaming reassembles to the non-streamed result (temperature 0, fixed seed), n = 2 ----------------------
async function streamed(cl, req) {
  const s = await cl.chat.completions.create({ ...req, stream: true });
  const out = {};
  let order = [];
  for await (const ch of s) {
    for (const c of ch.choices) {
      const o = out[c.index] ??= { content: "", calls: [], finish: null, firstDeltas: {} };
      if (c.delta.content) o.content += c.delta.content;
      for (const tc of c.delta.tool_calls ?? []) {
        order.push([c.index, tc.index, !!tc.id, !!(tc.function && tc.function.name)]);
        if (!o.calls[tc.index]) {
          o.calls[tc.index] = { id: tc.id, type: tc.type, name: tc.function?.name, arguments: tc.function?.arguments ?? "" };
          o.firstDeltas[tc.index] = tc;
        } else {
          check("stream: later tool deltas carry arguments only", !tc.id && !tc.function.name && typeof tc.function.arguments === "string", tc);
          o.calls[tc.index].arguments += tc.function.arguments;
        }
      }
      if (c.finish_reason) o.finish = c.finish_reason;
    }
  }
  return out;
}
{
  const req = { model: "m", messages: user, max_tokens: 200, temperature: 0, seed: 7, n: 2,
                response_format: { type: "json_schema", json_schema: { name: "p", schema: schemas[0] } } };
  const r = await H.chat.completions.create(req);
  const s = await streamed(H, req);
  for (const c of r.choices)
    check(`json_schema stream choice ${c.index} equals non-stream`, s[c.index].content === c.message.content && s[c.index].finish === c.finish_reason,
          { stream: s[c.index], want: c.message.content });
}

// ---- tools -------------------------------------------------------------------------------------------------------
const tools = [
  { type: "function", function: { name: "get_weather", description: "Weather in a city",
    parameters: { type: "object", properties: { city: { type: "string", minLength: 1, maxLength: 16 }, unit: { enum: ["celsius", "fahrenheit"] } },
                  required: ["city", "unit"], additionalProperties: false } } },
  { type: "function", function: { name: "add", description: "Add two integers",
    parameters: { type: "object", properties: { a: { type: "integer" }, b: { type: "integer" } }, required: ["a", "b"], additionalProperties: false } } },
];
const params = Object.fromEntries(tools.map(t => [t.function.name, t.function.parameters]));
function checkCalls(name, msg, finish, only) {
  check(`${name}: finish_reason tool_calls`, finish === "tool_calls", { finish, msg });
  const calls = msg.tool_calls ?? [];
  check(`${name}: tool_calls present`, calls.length >= 1, msg);
  for (const tc of calls) {
    check(`${name}: call shape`, typeof tc.id === "string" && tc.id.length > 0 && tc.type === "function" &&
          typeof tc.function.name === "string" && typeof tc.function.arguments === "string", tc);
    check(`${name}: known tool`, tc.function.name in params && (!only || tc.function.name === only), tc);
    if (tc.function.name in params) {
      const [ok, why] = valid(params[tc.function.name], tc.function.arguments);
      check(`${name}: arguments validate against the tool's parameters`, ok, why);
    }
  }
}
for (const [fmt, cl] of [["hermes", H], ["llama3", L], ["mistral", M]]) {
  for (const [label, choice] of [["named", { type: "function", function: { name: "get_weather" } }], ["required", "required"]]) {
    const req = { model: "m", messages: [{ role: "user", content: "What is the weather in Paris?" }], tools, tool_choice: choice,
                  parallel_tool_calls: false, max_tokens: 200, temperature: 0, seed: 5, n: 2 };
    const r = await cl.chat.completions.create(req);
    for (const c of r.choices) {
      checkCalls(`${fmt} ${label} choice ${c.index}`, c.message, c.finish_reason, label === "named" ? "get_weather" : null);
      check(`${fmt} ${label}: one call (parallel_tool_calls false)`, (c.message.tool_calls ?? []).length === 1, c.message);
      if (fmt === "mistral") check(`${fmt}: 9-character ids`, (c.message.tool_calls ?? []).every(t => /^[A-Za-z0-9]{9}$/.test(t.id)), c.message);
    }
    const s = await streamed(cl, req);
    for (const c of r.choices) {
      const got = s[c.index];
      const want = (c.message.tool_calls ?? []).map(t => [t.function.name, t.function.arguments]);
      check(`${fmt} ${label} stream choice ${c.index}: deltas reassemble to the non-streamed calls`,
            JSON.stringify(got.calls.map(t => [t.name, t.arguments])) === JSON.stringify(want) && got.finish === c.finish_reason,
            { got, want });
      check(`${fmt} ${label} stream: the first delta of a call has index, id, type and name`,
            got.calls.every((t, k) => t.id && t.type === "function" && t.name && got.firstDeltas[k].index === k), got);
    }
    // temperature 1, several seeds: every call validates
    for (const seed of quick ? [11] : [11, 12]) {
      const r1 = await cl.chat.completions.create({ ...req, temperature: 1, seed });
      for (const c of r1.choices) if (c.finish_reason !== "length") checkCalls(`${fmt} ${label} t=1 seed ${seed}`, c.message, c.finish_reason, label === "named" ? "get_weather" : null);
    }
  }
  // auto: text or a call; whatever comes back has the right shape
  const ra = await cl.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Hello" }], tools, max_tokens: 40, temperature: 1, seed: 1 });
  const m = ra.choices[0].message;
  check(`${fmt} auto: content or tool calls`, (typeof m.content === "string" && !m.tool_calls) || (Array.isArray(m.tool_calls) && ra.choices[0].finish_reason === "tool_calls"), ra.choices[0]);
  // a conversation with a call and its result renders and runs
  const conv = [{ role: "user", content: "Add 2 and 3" },
                { role: "assistant", content: null, tool_calls: [{ id: "abcDEF123", type: "function", function: { name: "add", arguments: '{"a": 2, "b": 3}' } }] },
                { role: "tool", tool_call_id: "abcDEF123", content: "5" }];
  const rc = await cl.chat.completions.create({ model: "m", messages: conv, tools, tool_choice: "required", max_tokens: 200, temperature: 0, parallel_tool_calls: false });
  checkCalls(`${fmt} after a tool result`, rc.choices[0].message, rc.choices[0].finish_reason, null);
}

// ---- include_usage with tool-call deltas: usage null on every chunk, then one usage chunk ----------------------
{
  const s = await H.chat.completions.create({ model: "m", messages: [{ role: "user", content: "Weather?" }], tools, tool_choice: "required",
    parallel_tool_calls: false, max_tokens: 150, temperature: 0, stream: true, stream_options: { include_usage: true } });
  const chunks = [];
  for await (const ch of s) chunks.push(ch);
  const last = chunks[chunks.length - 1];
  check("tools stream include_usage: the last chunk has usage and no choices", last.choices.length === 0 && last.usage && last.usage.completion_tokens > 0, last);
  check("tools stream include_usage: usage null before", chunks.slice(0, -1).every(c => c.usage === null), chunks.slice(0, 2));
  check("tools stream: a tool_calls finish", chunks.some(c => c.choices.length && c.choices[0].finish_reason === "tool_calls"), chunks.slice(-3));
}

// ---- constrained outputs do not depend on what runs beside them ---------------------------------------------------
{
  const a = { model: "m", messages: user, max_tokens: 150, temperature: 0, response_format: { type: "json_schema", json_schema: { name: "a", schema: schemas[1] } } };
  const b = { model: "m", messages: [{ role: "user", content: "Weather?" }], tools, tool_choice: "required", parallel_tool_calls: false, max_tokens: 150, temperature: 0 };
  const aloneA = await H.chat.completions.create(a), aloneB = await H.chat.completions.create(b);
  const [togA, togB] = await Promise.all([H.chat.completions.create(a), H.chat.completions.create(b)]);
  check("alone vs together: json_schema output identical", togA.choices[0].message.content === aloneA.choices[0].message.content,
        { alone: aloneA.choices[0].message, together: togA.choices[0].message });
  const calls = (x) => JSON.stringify((x.choices[0].message.tool_calls ?? []).map(t => [t.function.name, t.function.arguments]));
  check("alone vs together: tool call identical", calls(togB) === calls(aloneB), { alone: calls(aloneB), together: calls(togB) });
  // speculative decoding (brisk's "spec" field: n-gram drafts) under the constraint: the same greedy output
  const specA = await H.chat.completions.create({ ...a, spec: "ngram" }), specB = await H.chat.completions.create({ ...b, spec: "ngram" });
  check("spec ngram vs off: json_schema output identical", specA.choices[0].message.content === aloneA.choices[0].message.content,
        { off: aloneA.choices[0].message, ngram: specA.choices[0].message });
  check("spec ngram vs off: tool call identical", calls(specB) === calls(aloneB), { off: calls(aloneB), ngram: calls(specB) });
  check("spec ngram: drafts were verified", specA.usage.brisk.drafted_tokens + specB.usage.brisk.drafted_tokens > 0, [specA.usage.brisk, specB.usage.brisk]);
}

// ---- errors, as the client's typed exceptions ------------------------------------------------------------------------
async function expect400(name, cl, req, pattern, param) {
  try {
    await cl.chat.completions.create({ model: "m", messages: user, max_tokens: 8, ...req });
    check(name + ": refused", false, "no error");
  } catch (e) {
    check(name + ": 400 BadRequestError", e instanceof OpenAI.BadRequestError && e.status === 400, { status: e.status, msg: e.message });
    check(name + ": message", pattern.test(e.error?.message ?? ""), e.error);
    if (param !== undefined) check(name + ": param", e.error?.param === param, e.error);
  }
}
await expect400("unsupported schema keyword", H, { response_format: { type: "json_schema", json_schema: { name: "x", schema: { type: "object", properties: { n: { type: "integer", multipleOf: 3 } } } } } },
                /'multipleOf' at '\/properties\/n'/, "response_format.json_schema.schema");
await expect400("unsupported keyword in a tool's parameters", H, { tools: [tools[0], { type: "function", function: { name: "bad", parameters: { type: "object", properties: { s: { type: "string", format: "ipv6" } } } } }], tool_choice: "required" },
                /tools\[1\]\.function\.parameters.*'format' at '\/properties\/s'/, "tools[1].function.parameters");
await expect400("tool_choice names an unknown tool", H, { tools, tool_choice: { type: "function", function: { name: "nope" } } }, /names no tool/, "tool_choice.function.name");
await expect400("tool_choice without tools", H, { tool_choice: "required" }, /only allowed when 'tools'/, "tool_choice");
await expect400("bad tool_choice string", H, { tools, tool_choice: "always" }, /must be "none", "auto", "required"/, "tool_choice");
await expect400("json_schema without schema", H, { response_format: { type: "json_schema", json_schema: { name: "x" } } }, /is required/, "response_format.json_schema.schema");
await expect400("unknown response_format type", H, { response_format: { type: "yaml" } }, /must be "text", "json_object" or "json_schema"/, "response_format.type");

console.log(`constrain_client: ${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
