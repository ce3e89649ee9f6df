// openapi.js FILE: checks the OpenAPI document that `fleet describe
// --openapi` wrote to FILE.
// 1. @apidevtools/swagger-parser validates it (OpenAPI 3.1 schema and
//    references).
// 2. Every documented path is called once against the document's server:
//    POST with the request's example as the body and Content-Type
//    application/json. The answer's status must be one the path
//    documents, and its body must validate (ajv, JSON Schema 2020-12)
//    against the schema documented for that status.
// Prints "valid", then one line per path ("ok POST /Arith/Add 200"), and
// exits 0 when all pass, 1 otherwise.
'use strict';
const fs = require('fs');
const SwaggerParser = require('@apidevtools/swagger-parser');
const Ajv2020 = require('ajv/dist/2020');

const file = process.argv[2];

function fail(why) {
  console.log('FAIL ' + why);
  process.exit(1);
}

(async () => {
  const raw = JSON.parse(fs.readFileSync(file, 'utf8'));
  await SwaggerParser.validate(JSON.parse(JSON.stringify(raw)));
  console.log('valid');

  // The components as one JSON Schema document that the response schemas
  // refer into.
  const toDoc = (s) => JSON.parse(JSON.stringify(s).split('"#/components/schemas/').join('"doc#/$defs/'));
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allowUnionTypes: true });
  ajv.addSchema({ $id: 'doc', $defs: toDoc(raw.components.schemas) });
  const responses = raw.components.responses;

  const base = raw.servers[0].url;
  let n = 0;
  for (const [path, item] of Object.entries(raw.paths)) {
    const op = item.post;
    const media = op.requestBody.content['application/json'];
    const res = await fetch(base + path, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(media.example === undefined ? {} : media.example),
      signal: AbortSignal.timeout(20000),
    });
    const text = await res.text();
    let documented = op.responses[String(res.status)];
    if (!documented) return fail(`POST ${path}: status ${res.status} is not documented (${text})`);
    if (documented.$ref) documented = responses[documented.$ref.split('/').pop()];
    const schema = documented.content['application/json'].schema;
    let body;
    try {
      body = JSON.parse(text);
    } catch (e) {
      return fail(`POST ${path}: ${res.status} body is not JSON: ${text}`);
    }
    const validate = ajv.compile(toDoc(schema));
    if (!validate(body)) {
      return fail(`POST ${path}: ${res.status} body ${text} does not fit its schema: ${JSON.stringify(validate.errors)}`);
    }
    console.log(`ok POST ${path} ${res.status}`);
    n++;
  }
  if (n === 0) return fail('no paths');
  process.exit(0);
})().catch((err) => fail(err.message));
