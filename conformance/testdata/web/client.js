// A connect-es page that the conformance module's browser test loads in
// Chromium: it calls fleet.test.Echo on the gateway named by the page's
// "gateway" query parameter (another origin, allowed by the gateway's
// CORS), over Connect (JSON) and gRPC-Web (binary), unary and a server
// stream, then calls a gateway that does not allow its origin (the
// "closed" parameter) and expects the browser to refuse. It leaves its
// findings in window.result and sets window.done.
import { createPromiseClient, ConnectError } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { MethodKind, StringValue, Int32Value } from "@bufbuild/protobuf";

const Echo = {
  typeName: "fleet.test.Echo",
  methods: {
    upper: { name: "Upper", I: StringValue, O: StringValue, kind: MethodKind.Unary },
    count: { name: "Count", I: Int32Value, O: StringValue, kind: MethodKind.ServerStreaming },
  },
};

async function run(transport) {
  const client = createPromiseClient(Echo, transport);
  const out = {};
  const headers = {};
  const res = await client.upper(new StringValue({ value: "hello" }), {
    headers: { "x-k": "v" },
    onHeader: (h) => { headers.echo = h.get("echo"); },
  });
  out.upper = res.value;
  out.echo = headers.echo;
  const got = [];
  for await (const m of client.count(new Int32Value({ value: 3 }))) {
    got.push(m.value);
  }
  out.count = got.join(",");
  try {
    await client.upper(new StringValue({ value: "fail" }));
    out.error = "none";
  } catch (e) {
    const ce = ConnectError.from(e);
    out.error = ce.code + ":" + ce.rawMessage;
  }
  return out;
}

async function main() {
  const params = new URLSearchParams(location.search);
  const baseUrl = params.get("gateway");
  const result = {};
  try {
    result.connect = await run(createConnectTransport({ baseUrl }));
    result.grpcweb = await run(createGrpcWebTransport({ baseUrl, useBinaryFormat: true }));
  } catch (e) {
    result.failure = String(e);
  }
  try {
    const closed = createPromiseClient(Echo, createConnectTransport({ baseUrl: params.get("closed") }));
    await closed.upper(new StringValue({ value: "x" }));
    result.closed = "answered";
  } catch (e) {
    result.closed = "refused";
  }
  window.result = JSON.stringify(result);
  window.done = true;
}

main();
