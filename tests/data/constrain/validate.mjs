// validate.mjs NODE_MODULES PAIRS.jsonl: the independent validator of the end-to-end test. Each line of
// PAIRS is {"index", "schema", "output", "cut"}; the output must parse as JSON and validate under the
// schema with ajv (draft-04 through ajv-draft-04, 2019-09 and 2020-12 through their classes, draft-06/07
// through the default class; formats from ajv-formats). Prints one line per failure and a summary.
// Exit 1 when an output does not parse or validate, or was cut by the token limit (the issue's
// acceptance counts a cut output as a failure).
import { createRequire } from "module";
import { readFileSync } from "fs";
const [modules, pairsPath] = process.argv.slice(2);
const require = createRequire(modules + "/");
const Ajv = require("ajv").default;
const Ajv2019 = require("ajv/dist/2019").default;
const Ajv2020 = require("ajv/dist/2020").default;
const AjvDraft04 = require("ajv-draft-04").default;
const addFormats = require("ajv-formats").default;
const opts = { strict: false, allErrors: false, logger: false, validateSchema: false };
const make = (C) => { const a = new C(opts); addFormats(a); return a; };
let ok = 0, failed = 0, skipped = 0, cut = 0;
for (const line of readFileSync(pairsPath, "utf8").split("\n")) {
  if (!line.trim()) continue;
  const p = JSON.parse(line);
  const s = typeof p.schema.$schema === "string" ? p.schema.$schema : "";
  const ajv = make(s.includes("draft-04") ? AjvDraft04 : s.includes("2020-12") ? Ajv2020 : s.includes("2019-09") ? Ajv2019 : Ajv);
  let validate;
  try { validate = ajv.compile(p.schema); } catch (e) {
    // a schema without $schema that uses draft-04's `id`: compile it as draft-04
    try { validate = make(AjvDraft04).compile(p.schema); }
    catch (e2) { skipped++; console.log(`schema ${p.index}: ajv cannot compile it (${e.message.slice(0, 120)})`); continue; }
  }
  if (p.cut) { cut++; console.log(`schema ${p.index}: FAIL cut by the token limit: ${p.output.slice(-120)}`); continue; }
  let doc;
  try { doc = JSON.parse(p.output); } catch (e) { failed++; console.log(`schema ${p.index}: FAIL not JSON: ${p.output.slice(0, 200)}`); continue; }
  if (validate(doc)) ok++;
  else { failed++; console.log(`schema ${p.index}: FAIL ${JSON.stringify(validate.errors).slice(0, 300)} output ${p.output.slice(0, 200)}`); }
}
const total = ok + failed + cut;
console.log(`ajv: ${ok} valid, ${failed} invalid, ${cut} cut by the token limit (${total} outputs), ${skipped} schemas ajv cannot compile`);
process.exit(failed || cut ? 1 : 0);
