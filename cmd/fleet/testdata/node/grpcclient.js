// grpcclient.js ADDR DIR: calls the demo's Arith and Hello through a Fleet
// gateway at ADDR with @grpc/grpc-js, loading the services from the
// .proto files that `fleet describe --proto --out DIR` wrote (and nothing
// else): DIR/fleet/gateway/Arith.proto and DIR/fleet/gateway/Hello.proto.
// Checks Arith.Add 20+22 and Arith.Mul 6*7 answer 42, and Hello.Say
// answers field1 "OK" and field2 100 and echoes field3. Prints one line
// per check; exits 0 when all pass, 1 otherwise.
'use strict';
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const [addr, dir] = process.argv.slice(2);
const def = loader.loadSync(['fleet/gateway/Arith.proto', 'fleet/gateway/Hello.proto'], {
  includeDirs: [dir],
  longs: Number,
  defaults: true,
});
const pkg = grpc.loadPackageDefinition(def);
const creds = grpc.credentials.createInsecure();
const arith = new pkg.Arith(addr, creds);
const hello = new pkg.Hello(addr, creds);
const deadline = () => new Date(Date.now() + 20000);

function fail(why) {
  console.log('FAIL ' + why);
  process.exit(1);
}

function call(client, method, req) {
  return new Promise((resolve, reject) => {
    client[method](req, new grpc.Metadata(), { deadline: deadline() }, (err, reply) => (err ? reject(err) : resolve(reply)));
  });
}

(async () => {
  // The reply of Arith is a Go int: a message with one field, "value".
  const sum = await call(arith, 'Add', { A: 20, B: 22 });
  if (sum.value !== 42) return fail('Arith.Add reply ' + JSON.stringify(sum));
  console.log('ok Arith.Add ' + sum.value);
  const prod = await call(arith, 'Mul', { A: 6, B: 7 });
  if (prod.value !== 42) return fail('Arith.Mul reply ' + JSON.stringify(prod));
  console.log('ok Arith.Mul ' + prod.value);
  const r = await call(hello, 'Say', { field1: 'hi', field2: 1, field3: 7 });
  if (r.field1 !== 'OK' || r.field2 !== 100 || r.field3 !== 7) return fail('Hello.Say reply ' + JSON.stringify(r));
  console.log('ok Hello.Say');
  arith.close();
  hello.close();
  process.exit(0);
})().catch((err) => fail(err.message));
