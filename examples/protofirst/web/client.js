// The page's client of greeter.v1.GreeterService (../proto/greeter/v1/
// greeter.proto), written with connect-es. app.js is this file bundled by
// esbuild with the packages of conformance/testdata/web (see
// docs/proto-first.md, "From a browser", for the command).
//
// The gateway's URL is the page's "gateway" query parameter (default
// http://127.0.0.1:8972); the page is served from another origin, which
// the gateway allows with gateway.WithCORS.
import { createPromiseClient, ConnectError, Code } from "@connectrpc/connect";
import { createConnectTransport, createGrpcWebTransport } from "@connectrpc/connect-web";
import { MethodKind, ScalarType, proto3 } from "@bufbuild/protobuf";

const str = (no, name) => ({ no, name, kind: "scalar", T: ScalarType.STRING });

// The .proto's messages and service, as protoc-gen-es would declare them.
const SayHelloRequest = proto3.makeMessageType("greeter.v1.SayHelloRequest", [str(1, "name")]);
const SayHelloResponse = proto3.makeMessageType("greeter.v1.SayHelloResponse", [str(1, "message")]);
const GreetManyRequest = proto3.makeMessageType("greeter.v1.GreetManyRequest", [
  str(1, "name"),
  { no: 2, name: "times", kind: "scalar", T: ScalarType.INT32 },
]);
const GreetManyResponse = proto3.makeMessageType("greeter.v1.GreetManyResponse", [str(1, "message")]);

const GreeterService = {
  typeName: "greeter.v1.GreeterService",
  methods: {
    sayHello: { name: "SayHello", I: SayHelloRequest, O: SayHelloResponse, kind: MethodKind.Unary },
    greetMany: { name: "GreetMany", I: GreetManyRequest, O: GreetManyResponse, kind: MethodKind.ServerStreaming },
  },
};

const $ = (id) => document.getElementById(id);

function client() {
  const baseUrl = $("gateway").value;
  const transport = $("protocol").value === "grpcweb"
    ? createGrpcWebTransport({ baseUrl })
    : createConnectTransport({ baseUrl });
  return createPromiseClient(GreeterService, transport);
}

// call shows what each reply says in #out, one line each, then "done" or
// the error (its code and message) in #status.
async function call(replies) {
  $("out").replaceChildren();
  $("status").textContent = "calling";
  try {
    for await (const r of replies()) {
      const li = document.createElement("li");
      li.textContent = r.message;
      $("out").append(li);
    }
    $("status").textContent = "done";
  } catch (e) {
    const ce = ConnectError.from(e);
    $("status").textContent = "error: " + Code[ce.code] + ": " + ce.rawMessage;
  }
}

$("gateway").value = new URLSearchParams(location.search).get("gateway") || "http://127.0.0.1:8972";
$("say").onclick = () => call(async function* () {
  yield await client().sayHello({ name: $("name").value });
});
$("greet").onclick = () => call(() => client().greetMany({ name: $("name").value, times: Number($("times").value) }));
$("status").textContent = "ready";
