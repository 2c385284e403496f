// The pinned openai npm client against brisk serve's /v1/embeddings (tests/cli_serve_embed.sh).
// usage: node embed_client.mjs OPENAI_MODULE_DIR BASE_URL API_KEY
import { createRequire } from "node:module";
const [dir, base, key] = process.argv.slice(2);
const require = createRequire(dir + "/");
const OpenAI = require("openai").default ?? require("openai");

let pass = 0, fail = 0;
function check(name, cond, info) {
  if (cond) pass++;
  else { fail++; console.log("FAIL " + name + (info !== undefined ? ": " + JSON.stringify(info).slice(0, 500) : "")); }
}
const client = new OpenAI({ baseURL: base, apiKey: key, maxRetries: 0, timeout: 60000 });
const texts = ["def add(a, b):", "import os\nprint(os.getcwd())", "class Stack:\n    def push(self, x):"];

// the client asks for base64 by default and decodes it to floats itself
const b64 = await client.embeddings.create({ model: "m", input: texts });
const flt = await client.embeddings.create({ model: "m", input: texts, encoding_format: "float" });
check("shape", b64.object === "list" && b64.data.length === 3 && b64.data.every((d, i) => d.index === i && d.object === "embedding" &&
      d.embedding.length === 192), b64.data.map(d => d.embedding.length));
check("usage", flt.usage.prompt_tokens > 3 && flt.usage.total_tokens === flt.usage.prompt_tokens, flt.usage);
// float32 exactly: the float form is printed from the same float32 values
for (let i = 0; i < 3; i++) {
  const a = b64.data[i].embedding, b = flt.data[i].embedding;
  check(`base64 == float [${i}]`, a.every((x, k) => x === Math.fround(b[k])), [a.slice(0, 3), b.slice(0, 3)]);
  const n = Math.sqrt(b.reduce((s, x) => s + x * x, 0));
  check(`unit norm [${i}]`, Math.abs(n - 1) < 1e-5, n);
}
// raw base64 (the client passes a string through when asked for base64)
const raw = await client.embeddings.create({ model: "m", input: texts[1], encoding_format: "base64" });
const s = raw.data[0].embedding;
if (typeof s === "string") {
  const buf = Buffer.from(s, "base64");
  const f = new Float32Array(buf.buffer, buf.byteOffset, buf.length / 4);
  check("raw base64 decodes to the float vector", f.length === 192 && Array.from(f).every((x, k) => x === Math.fround(flt.data[1].embedding[k])));
} else {
  check("raw base64 (decoded by the client) equals float", s.every((x, k) => x === Math.fround(flt.data[1].embedding[k])));
}
// alone vs in a batch: identical vectors
for (let i = 0; i < 3; i++) {
  const one = await client.embeddings.create({ model: "m", input: texts[i], encoding_format: "float" });
  check(`alone == batch [${i}]`, one.data.length === 1 && one.data[0].embedding.every((x, k) => x === flt.data[i].embedding[k]));
}
// different texts, different vectors
check("distinct", flt.data[0].embedding.some((x, k) => x !== flt.data[1].embedding[k]));
// a bad field is the client's BadRequestError naming it
try {
  await client.embeddings.create({ model: "m", input: "x", dimensions: 8 });
  check("dimensions refused", false);
} catch (e) {
  check("dimensions refused", e instanceof OpenAI.BadRequestError && e.status === 400 && e.param === "dimensions", [e.status, e.param]);
}
try {
  await new OpenAI({ baseURL: base, apiKey: "nope", maxRetries: 0 }).embeddings.create({ model: "m", input: "x" });
  check("key required", false);
} catch (e) {
  check("key required", e instanceof OpenAI.AuthenticationError, e.status);
}
console.log(`embed_client: ${pass} passed, ${fail} failed`);
process.exit(fail ? 1 : 0);
