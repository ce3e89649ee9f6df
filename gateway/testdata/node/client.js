// client.js ADDR: calls a Fleet gateway at ADDR with @grpc/grpc-js.
// 1. pb.Hello/Say (the benchmark service of internal/benchpb/benchmark.proto)
//    must answer field1 "OK" and field2 100, and echo field3.
// 2. /Probe/Say with field1 "fail:9" must fail with FAILED_PRECONDITION (9)
//    and the handler's message "failed as asked".
// Prints one line per check and exits 0 when both pass, 1 otherwise.
'use strict';
const path = require('path');
const grpc = require('@grpc/grpc-js');
const loader = require('@grpc/proto-loader');

const addr = process.argv[2];
const def = loader.loadSync(path.join(__dirname, '..', '..', '..', 'internal', 'benchpb', 'benchmark.proto'), {
  longs: Number,
  defaults: false,
});
const pb = grpc.loadPackageDefinition(def).pb;
const creds = grpc.credentials.createInsecure();
const hello = new pb.Hello(addr, creds);
const deadline = () => new Date(Date.now() + 20000);
const msg = (field1) => ({ field1, field2: 1, field3: 7 });

function fail(why) {
  console.log('FAIL ' + why);
  hello.close();
  process.exit(1);
}

hello.Say(msg('hi'), new grpc.Metadata(), { deadline: deadline() }, (err, reply) => {
  if (err) return fail('Hello.Say: ' + err.message);
  if (reply.field1 !== 'OK' || reply.field2 !== 100 || reply.field3 !== 7) {
    return fail('Hello.Say reply ' + JSON.stringify(reply));
  }
  console.log('ok Hello.Say');
  const say = pb.Hello.service.Say;
  hello.makeUnaryRequest('/Probe/Say', say.requestSerialize, say.responseDeserialize, msg('fail:9'),
    new grpc.Metadata(), { deadline: deadline() }, (err2) => {
      if (!err2) return fail('Probe.Say did not fail');
      if (err2.code !== grpc.status.FAILED_PRECONDITION || err2.details !== 'failed as asked') {
        return fail('Probe.Say: code ' + err2.code + ' details ' + JSON.stringify(err2.details));
      }
      console.log('ok Probe.Say code ' + err2.code);
      hello.close();
      process.exit(0);
    });
});
