// serve-load.mjs: the load generator of issue 14's acceptance, dependency-free
// (Node 20: node:http and node:net only). It drives one OpenAI-style server
// (brisk serve or llama-server) through one scenario and prints one JSON
// object with the measurements and the functional outcome ("ok": the
// scenario's functional checks held; speed numbers are reported, never
// asserted). bench/serve-load.sh starts the servers (fresh per run,
// alternating brisk and llama-server) and tabulates; tests/cli_serve_scenarios.sh
// runs the scenarios at small sizes for their functional outcome only.
//
//   node bench/serve-load.mjs SCENARIO --url http://127.0.0.1:PORT [--pid PID] [options]
//   node bench/serve-load.mjs report FILE.jsonl      (markdown table of results)
//
// Prompts are token-id arrays (POST /v1/completions with "prompt": [ids]) drawn
// from a seeded generator, so both servers see exactly the same tokens and the
// prompt lengths are exact. Generated tokens are counted from
// usage.completion_tokens, TTFT at the first event with text, inter-token
// latency between consecutive events with text of one choice.
import http from "node:http";
import net from "node:net";
import fs from "node:fs";

// ---- options -------------------------------------------------------------------------------------

const SCENARIOS = ["single", "throughput", "fairness", "prefix", "prefix-cold", "sysprompt", "determinism",
  "overload", "disconnect", "slowloris", "keepalive"];
const DEFAULTS = {
  url: "http://127.0.0.1:8080", pid: 0, seed: 1, "token-lo": 1000, "token-hi": 30000,
  clients: 8, requests: 2, "prompt-tokens": 255, "gen-tokens": 64,
  // fairness
  streams: 7, "big-prompt": 4096, "big-after": 24,
  // prefix / sysprompt
  "prefix-tokens": 1024, "a-tail": 32, "b-tail": 64, "sys-tokens": 1500, "sys-first": 0, conversations: 8, "user-tokens": 32,
  // determinism
  prompts: 16, "others": 7, "n-fork": 4, reference: "",
  // overload
  burst: 64, "expect-ok": 24, "expect-429": 40,
  // disconnect
  kill: 4, "free-within": 1.5,
  // slowloris / keepalive
  slow: 500, "slow-seconds": 30, "slow-interval": 5, "keepalive-requests": 10000,
  out: "", label: "",
};

function parseArgs(argv) {
  const o = {...DEFAULTS, scenario: argv[0]};
  for (let k = 1; k < argv.length; k++) {
    const a = argv[k];
    if (!a.startsWith("--")) throw new Error(`unexpected argument '${a}'`);
    const name = a.slice(2);
    if (!(name in DEFAULTS)) throw new Error(`unknown option --${name}`);
    const v = argv[++k];
    if (v === undefined) throw new Error(`--${name} needs a value`);
    o[name] = typeof DEFAULTS[name] === "number" ? Number(v) : v;
    if (typeof DEFAULTS[name] === "number" && !Number.isFinite(o[name])) throw new Error(`--${name}: '${v}' is not a number`);
  }
  return o;
}

// ---- small helpers ---------------------------------------------------------------------------------

const now = () => Number(process.hrtime.bigint()) / 1e9;
const sleep = ms => new Promise(r => setTimeout(r, ms));

// mulberry32: a seeded generator, so prompts repeat across runs and servers
function rng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6D2B79F5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

function tokens(o, seed, n) {
  const r = rng(seed * 7919 + o.seed);
  const out = new Array(n);
  for (let k = 0; k < n; k++) out[k] = o["token-lo"] + Math.floor(r() * (o["token-hi"] - o["token-lo"]));
  return out;
}

function pct(xs, p) {
  if (!xs.length) return null;
  const s = [...xs].sort((a, b) => a - b);
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil(p / 100 * s.length) - 1));
  return s[i];
}
const median = xs => pct(xs, 50);
const round = (x, d = 4) => x === null || x === undefined ? null : Math.round(x * 10 ** d) / 10 ** d;

function procStats(pid) {
  if (!pid) return null;
  try {
    const fds = fs.readdirSync(`/proc/${pid}/fd`).length;
    const m = /VmRSS:\s+(\d+) kB/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"));
    return {fds, rss_kib: m ? Number(m[1]) : null};
  } catch { return null; }
}

// ---- HTTP -----------------------------------------------------------------------------------------

let baseUrl;

function get(path) {
  return new Promise(resolve => {
    const req = http.request(new URL(path, baseUrl), {method: "GET", agent: false}, res => {
      let buf = "";
      res.setEncoding("utf8");
      res.on("data", d => buf += d);
      res.on("end", () => resolve({status: res.statusCode, body: buf}));
      res.on("error", e => resolve({status: 0, error: e.code || e.message}));
    });
    req.on("error", e => resolve({status: 0, error: e.code || e.message}));
    req.end();
  });
}

// One completion request. body.stream decides the shape of the reply. With
// opts.killAfter = k the client goes away (socket destroyed) after k events
// with text; opts.onText(r) is called on each of them, opts.onRequest(r) once
// at the start (r.kill() ends the request from the client's side). Resolves to:
// status, error (a socket error such as ECONNRESET), done ([DONE] seen or a
// non-streamed body), texts per choice, logprobs per choice (the token
// logprobs as the server printed them), usage, t0, ttft, itl (gaps), killed.
function complete(body, opts = {}) {
  return new Promise(resolve => {
    const payload = JSON.stringify(body);
    const r = {status: 0, error: null, done: false, texts: [], logprobs: [], usage: null, t0: now(), ttft: null,
      itl: [], nEvents: 0, killed: false, finish: [], json: null, headers: null};
    const last = [];
    let settled = false;
    const finish = () => { if (!settled) { settled = true; resolve(r); } };
    const req = http.request(new URL("/v1/completions", baseUrl), {
      // a new connection per request by default: llama-server closes a kept-alive
      // connection after a stream, and reusing it would read as a reset
      method: "POST", agent: false,
      headers: {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(payload)},
    }, res => {
      r.status = res.statusCode;
      r.headers = res.headers;
      res.setEncoding("utf8");
      let buf = "";
      res.on("data", d => {
        buf += d;
        if (r.status !== 200 || !body.stream) return;
        let k;
        while ((k = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, k);
          buf = buf.slice(k + 2);
          for (const line of block.split("\n")) {
            if (!line.startsWith("data: ")) continue;   // ": ping" comments and others
            const data = line.slice(6);
            if (data === "[DONE]") { r.done = true; continue; }
            let j;
            try { j = JSON.parse(data); } catch { r.error = "bad SSE JSON: " + data.slice(0, 200); continue; }
            if (j.error) { r.error = "stream error: " + JSON.stringify(j.error).slice(0, 200); continue; }
            if (j.usage) r.usage = j.usage;
            if (j.timings) r.timings = j.timings;   // llama-server's own (cache_n: prompt tokens reused)
            for (const c of j.choices || []) {
              const i = c.index || 0;
              const t = c.text ?? (c.delta && c.delta.content) ?? "";
              r.texts[i] = (r.texts[i] || "") + t;
              if (c.logprobs) collectLogprobs(r, i, c.logprobs);
              if (c.finish_reason) r.finish[i] = c.finish_reason;
              if (t.length) {
                const tn = now();
                if (r.ttft === null) r.ttft = tn - r.t0;
                if (last[i] !== undefined) r.itl.push(tn - last[i]);
                last[i] = tn;
                r.nEvents++;
                if (opts.onText) opts.onText(r);
                if (opts.killAfter && r.nEvents >= opts.killAfter) { r.kill(); return; }
              }
            }
          }
        }
      });
      res.on("end", () => {
        if (r.status !== 200 || !body.stream) {
          try { r.json = JSON.parse(buf); } catch { r.error = r.error || "not JSON: " + buf.slice(0, 200); }
          if (r.status === 200 && r.json) {
            r.done = true;
            r.ttft = now() - r.t0;
            r.usage = r.json.usage || null;
            for (const c of r.json.choices || []) {
              r.texts[c.index || 0] = c.text ?? (c.message && c.message.content) ?? "";
              if (c.logprobs) collectLogprobs(r, c.index || 0, c.logprobs);
              r.finish[c.index || 0] = c.finish_reason;
            }
          }
        }
        r.t1 = now();
        finish();
      });
      res.on("error", e => { if (!r.killed) r.error = e.code || e.message; r.t1 = now(); finish(); });
      res.on("aborted", () => { if (!r.killed) r.error = r.error || "aborted"; });
    });
    req.on("error", e => { if (!r.killed) r.error = e.code || e.message; r.t1 = now(); finish(); });
    r.kill = () => { if (!r.killed && !settled) { r.killed = true; r.killedAt = now(); req.destroy(); finish(); } };
    if (opts.onRequest) opts.onRequest(r);
    req.end(payload);
  });
}

// logprobs in the legacy completions shape ({tokens, token_logprobs}) or the
// chat shape ({content: [{token, logprob}]}); kept as printed (strings of the
// JSON numbers would be better, but JSON.parse of the same digits gives the
// same double, so equality of doubles is equality of what was printed)
function collectLogprobs(r, i, lp) {
  const dst = r.logprobs[i] || (r.logprobs[i] = []);
  if (Array.isArray(lp.token_logprobs)) for (const x of lp.token_logprobs) dst.push(x);
  else if (Array.isArray(lp.content)) for (const x of lp.content) dst.push(x.logprob);
}

function genBody(o, prompt, extra = {}) {
  return {prompt, max_tokens: o["gen-tokens"], temperature: 0, ignore_eos: true, stream: true,
    stream_options: {include_usage: true}, cache_prompt: true, ...extra};
}

const genTokens = r => r.usage && Number.isFinite(r.usage.completion_tokens) ? r.usage.completion_tokens : r.nEvents;
const cachedTokens = r => {
  const u = r.usage || (r.json && r.json.usage);
  if (u && u.prompt_tokens_details && Number.isFinite(u.prompt_tokens_details.cached_tokens)) return u.prompt_tokens_details.cached_tokens;
  const t = r.timings || (r.json && r.json.timings);
  return t && Number.isFinite(t.cache_n) ? t.cache_n : null;
};

function latencySummary(rs, wall) {
  const ok = rs.filter(r => r.status === 200 && r.done && !r.error);
  const gen = ok.reduce((s, r) => s + genTokens(r), 0);
  const ttft = ok.map(r => r.ttft).filter(x => x !== null);
  const itl = ok.flatMap(r => r.itl);
  return {requests: rs.length, completed: ok.length, generated_tokens: gen, wall_s: round(wall, 3),
    agg_tok_s: round(gen / wall, 2), ttft_p50_s: round(median(ttft)), ttft_p99_s: round(pct(ttft, 99)),
    itl_p50_s: round(median(itl)), itl_p99_s: round(pct(itl, 99)),
    errors: rs.filter(r => r.error || r.status !== 200).map(r => `${r.status} ${r.error || ""}`.trim()).slice(0, 5)};
}

// ---- scenarios ----------------------------------------------------------------------------------------

const S = {};

// one stream alone: decode tok/s over HTTP (compare with `brisk run`)
S.single = async o => {
  const r = await complete(genBody(o, tokens(o, 1, o["prompt-tokens"])));
  const decode = r.itl.length ? r.itl.length / r.itl.reduce((a, b) => a + b, 0) : null;
  return {ok: r.status === 200 && r.done && !r.error, ...latencySummary([r], (r.t1 || now()) - r.t0),
    decode_tok_s: round(decode, 2), text: r.texts[0]};
};

// 8 clients x 2 requests, distinct prompts, greedy, ignore_eos
S.throughput = async o => {
  const t0 = now();
  const all = [];
  await Promise.all(Array.from({length: o.clients}, async (_, c) => {
    for (let q = 0; q < o.requests; q++) all.push(await complete(genBody(o, tokens(o, 100 + c * o.requests + q, o["prompt-tokens"]))));
  }));
  const s = latencySummary(all, now() - t0);
  return {ok: s.completed === o.clients * o.requests && all.every(r => genTokens(r) === o["gen-tokens"]), ...s};
};

// streams decode undisturbed, then a long prompt arrives: their inter-token
// p99 while it is being prefilled vs their undisturbed median
S.fairness = async o => {
  const arrival = {t: Infinity}, bigFirst = {t: Infinity};
  const started = new Set(), handles = [];
  let fire;
  const fired = new Promise(r => fire = r);
  const times = [];
  // the streams decode until the long prompt's request is done, then go away
  const streams = Array.from({length: o.streams}, (_, k) => complete(
    genBody(o, tokens(o, 300 + k, 64), {max_tokens: 100000}),
    {onRequest: r => handles.push(r), onText: r => {
      times.push({k, t: now()});
      if (r.nEvents >= o["big-after"]) started.add(k);
      if (started.size === o.streams) fire();
    }}));
  await Promise.race([fired, Promise.all(streams)]);
  arrival.t = now();
  const rb = await complete(genBody(o, tokens(o, 399, o["big-prompt"]), {max_tokens: 8}),
    {onText: () => { if (bigFirst.t === Infinity) bigFirst.t = now(); }});
  await sleep(500);
  const alive = handles.filter(h => !h.done && !h.error).length;
  for (const h of handles) h.kill();
  await Promise.all(streams);
  // gaps per stream: before the arrival (undisturbed), from it to the long
  // prompt's first token (its prefill), and after
  const before = [], during = [];
  const perStream = {};
  for (const e of times) (perStream[e.k] = perStream[e.k] || []).push(e.t);
  for (const ts of Object.values(perStream))
    for (let k = 1; k < ts.length; k++) {
      const g = ts[k] - ts[k - 1];
      if (ts[k] <= arrival.t) { if (k > 2) before.push(g); }
      else if (ts[k - 1] <= bigFirst.t) during.push(g);
    }
  const undisturbed = median(before);
  const p99 = pct(during, 99);
  return {ok: rb.status === 200 && rb.done,
    undisturbed_itl_p50_s: round(undisturbed), disturbed_itl_p99_s: round(p99), ratio: round(p99 / undisturbed, 3),
    max_gap_s: round(Math.max(...during, 0)), big_ttft_s: round(rb.ttft), big_prompt_tokens: o["big-prompt"],
    streams_alive_through: alive};
};

// request B shares a prefix with A; B's output and logprobs are written for a
// cold-server comparison (prefix-cold)
function prefixPrompts(o) {
  const pre = tokens(o, 500, o["prefix-tokens"]);
  return {a: pre.concat(tokens(o, 501, o["a-tail"])), b: pre.concat(tokens(o, 502, o["b-tail"]))};
}
const lpBody = (o, prompt) => ({prompt, max_tokens: 16, temperature: 0, ignore_eos: true, stream: true,
  stream_options: {include_usage: true}, logprobs: 1, cache_prompt: true});

S.prefix = async o => {
  const {a, b} = prefixPrompts(o);
  const ra = await complete(lpBody(o, a));
  const rb = await complete(lpBody(o, b));
  // B reuses all of the shared prefix but what a partial KV block holds
  // (issue 14: >= 992 of 1,024)
  const res = {ok: ra.status === 200 && rb.status === 200 && ra.done && rb.done && cachedTokens(rb) >= o["prefix-tokens"] - 32,
    a_ttft_s: round(ra.ttft), b_ttft_s: round(rb.ttft), ttft_ratio: round(rb.ttft / ra.ttft, 4),
    b_cached_tokens: cachedTokens(rb), b_prompt_tokens: rb.usage && rb.usage.prompt_tokens,
    b_output: {text: rb.texts[0], logprobs: rb.logprobs[0] || []}};
  return compareWithReference(o, res, "b_output");
};
S["prefix-cold"] = async o => {
  const {b} = prefixPrompts(o);
  const rb = await complete(lpBody(o, b));
  const res = {ok: rb.status === 200 && rb.done, b_ttft_s: round(rb.ttft), b_cached_tokens: cachedTokens(rb),
    b_output: {text: rb.texts[0], logprobs: rb.logprobs[0] || []}};
  return compareWithReference(o, res, "b_output");
};

function compareWithReference(o, res, key) {
  if (!o.reference) return res;
  const ref = JSON.parse(fs.readFileSync(o.reference, "utf8"));
  const same = JSON.stringify(ref[key]) === JSON.stringify(res[key]);
  res.equal_to_reference = same;
  res.ok = res.ok && same;
  return res;
}

// conversations sharing a system prompt, all at once: prompt tokens computed
// (prompt - cached) over all of them, vs the shared part computed once
// (with --sys-first 1 the first conversation runs alone before the others)
S.sysprompt = async o => {
  const sys = tokens(o, 600, o["sys-tokens"]);
  const one = k => complete(genBody(o, sys.concat(tokens(o, 601 + k, o["user-tokens"])), {max_tokens: 8}));
  const rs = o["sys-first"] ? [await one(0)] : [];
  rs.push(...await Promise.all(Array.from({length: o.conversations - rs.length}, (_, k) => one(k + rs.length))));
  const cached = rs.map(cachedTokens);
  const prompt = rs.map(r => r.usage && r.usage.prompt_tokens);
  const computed = prompt.reduce((s, p, k) => s + p - (cached[k] || 0), 0);
  // the KV is shared in whole blocks: each conversation may recompute the
  // system prompt's last partial block (the 32 tokens the prefix scenario allows too)
  const once = o["sys-tokens"] + o.conversations * (o["user-tokens"] + 32);
  return {ok: rs.every(r => r.status === 200 && r.done) && cached.every(c => c !== null) && computed <= once,
    computed_prompt_tokens: computed, if_computed_once: once, cached_tokens: cached};
};

// greedy outputs and logprobs: alone (cold), alone again (cache hit), among
// other streams, as one choice of n
S.determinism = async o => {
  const ps = Array.from({length: o.prompts}, (_, k) => tokens(o, 700 + k, 24 + (k * 13) % 40));
  const body = (p, extra) => ({prompt: p, max_tokens: o["gen-tokens"], temperature: 0, ignore_eos: true, stream: true,
    logprobs: 1, stream_options: {include_usage: true}, ...extra});
  const out = r => r.texts.map((t, i) => ({text: t, logprobs: r.logprobs[i] || []}));
  const phases = {};
  if (o.reference) phases.alone = JSON.parse(fs.readFileSync(o.reference, "utf8")).phases.alone;
  else {
    phases.alone = [];
    for (const p of ps) phases.alone.push(out(await complete(body(p)))[0]);
  }
  phases.hit = [];
  for (const p of ps) phases.hit.push(out(await complete(body(p)))[0]);
  phases.concurrent = [];
  for (let k = 0; k < ps.length; k++) {
    const others = Array.from({length: o.others}, (_, m) =>
      complete(body(tokens(o, 800 + k * o.others + m, 16 + m * 9), {max_tokens: o["gen-tokens"] + 8})));
    await sleep(5 * (k % 4));   // the prompt lands at a different point of the others' progress
    phases.concurrent.push(out(await complete(body(ps[k])))[0]);
    await Promise.all(others);
  }
  phases.n = [];
  const mismatch = [];
  for (let k = 0; k < ps.length; k++) {
    const r = out(await complete(body(ps[k], {n: o["n-fork"]})));
    phases.n.push(r[0]);
    for (let c = 0; c < o["n-fork"]; c++) if (JSON.stringify(r[c]) !== JSON.stringify(phases.alone[k])) mismatch.push(`n: prompt ${k} choice ${c}`);
  }
  for (const ph of ["hit", "concurrent"])
    for (let k = 0; k < ps.length; k++)
      if (JSON.stringify(phases[ph][k]) !== JSON.stringify(phases.alone[k])) mismatch.push(`${ph}: prompt ${k}`);
  const empty = phases.alone.filter(x => !x || !x.text || x.logprobs.length === 0).length;
  return {ok: mismatch.length === 0 && empty === 0, prompts: ps.length, mismatches: mismatch, empty_outputs: empty,
    phases: o.out ? phases : undefined};
};

// a burst of streams on --max-running R --max-queue Q: R + Q complete, the
// rest get 429 (as plain JSON with Retry-After), no connection reset
S.overload = async o => {
  const rs = await Promise.all(Array.from({length: o.burst}, (_, k) =>
    complete(genBody(o, tokens(o, 900 + k, 16), {max_tokens: o["gen-tokens"]}))));
  const done = rs.filter(r => r.status === 200 && r.done && !r.error).length;
  const rejected = rs.filter(r => r.status === 429);
  const proper429 = rejected.filter(r => r.json && r.json.error && r.json.error.code && r.headers["retry-after"]).length;
  const resets = rs.filter(r => r.error && r.status !== 429).map(r => r.error);
  const counter = await metric("brisk:requests_rejected_total");
  const res = {ok: done === o["expect-ok"] && rejected.length === o["expect-429"] && proper429 === rejected.length && resets.length === 0,
    completed: done, rejected_429: rejected.length, with_retry_after: proper429, resets: resets.slice(0, 5),
    other_status: rs.filter(r => r.status !== 200 && r.status !== 429).map(r => r.status).slice(0, 5),
    rejected_counter: counter};
  if (counter !== null) res.ok = res.ok && counter === o["expect-429"];
  return res;
};

// /metrics, when the server has it: the sum of a family's samples, or null
async function metric(name) {
  const r = await get("/metrics");
  if (r.status !== 200) return null;
  let sum = null;
  for (const line of r.body.split("\n")) {
    if (line.startsWith("#")) continue;
    const m = /^([^\s{]+)(\{[^}]*\})?\s+(\S+)/.exec(line);
    if (m && m[1] === name) sum = (sum || 0) + Number(m[3]);
  }
  return sum;
}

// 8 streams undisturbed, then again with some clients killed at random
// points: each kill frees its slot (a probe, on a server with --max-queue 0,
// is admitted) within free-within seconds, and the survivors' outputs are
// byte-identical to the undisturbed run
S.disconnect = async o => {
  const n = o.clients;
  const ps = Array.from({length: n}, (_, k) => tokens(o, 1000 + k, 32 + k * 5));
  const body = p => genBody(o, p, {logprobs: 1});
  // undisturbed run; once every stream has text, a probe must get 429 (all
  // slots held), which shows that a later admitted probe means a freed slot
  let control = null, withText = 0;
  const ref = await Promise.all(ps.map(p => complete(body(p), {onText: rr => {
    if (rr.nEvents === 1 && ++withText === n) control = complete(genBody(o, tokens(o, 1099, 8), {max_tokens: 4}));
  }})));
  const controlStatus = control ? (await control).status : 0;
  const r = rng(o.seed + 17);
  const victims = new Set();
  while (victims.size < Math.min(o.kill, n)) victims.add(Math.floor(r() * n));
  const killAt = {};
  // killed in the first half, so the survivors still hold their slots when a probe is admitted
  for (const v of victims) killAt[v] = 2 + Math.floor(r() * (o["gen-tokens"] / 2 - 2));
  const probes = [], freeTimes = [], runsR = [];
  let survivorsDoneAtFree = 0;
  const survivorsDone = () => runsR.filter((x, k) => !victims.has(k) && x.t1).length;
  let probing = Promise.resolve();
  const probeAfterKill = () => {
    // queued one after another, so each probe measures the slot of one kill
    const t = now();
    probing = probing.then(async () => {
      for (;;) {
        let admitted, probe;
        const started = new Promise(res => admitted = res);
        probe = complete(genBody(o, tokens(o, 1100 + probes.length, 8), {max_tokens: 100000}), {
          onRequest: rr => probes.push(rr), onText: () => admitted(true)});
        probe.then(x => admitted(x.status === 200));
        if (await started) { freeTimes.push(now() - t); survivorsDoneAtFree = Math.max(survivorsDoneAtFree, survivorsDone()); return; }
        if (now() - t > 30) { freeTimes.push(Infinity); return; }
        await sleep(25);
      }
    });
  };
  const runs = ps.map((p, k) => complete(body(p), {killAfter: killAt[k], onRequest: rr => runsR[k] = rr, onText: rr => {
    if (rr.nEvents === killAt[k]) setImmediate(probeAfterKill);
  }}));
  const rs = await Promise.all(runs);
  await probing;
  for (const q of probes) q.kill();
  const diff = [];
  for (let k = 0; k < n; k++) {
    if (victims.has(k)) continue;
    if (rs[k].texts[0] !== ref[k].texts[0] || JSON.stringify(rs[k].logprobs[0]) !== JSON.stringify(ref[k].logprobs[0])) diff.push(k);
  }
  const maxFree = Math.max(...freeTimes);
  return {ok: diff.length === 0 && freeTimes.length === victims.size && Number.isFinite(maxFree) &&
      controlStatus === 429 && survivorsDoneAtFree === 0 &&
      ref.every(x => x.status === 200 && x.done) && rs.every((x, k) => victims.has(k) ? x.killed : x.done),
    killed: [...victims].map(v => ({client: v, after_tokens: killAt[v]})), freed_s: freeTimes.map(x => round(x, 3)),
    control_probe_status: controlStatus, survivors_done_at_a_free: survivorsDoneAtFree, max_free_s: round(maxFree, 3), freed_within_limit: maxFree <= o["free-within"], survivors_differ: diff};
};

// slow clients that trickle header bytes, against the latency of a normal request
S.slowloris = async o => {
  const u = new URL(baseUrl);
  const probeReq = async () => { const t = now(); const r = await get("/health"); return {s: now() - t, ok: r.status === 200}; };
  const base = [];
  for (let k = 0; k < 20; k++) base.push((await probeReq()).s);
  const hdr = `GET /health HTTP/1.1\r\nHost: ${u.host}\r\nX-Slow: ${"a".repeat(4096)}\r\n\r\n`;
  const socks = [];
  let closed = 0;
  for (let k = 0; k < o.slow; k++) {
    const s = net.connect(Number(u.port), u.hostname);
    s.on("error", () => {});
    s.on("close", () => closed++);
    s.pos = 0;
    socks.push(s);
  }
  const timer = setInterval(() => {
    for (const s of socks) if (!s.destroyed && s.pos < hdr.length) s.write(hdr[s.pos++]);
  }, o["slow-interval"] * 1000);
  for (const s of socks) s.write(hdr[s.pos++]);
  const during = [];
  let failures = 0;
  const t0 = now();
  while (now() - t0 < o["slow-seconds"]) {
    const p = await probeReq();
    during.push(p.s);
    if (!p.ok) failures++;
    await sleep(200);
  }
  clearInterval(timer);
  const openAtEnd = socks.filter(s => !s.destroyed && s.readyState === "open").length;
  for (const s of socks) s.destroy();
  const delay = pct(during, 99) - median(base);
  return {ok: failures === 0, slow_connections: o.slow, still_open_at_end: openAtEnd, closed_by_server: closed,
    base_p50_s: round(median(base), 5), during_p50_s: round(median(during), 5), during_p99_s: round(pct(during, 99), 5),
    during_max_s: round(Math.max(...during), 5), delay_p99_s: round(delay, 5), within_100ms: delay <= 0.1, probe_failures: failures};
};

// many requests on keep-alive connections: fds and RSS after 1,000 vs at the end
S.keepalive = async o => {
  const ka = new http.Agent({keepAlive: true, maxSockets: 4});
  const one = () => new Promise(resolve => {
    const payload = JSON.stringify({content: "hello world", add_special: false});
    const req = http.request(new URL("/tokenize", baseUrl), {method: "POST", agent: ka,
      headers: {"Content-Type": "application/json", "Content-Length": Buffer.byteLength(payload)}}, res => {
      res.resume();
      res.on("end", () => resolve(res.statusCode));
    });
    req.on("error", () => resolve(0));
    req.end(payload);
  });
  let bad = 0, after1k = null;
  const total = o["keepalive-requests"];
  for (let k = 0; k < total; k += 4) {
    const st = await Promise.all([one(), one(), one(), one()]);
    bad += st.filter(s => s !== 200).length;
    if (k + 4 >= 1000 && after1k === null) { await sleep(100); after1k = procStats(o.pid); }
  }
  await sleep(200);
  const end = procStats(o.pid);
  ka.destroy();
  const res = {ok: bad === 0, requests: total, failed: bad, after_1000: after1k, at_end: end};
  if (after1k && end) {
    res.fd_delta = end.fds - after1k.fds;
    res.rss_delta_kib = end.rss_kib - after1k.rss_kib;
    res.stable = res.fd_delta <= 0 && res.rss_delta_kib <= 1024;
  }
  return res;
};

// ---- report ----------------------------------------------------------------------------------------

function report(file) {
  const rows = fs.readFileSync(file, "utf8").split("\n").filter(Boolean).map(l => JSON.parse(l));
  const by = {};
  for (const r of rows) (by[r.scenario] = by[r.scenario] || []).push(r);
  const keys = {
    throughput: ["agg_tok_s", "ttft_p50_s", "ttft_p99_s", "itl_p50_s", "itl_p99_s"],
    single: ["decode_tok_s", "ttft_p50_s"],
    prefix: ["b_cached_tokens", "a_ttft_s", "b_ttft_s", "ttft_ratio"],
    fairness: ["undisturbed_itl_p50_s", "disturbed_itl_p99_s", "ratio"],
  };
  for (const [sc, rs] of Object.entries(by)) {
    const ks = keys[sc] || Object.keys(rs[0]).filter(k => typeof rs[0][k] === "number" && k !== "time" && k !== "run");
    console.log(`\n### ${sc}\n\n| server | run | ok | ${ks.join(" | ")} |\n|---|---|---|${ks.map(() => "---").join("|")}|`);
    for (const r of rs) console.log(`| ${r.label} | ${r.run ?? ""} | ${r.ok} | ${ks.map(k => r[k] ?? "").join(" | ")} |`);
    // medians per server, and the first server's over each other's
    const labels = [...new Set(rs.map(r => r.label))];
    if (labels.length >= 2) {
      console.log("");
      for (const k of ks) {
        const m = labels.map(l => median(rs.filter(r => r.label === l && typeof r[k] === "number").map(r => r[k])));
        if (m[0] === null) continue;
        const others = labels.slice(1).map((l, i) => m[i + 1] ? `${l} ${round(m[i + 1])} (ratio ${round(m[0] / m[i + 1], 3)})` : "").filter(Boolean);
        if (others.length) console.log(`- median ${k}: ${labels[0]} ${round(m[0])}, ${others.join(", ")}`);
        // runs of the same repetition ran back to back: their ratios, and the median of those
        for (const l of labels.slice(1)) {
          const pr = rs.filter(r => r.label === labels[0] && typeof r[k] === "number").map(a => {
            const b = rs.find(r => r.label === l && r.run === a.run && typeof r[k] === "number" && r[k]);
            return b ? a[k] / b[k] : null;
          }).filter(x => x !== null);
          if (pr.length > 1) console.log(`  - ${labels[0]}/${l} per run: ${pr.map(x => round(x, 3)).join(", ")}; median ${round(median(pr), 3)}`);
        }
      }
    }
  }
}

// ---- main --------------------------------------------------------------------------------------------

async function main() {
  const argv = process.argv.slice(2);
  if (argv[0] === "report") return report(argv[1]);
  if (!argv.length || !SCENARIOS.includes(argv[0])) {
    console.error(`usage: node serve-load.mjs SCENARIO --url URL [--pid PID] [--out FILE] [options]\n       node serve-load.mjs report FILE.jsonl\nscenarios: ${SCENARIOS.join(" ")}\noptions (defaults): ${JSON.stringify(DEFAULTS)}`);
    process.exit(2);
  }
  const o = parseArgs(argv);
  baseUrl = o.url;
  const t = now();
  const res = await S[o.scenario](o);
  const out = {scenario: o.scenario, label: o.label, time: round(now() - t, 2), ...res};
  if (o.out) fs.writeFileSync(o.out, JSON.stringify(out) + "\n");
  const line = JSON.stringify(out, (k, v) => k === "phases" || k === "b_output" || k === "text" ? undefined : v);
  console.log(line);
  process.exit(res.ok ? 0 : 1);
}
main().catch(e => { console.error("serve-load: " + (e.stack || e)); process.exit(2); });
