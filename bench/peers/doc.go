// Package peers holds the RPC stacks that `fleet bench` measures, each used
// the way its own users use it, behind one small interface so that the
// harness in package bench drives them all the same way.
//
// A peer has a server side (Server, serving on any net.Listener) and a
// client side (Client, dialled to the server's address). The operations are
// those of the benchmark scenarios (see package bench):
//
//   - Echo: send the 581-byte BenchmarkMessage (benchpb.New), the handler
//     sets field1 = "OK" and field2 = 100 and returns it (rpcx-benchmark);
//   - Add: MathService.Add(A, B) = A + B (the gRPC-vs-Thrift study);
//   - Log: ship one batch of LogBatchSize entries and wait for the result
//     code (the Gob-vs-Thrift log-shipping study);
//   - LogOneway: ship one batch without waiting for an answer, where the
//     peer has such a thing.
//
// An operation a peer does not have returns ErrUnsupported. Clients are safe
// for concurrent use; peers whose native client is not (Thrift) put a pool
// in front of it, as their users do.
//
// It owns the adapters to each peer's own API. It may import any Fleet
// package and each peer's library; nothing in the core module imports it.
package peers
