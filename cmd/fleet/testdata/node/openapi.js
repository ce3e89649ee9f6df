// openapi.js FILE: checks the OpenAPI document that `fleet describe
// --openapi` wrote to FILE.
// 1. @apidevtools/swagger-parser validates it (OpenAPI 3.1 schema and
//    references).
// 2. Every documented path is called once against the document's server:
//    POST with the request's example as the body and Content-Type
//    application/json. The answer's status must be one the path
//    documents, and its body must validate (ajv, JSON Schema 2020-12)
//    against the schema documented for that status.
// 3. The first path is called with Content-Type text/plain: the answer
//    must be the documented 415, with its content type and Accept-Post.
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

  // A body that is not JSON: the documented 415, its Accept-Post header
  // and a text/plain body.
  const [path, item] = Object.entries(raw.paths)[0];
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { 'Content-Type': 'text/plain' },
    body: '{}',
    signal: AbortSignal.timeout(20000),
  });
  const text = await res.text();
  let documented = item.post.responses[String(res.status)];
  if (res.status !== 415 || !documented) return fail(`POST ${path} text/plain: status ${res.status} (${text})`);
  if (documented.$ref) documented = responses[documented.$ref.split('/').pop()];
  const ctype = (res.headers.get('content-type') || '').split(';')[0];
  if (!documented.content[ctype] || !documented.headers['Accept-Post'] || !res.headers.get('accept-post')) {
    return fail(`POST ${path} text/plain: 415 as ${ctype}, Accept-Post ${res.headers.get('accept-post')}, not as documented`);
  }
  console.log(`ok POST ${path} text/plain 415`);
  process.exit(0);
})().catch((err) => fail(err.message));
