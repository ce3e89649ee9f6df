// stream.js ADDR: calls Fleet streams through a Fleet gateway at ADDR with
// @grpc/grpc-js (messages are pb.BenchmarkMessage of
// internal/benchpb/benchmark.proto).
// 1. /Feed/List, a server stream, with field2 3 must send three messages
//    numbered 0, 1, 2 in field2, then end OK.
// 2. /Feed/List with field1 "fail:9" and field2 2 must send two messages,
//    then fail with FAILED_PRECONDITION and "failed as asked".
// 3. /Gen/Upper, a bidi stream: each message sent comes back with field1
//    prefixed "upper:"; the stream ends OK after the client's end.
// 4. /Feed/Sum, a client stream: field2 4 and 5 sum to 9 over 2 messages.
// Prints one line per check and exits 0 when all pass, 1 otherwise.
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
const client = new pb.Hello(addr, grpc.credentials.createInsecure());
const say = pb.Hello.service.Say;
const ser = say.requestSerialize;
const de = say.responseDeserialize;
const opts = () => ({ deadline: new Date(Date.now() + 20000) });
const msg = (field1, field2) => ({ field1, field2, field3: 7 });

function fail(why) {
  console.log('FAIL ' + why);
  client.close();
  process.exit(1);
}

function list(next) {
  const got = [];
  const call = client.makeServerStreamRequest('/Feed/List', ser, de, msg('hi', 3), new grpc.Metadata(), opts());
  call.on('data', (m) => got.push(m.field2));
  call.on('error', (err) => fail('Feed.List: ' + err.message));
  call.on('status', (st) => {
    if (st.code !== grpc.status.OK) return;
    if (JSON.stringify(got) !== '[0,1,2]') return fail('Feed.List got ' + JSON.stringify(got));
    console.log('ok Feed.List 3 messages');
    next();
  });
}

function listFail(next) {
  let n = 0;
  const call = client.makeServerStreamRequest('/Feed/List', ser, de, msg('fail:9', 2), new grpc.Metadata(), opts());
  call.on('data', () => n++);
  call.on('error', (err) => {
    if (err.code !== grpc.status.FAILED_PRECONDITION || err.details !== 'failed as asked' || n !== 2) {
      return fail('Feed.List error: code ' + err.code + ' ' + JSON.stringify(err.details) + ' after ' + n);
    }
    console.log('ok Feed.List error code ' + err.code + ' after ' + n);
    next();
  });
  call.on('status', (st) => {
    if (st.code === grpc.status.OK) fail('Feed.List did not fail');
  });
}

function upper(next) {
  const got = [];
  const call = client.makeBidiStreamRequest('/Gen/Upper', ser, de, new grpc.Metadata(), opts());
  call.on('data', (m) => {
    got.push(m.field1);
    if (got.length === 1) call.write(msg('b', 1));
    if (got.length === 2) call.end();
  });
  call.on('error', (err) => fail('Gen.Upper: ' + err.message));
  call.on('status', (st) => {
    if (st.code !== grpc.status.OK) return;
    if (JSON.stringify(got) !== '["upper:a","upper:b"]') return fail('Gen.Upper got ' + JSON.stringify(got));
    console.log('ok Gen.Upper');
    next();
  });
  call.write(msg('a', 1));
}

function sum(next) {
  const call = client.makeClientStreamRequest('/Feed/Sum', ser, de, new grpc.Metadata(), opts(), (err, reply) => {
    if (err) return fail('Feed.Sum: ' + err.message);
    if (reply.field2 !== 9 || reply.field3 !== 2) return fail('Feed.Sum reply ' + JSON.stringify(reply));
    console.log('ok Feed.Sum');
    next();
  });
  call.write(msg('a', 4));
  call.write(msg('b', 5));
  call.end();
}

list(() => listFail(() => upper(() => sum(() => {
  client.close();
  process.exit(0);
}))));
