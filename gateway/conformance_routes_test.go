package gateway_test

// The routes of the route conformance suite (conformance_test.go): each
// turns a case's request into its own wire form, reports what its caller
// saw in its own terms (a fleet.Code name, a gRPC status code, an HTTP
// status and body code, a JSON-RPC error code, a Connect code), and
// renders what the spec (docs/gateway.md, issue 22) says that caller must
// see.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"testing"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/client"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/compress"
	"github.com/fleetrpc/fleet/gateway"
	"github.com/fleetrpc/fleet/internal/benchpb"
	"github.com/fleetrpc/fleet/protocol"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"
	"google.golang.org/grpc/encoding/gzip"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// routeKind groups routes whose callers see the same kind of outcome.
type routeKind int

const (
	kindNative routeKind = iota
	kindGRPC
	kindHTTPJSON
	kindJSONRPC
	kindConnect // Connect and gRPC-Web: connect-go's client sees a connect.Code
)

// route is one way into a Fleet server. Adding a route is one entry in
// confRoutes.
type route struct {
	name string
	kind routeKind
	// inProcess: native clients are joined to the server in this process
	// (client.InProcess) instead of dialing the gateway's port.
	inProcess bool
	// gwOpts are the gateway's options beside WithLogger (h2c served by
	// net/http for Connect's client and bidi streams).
	gwOpts []gateway.Option
	// supports reports whether the route can carry the case's payload
	// (compressed bombs need a route with compression); nil: all.
	supports func(p payloadKind) bool
	// warm makes the connection a case's setup must find open (a call
	// during Shutdown comes on a connection made before); nil: none.
	warm func(e *confEnv, rq *request)
	// call makes the case's call and returns what the caller saw, in the
	// route's terms (see the outcome helpers).
	call func(ctx context.Context, e *confEnv, rq *request, pl *payloads) string
}

// confRoutes is every route the suite runs each case on.
var confRoutes = []route{
	{name: "native-unary", kind: kindNative, warm: warmNative, call: callNativeUnary},
	{name: "native-server-stream", kind: kindNative, warm: warmNative, call: callNativeServerStream},
	{name: "native-client-stream", kind: kindNative, warm: warmNative, call: callNativeClientStream},
	{name: "native-bidi-stream", kind: kindNative, warm: warmNative, call: callNativeBidiStream},
	{name: "grpc-unary", kind: kindGRPC, supports: grpcSupports, warm: warmGRPC, call: callGRPCUnary},
	{name: "grpc-server-stream", kind: kindGRPC, supports: grpcSupports, warm: warmGRPC, call: callGRPCServerStream},
	{name: "grpc-bidi-stream", kind: kindGRPC, supports: grpcSupports, warm: warmGRPC, call: callGRPCBidiStream},
	{name: "http-json", kind: kindHTTPJSON, supports: httpSupports, call: callHTTPJSON},
	{name: "json-rpc", kind: kindJSONRPC, supports: httpSupports, call: callJSONRPC},
	// The in-process transport: the native routes with clients joined by
	// client.InProcess (raw frames through srv.ServeConn on a net.Pipe).
	{name: "inprocess-unary", kind: kindNative, inProcess: true, warm: warmNative, call: callNativeUnary},
	{name: "inprocess-server-stream", kind: kindNative, inProcess: true, warm: warmNative, call: callNativeServerStream},
	{name: "inprocess-client-stream", kind: kindNative, inProcess: true, warm: warmNative, call: callNativeClientStream},
	{name: "inprocess-bidi-stream", kind: kindNative, inProcess: true, warm: warmNative, call: callNativeBidiStream},
	// Connect and gRPC-Web through connect-go's client (connect.go):
	// HTTP/1.1, but client and bidi streams, which Connect carries over
	// HTTP/2 only (h2c, served by net/http with WithH2CToHTTP).
	{name: "connect-unary", kind: kindConnect, supports: grpcSupports, call: connectCall(connectProto, connect.StreamTypeUnary)},
	{name: "connect-unary-json", kind: kindConnect, supports: grpcSupports, call: connectCall(connectJSON, connect.StreamTypeUnary)},
	{name: "connect-server-stream", kind: kindConnect, supports: grpcSupports, call: connectCall(connectProto, connect.StreamTypeServer)},
	{name: "connect-client-stream", kind: kindConnect, supports: grpcSupports, gwOpts: h2cOpts, call: connectCall(connectProto, connect.StreamTypeClient)},
	{name: "connect-bidi-stream", kind: kindConnect, supports: grpcSupports, gwOpts: h2cOpts, call: connectCall(connectProto, connect.StreamTypeBidi)},
	{name: "grpcweb-unary", kind: kindConnect, supports: grpcSupports, call: connectCall(grpcWebProto, connect.StreamTypeUnary)},
	{name: "grpcweb-server-stream", kind: kindConnect, supports: grpcSupports, call: connectCall(grpcWebProto, connect.StreamTypeServer)},
}

// h2cOpts has the gateway serve cleartext HTTP/2 with net/http, where
// connect-go's handler answers Connect streams.
var h2cOpts = []gateway.Option{gateway.WithH2CToHTTP(true)}

// grpcSupports: gRPC compresses with gzip only (grpc-encoding: gzip);
// so do Connect and gRPC-Web (connect-go's gzip, the gateway's only one).
func grpcSupports(p payloadKind) bool { return p != pZstdBomb }

// httpSupports: HTTP/JSON and JSON-RPC take no compressed bodies.
func httpSupports(p payloadKind) bool { return p != pZstdBomb && p != pGzipBomb }

// want renders the outcomes the spec allows the caller of route r in case
// c: the case's fleet.Code, mapped as docs/gateway.md states.
func (r *route) want(c *confCase) []string {
	code := c.want
	switch r.kind {
	case kindNative:
		if code == fleet.ShuttingDown {
			// A client that has the server's go-away does not send: the
			// call fails with client.ErrGoingAway (unavailable), not
			// sent; one that crossed the go-away is refused with 17.
			return []string{code.String(), fleet.Unavailable.String()}
		}
		return []string{code.String()}
	case kindGRPC:
		return []string{gateway.GRPCCode(code).String()}
	case kindConnect:
		// docs/gateway.md, "Connect and gRPC-Web": the code mapped by
		// gateway.ConnectCode (ShuttingDown is unavailable, which is
		// also what connect-go's client says when Shutdown has closed
		// the listener and it finds no connection). The caller's own
		// cancel is canceled, the code connect-go's client gives it.
		// Over the body limit is resource_exhausted, as over gRPC.
		return []string{gateway.ConnectCode(code).String()}
	}
	// HTTP routes.
	if code == fleet.Canceled {
		return []string{"canceled"} // the caller's own cancel: no answer
	}
	var alt []string
	if code == fleet.ShuttingDown {
		// Shutdown closes the gateway's listeners first (docs/gateway.md,
		// "Shutdown"): a caller may find no connection instead.
		alt = []string{"no connection"}
	}
	if r.kind == kindHTTPJSON {
		st := gateway.HTTPStatus(code)
		if c.overBody {
			st = http.StatusRequestEntityTooLarge
		}
		return append(alt, fmt.Sprintf("HTTP %d code=%d", st, code))
	}
	if c.overBody {
		return append(alt, fmt.Sprintf("HTTP 413 error=%d", gateway.InvalidRequest))
	}
	switch code {
	case fleet.InvalidArgument:
		return append(alt, fmt.Sprintf("HTTP 200 error=%d", gateway.InvalidParams))
	case fleet.Internal:
		return append(alt, fmt.Sprintf("HTTP 200 error=%d", gateway.InternalError))
	}
	return append(alt, fmt.Sprintf("HTTP 200 error=%d data.code=%d", gateway.ServerError, code))
}

// payloads are the request bodies the cases send, built once before any
// heap is measured.
type payloads struct {
	zstdBomb, gzipBomb []byte // raw native payloads: 8 MiB of zeros
	bombBytes          []byte // 8 MiB of zeros, for clients that compress themselves
	bombMsg            *msg   // a message of 8 MiB that compresses to little
	overMsg, bigMsg    *msg   // over the 4 MiB limit; within it (4 MiB - 64 KiB)
	overProto, bigProt []byte // their protobuf encodings
	manyMsgpack        []byte // Conf.Many's argument, 1,000,000 items, about 4 MB
	overJSON, manyJSON []byte // an HTTP/JSON body over the limit; "[{},{},...]" within it
	manyRPC            []byte // the JSON-RPC request of Conf.Many with manyJSON, built once
}

const limit = protocol.DefaultMaxDecompressedSize

func buildPayloads(t *testing.T) *payloads {
	p := &payloads{
		zstdBomb:  zstdNoSize(t, 2*limit),
		gzipBomb:  gzipZeros(t, 2*limit),
		bombBytes: make([]byte, 2*limit),
		bombMsg:   bigMsg(2 * limit),
		overMsg:   bigMsg(limit + 1<<10),
		bigMsg:    bigMsg(limit - 64<<10),
	}
	var err error
	if p.overProto, err = proto.Marshal(p.overMsg); err != nil {
		t.Fatal(err)
	}
	if p.bigProt, err = proto.Marshal(p.bigMsg); err != nil {
		t.Fatal(err)
	}
	if p.manyMsgpack, err = codec.Get(codec.MsgPack).Marshal(make([]Item, 1_000_000)); err != nil {
		t.Fatal(err)
	}
	p.overJSON = []byte(`{"field1":"` + p.overMsg.GetField1() + `","field2":1,"field3":1}`)
	// 1.4 million empty objects, the body of issue 22, within 4 MiB.
	many := append([]byte("["), bytes.Repeat([]byte("{},"), (limit-64)/3)...)
	many[len(many)-1] = ']'
	p.manyJSON = many
	// net/rpc's one-element params array; built here, as the other
	// routes' requests are, so that the call's heap figure counts only
	// what the server allocates.
	p.manyRPC = rpcBody("Conf", "Many", append(append([]byte("["), many...), ']'))
	return p
}

// validMsg is a request running mode.
func validMsg(mode string) *msg {
	m := benchpb.New()
	m.Field1 = proto.String(mode)
	return m
}

// method returns the service and method the case calls on a route whose
// method of the case's kind is name.
func (rq *request) target(name string) (string, string) {
	if rq.unknown {
		return "Nope", "Nope"
	}
	return "Conf", name
}

// --- native ---

func warmNative(e *confEnv, rq *request) { e.native(rq.token) }

// nativeOutcome is the fleet.Code name of err ("ok" for nil).
func nativeOutcome(err error) string { return fleet.CodeOf(err).String() }

func callNativeUnary(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	svc, m := rq.target("Echo")
	if rq.deadline {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, confDeadline)
		defer cancel()
	}
	// Payloads a Fleet client does not send go as raw frames.
	switch rq.payload {
	case pUndecodable:
		return e.rawCall(ctx, rq.token, codec.Protobuf, compress.None, svc, m, []byte{0xff, 0xff, 0xff, 0xff})
	case pZstdBomb:
		return e.rawCall(ctx, rq.token, codec.Protobuf, compress.Zstd, svc, m, pl.zstdBomb)
	case pGzipBomb:
		return e.rawCall(ctx, rq.token, codec.Protobuf, compress.Gzip, svc, m, pl.gzipBomb)
	case pOverLimit:
		return e.rawCall(ctx, rq.token, codec.Protobuf, compress.None, svc, m, pl.overProto)
	case pBig:
		if !rq.unknown {
			m = "Many"
		}
		return e.rawCall(ctx, rq.token, codec.MsgPack, compress.None, svc, m, pl.manyMsgpack)
	}
	var out msg
	return nativeOutcome(e.native(rq.token).Call(ctx, svc, m, validMsg(rq.mode), &out))
}

// streamClient returns the client and the message a native stream case
// sends; bombs and oversized messages need a client that compresses or
// sends past the default limits.
func streamClient(e *confEnv, rq *request, pl *payloads) (*client.Client, *msg) {
	big := client.WithLimits(protocol.Limits{MaxFrameSize: 64 << 20, MaxDecompressedSize: 64 << 20})
	switch rq.payload {
	case pZstdBomb:
		return e.native(rq.token, big, client.WithCompression(compress.Zstd, 0)), pl.bombMsg
	case pGzipBomb:
		return e.native(rq.token, big, client.WithCompression(compress.Gzip, 0)), pl.bombMsg
	case pOverLimit:
		return e.native(rq.token, big), pl.overMsg
	case pBig:
		return e.native(rq.token), pl.bigMsg
	}
	return e.native(rq.token), validMsg(rq.mode)
}

// undecodable is a message in a codec (raw bytes) that the stream's
// message type (a protobuf message) cannot be decoded from.
var undecodable = []byte{0xff, 0xff, 0xff, 0xff}

func streamCtx(ctx context.Context, rq *request) (context.Context, context.CancelFunc) {
	if rq.deadline {
		return context.WithTimeout(ctx, confDeadline)
	}
	return context.WithCancel(ctx)
}

func callNativeServerStream(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	ctx, cancel := streamCtx(ctx, rq)
	defer cancel()
	svc, m := rq.target("List")
	if rq.payload == pUndecodable {
		st, err := client.CallServerStream[[]byte, msg](ctx, e.native(rq.token), svc, m, &undecodable)
		if err != nil {
			return nativeOutcome(err)
		}
		defer st.Close()
		for st.Receive() {
		}
		return nativeOutcome(st.Err())
	}
	c, in := streamClient(e, rq, pl)
	st, err := client.CallServerStream[msg, msg](ctx, c, svc, m, in)
	if err != nil {
		return nativeOutcome(err)
	}
	defer st.Close()
	for st.Receive() {
	}
	return nativeOutcome(st.Err())
}

func callNativeClientStream(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	ctx, cancel := streamCtx(ctx, rq)
	defer cancel()
	svc, m := rq.target("Sum")
	if rq.payload == pUndecodable {
		st, err := client.CallClientStream[[]byte, msg](ctx, e.native(rq.token), svc, m)
		if err != nil {
			return nativeOutcome(err)
		}
		st.Send(&undecodable) // an error here is the stream's end: CloseAndReceive has it
		_, err = st.CloseAndReceive()
		return nativeOutcome(err)
	}
	c, in := streamClient(e, rq, pl)
	st, err := client.CallClientStream[msg, msg](ctx, c, svc, m)
	if err != nil {
		return nativeOutcome(err)
	}
	st.Send(in)
	_, err = st.CloseAndReceive()
	return nativeOutcome(err)
}

func callNativeBidiStream(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	ctx, cancel := streamCtx(ctx, rq)
	defer cancel()
	svc, m := rq.target("Chat")
	if rq.payload == pUndecodable {
		st, err := client.CallBidiStream[[]byte, msg](ctx, e.native(rq.token), svc, m)
		if err != nil {
			return nativeOutcome(err)
		}
		defer st.Close()
		st.Send(&undecodable)
		st.CloseRequest()
		return drainBidi(st)
	}
	c, in := streamClient(e, rq, pl)
	st, err := client.CallBidiStream[msg, msg](ctx, c, svc, m)
	if err != nil {
		return nativeOutcome(err)
	}
	defer st.Close()
	st.Send(in)
	st.CloseRequest()
	return drainBidi(st)
}

func drainBidi[Req any](st *client.BidiStreamForClient[Req, msg]) string {
	for {
		_, err := st.Receive()
		if err == io.EOF {
			return nativeOutcome(nil)
		}
		if err != nil {
			return nativeOutcome(err)
		}
	}
}

// --- gRPC, through grpc-go's own client ---

// rawCodec sends []byte as they are (a payload grpc-go's proto codec would
// not produce) and proto messages as protobuf; it reads replies as bytes.
type rawCodec struct{}

func (rawCodec) Name() string { return "proto" }

func (rawCodec) Marshal(v any) ([]byte, error) {
	if b, ok := v.([]byte); ok {
		return b, nil
	}
	return proto.Marshal(v.(proto.Message))
}

func (rawCodec) Unmarshal(data []byte, v any) error {
	*(v.(*[]byte)) = append([]byte(nil), data...)
	return nil
}

func warmGRPC(e *confEnv, _ *request) {
	cc := e.grpcConn()
	cc.Connect()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for s := cc.GetState(); s != connectivity.Ready; s = cc.GetState() {
		if !cc.WaitForStateChange(ctx, s) {
			e.t.Fatalf("gRPC connection not ready: %v", s)
		}
	}
}

// grpcRequest returns the context (deadline, token) and the message and
// call options of the case on gRPC.
func grpcRequest(ctx context.Context, rq *request, pl *payloads) (context.Context, context.CancelFunc, any, []grpc.CallOption) {
	opts := []grpc.CallOption{grpc.ForceCodec(rawCodec{})}
	var cancel context.CancelFunc
	if rq.deadline {
		ctx, cancel = context.WithTimeout(ctx, confDeadline)
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	if rq.token != "" {
		ctx = metadata.AppendToOutgoingContext(ctx, fleet.AuthKey, rq.token)
	}
	var in any = validMsg(rq.mode)
	switch rq.payload {
	case pUndecodable:
		in = undecodable
	case pGzipBomb:
		in = pl.bombBytes
		opts = append(opts, grpc.UseCompressor(gzip.Name))
	case pOverLimit:
		in = pl.overProto
	case pBig:
		in = pl.bigProt
	}
	return ctx, cancel, in, opts
}

func grpcOutcome(err error) string { return status.Code(err).String() }

func grpcPath(rq *request, name string) string {
	svc, m := rq.target(name)
	return "/" + svc + "/" + m
}

func callGRPCUnary(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	ctx, cancel, in, opts := grpcRequest(ctx, rq, pl)
	defer cancel()
	var out []byte
	return grpcOutcome(e.grpcConn().Invoke(ctx, grpcPath(rq, "Echo"), in, &out, opts...))
}

func callGRPCServerStream(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	ctx, cancel, in, opts := grpcRequest(ctx, rq, pl)
	defer cancel()
	cs, err := e.grpcConn().NewStream(ctx, serverDesc, grpcPath(rq, "List"), opts...)
	if err != nil {
		return grpcOutcome(err)
	}
	cs.SendMsg(in) // io.EOF when the server already ended the stream: RecvMsg has its status
	cs.CloseSend()
	return drainGRPC(cs)
}

func callGRPCBidiStream(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	ctx, cancel, in, opts := grpcRequest(ctx, rq, pl)
	defer cancel()
	cs, err := e.grpcConn().NewStream(ctx, bidiDesc, grpcPath(rq, "Chat"), opts...)
	if err != nil {
		return grpcOutcome(err)
	}
	cs.SendMsg(in)
	cs.CloseSend()
	return drainGRPC(cs)
}

func drainGRPC(cs grpc.ClientStream) string {
	for {
		var out []byte
		err := cs.RecvMsg(&out)
		if err == io.EOF {
			return grpcOutcome(nil)
		}
		if err != nil {
			return grpcOutcome(err)
		}
	}
}

// --- HTTP/JSON and JSON-RPC 2.0 ---

// jsonArgs returns the JSON arguments of the case and the method to call.
func jsonArgs(rq *request, pl *payloads) ([]byte, string) {
	switch rq.payload {
	case pUndecodable:
		return []byte(`{"field1":123,"field2":1,"field3":1}`), "Echo" // field1 is a string
	case pOverLimit:
		return pl.overJSON, "Echo"
	case pBig:
		return pl.manyJSON, "Many"
	}
	b, err := protojson.Marshal(validMsg(rq.mode))
	if err != nil {
		panic(err)
	}
	return b, "Echo"
}

// httpPost posts body and returns the response's status and body, or the
// outcome of a call that got no response.
func httpPost(ctx context.Context, e *confEnv, rq *request, path string, body []byte) (int, []byte, string) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+e.addr+path, bytes.NewReader(body))
	if err != nil {
		e.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if rq.token != "" {
		req.Header.Set("Authorization", rq.token)
	}
	if rq.deadline {
		req.Header.Set("Fleet-Timeout-Ms", strconv.Itoa(int(confDeadline/time.Millisecond)))
	}
	resp, err := e.http().Do(req)
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return 0, nil, "canceled"
		}
		return 0, nil, "no connection"
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, nil, "no connection"
	}
	return resp.StatusCode, b, ""
}

func callHTTPJSON(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	args, name := jsonArgs(rq, pl)
	svc, m := rq.target(name)
	st, b, failed := httpPost(ctx, e, rq, "/"+svc+"/"+m, args)
	if failed != "" {
		return failed
	}
	if st == http.StatusOK {
		return "HTTP 200"
	}
	var eb errBody
	json.Unmarshal(b, &eb)
	return fmt.Sprintf("HTTP %d code=%d", st, eb.Code)
}

// rpcBody is a JSON-RPC 2.0 request of svc.m with params.
func rpcBody(svc, m string, params []byte) []byte {
	head, tail := `{"jsonrpc":"2.0","method":"`+svc+"."+m+`","params":`, `,"id":1}`
	body := make([]byte, 0, len(head)+len(params)+len(tail))
	return append(append(append(body, head...), params...), tail...)
}

func callJSONRPC(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
	args, name := jsonArgs(rq, pl)
	svc, m := rq.target(name)
	body := pl.manyRPC
	if name != "Many" || svc != "Conf" {
		body = rpcBody(svc, m, args)
	}
	st, b, failed := httpPost(ctx, e, rq, "/", body)
	if failed != "" {
		return failed
	}
	var r rpcResp
	json.Unmarshal(b, &r)
	if r.Error == nil {
		return fmt.Sprintf("HTTP %d result", st)
	}
	if r.Error.Code == gateway.ServerError && r.Error.Data != nil {
		return fmt.Sprintf("HTTP %d error=%d data.code=%d", st, r.Error.Code, r.Error.Data.Code)
	}
	return fmt.Sprintf("HTTP %d error=%d", st, r.Error.Code)
}

// --- Connect and gRPC-Web, through connect-go's client ---

// connectProtocol is one of connect-go's client protocols and codecs.
type connectProtocol int

const (
	connectProto connectProtocol = iota // Connect, binary protobuf
	connectJSON                         // Connect, JSON
	grpcWebProto                        // gRPC-Web, binary protobuf
)

// confConnectCodec is the client's codec under one name ("proto" or
// "json"): []byte goes as it is (a payload connect-go's own codecs would
// not produce), a proto.Message in the codec's encoding; replies are read
// and dropped.
type confConnectCodec struct{ name string }

func (c confConnectCodec) Name() string { return c.name }

func (c confConnectCodec) MarshalWrite(_ context.Context, dst io.Writer, v any) error {
	var b []byte
	var err error
	switch v := v.(type) {
	case []byte:
		b = v
	case proto.Message:
		if c.name == connect.CodecNameJSON {
			b, err = protojson.Marshal(v)
		} else {
			b, err = proto.Marshal(v)
		}
	default:
		return fmt.Errorf("conformance codec: cannot encode %T", v)
	}
	if err != nil {
		return err
	}
	_, err = dst.Write(b)
	return err
}

func (c confConnectCodec) UnmarshalRead(_ context.Context, src io.Reader, v any) error {
	b, err := io.ReadAll(src)
	if err != nil {
		return err
	}
	if m, ok := v.(proto.Message); ok { // connect-go's own (an error's details)
		return proto.Unmarshal(b, m)
	}
	return nil
}

// connectOutcome is the connect.Code name of err ("ok" for nil).
func connectOutcome(err error) string {
	if err == nil {
		return "ok"
	}
	return connect.CodeOf(err).String()
}

// connectRequest returns the client, the context (deadline, token) and
// the message of the case on Connect or gRPC-Web, and the method to call.
func connectRequest(ctx context.Context, e *confEnv, p connectProtocol, k connect.StreamType, rq *request, pl *payloads) (*connect.Client, context.Context, context.CancelFunc, any, string) {
	codecName := connect.CodecNameProto
	if p == connectJSON {
		codecName = connect.CodecNameJSON
	}
	opts := []connecthttp.Option{connecthttp.WithCodecs(confConnectCodec{name: codecName})}
	if p == grpcWebProto {
		opts = append(opts, connecthttp.WithGRPCWeb())
	}
	ctx, cancel := streamCtx(ctx, rq)
	cctx, info := connect.NewClientContext(ctx)
	if rq.token != "" {
		info.RequestHeader().Set("Authorization", rq.token)
	}
	name := map[connect.StreamType]string{connect.StreamTypeUnary: "Echo", connect.StreamTypeServer: "List", connect.StreamTypeClient: "Sum", connect.StreamTypeBidi: "Chat"}[k]
	var in any = validMsg(rq.mode)
	switch rq.payload {
	case pUndecodable:
		in = undecodable
		if p == connectJSON {
			in, _ = jsonArgs(rq, pl)
		}
	case pGzipBomb:
		in = pl.bombBytes
		opts = append(opts, connecthttp.WithSendGzip())
	case pOverLimit:
		in = pl.overProto
		if p == connectJSON {
			in = pl.overJSON
		}
	case pBig:
		in = pl.bigProt
		if p == connectJSON {
			in, name = jsonArgs(rq, pl) // Conf.Many with issue 22's body
		}
	}
	hc := e.http()
	if k == connect.StreamTypeClient || k == connect.StreamTypeBidi {
		hc = e.h2c()
	}
	c := connect.NewClient(connecthttp.NewTransport(hc, "http://"+e.addr, opts...))
	return c, cctx, cancel, in, name
}

// connectCall is the call function of a Connect or gRPC-Web route.
func connectCall(p connectProtocol, k connect.StreamType) func(context.Context, *confEnv, *request, *payloads) string {
	return func(ctx context.Context, e *confEnv, rq *request, pl *payloads) string {
		c, ctx, cancel, in, name := connectRequest(ctx, e, p, k, rq, pl)
		defer cancel()
		// Every kind the same way: open the stream, send the one
		// message, close the sending side, read to the end. A Send
		// error (the server answered and closed before reading all of
		// the body) is not the caller's outcome: Receive has the
		// server's answer (connect-go's CallUnary and CallServerStream
		// would return the Send error instead).
		spec := connect.Spec{Procedure: grpcPath(rq, name), StreamType: k}
		st, err := c.CallClientStream(ctx, spec)
		if err != nil {
			return connectOutcome(err)
		}
		st.Send(in)
		st.CloseSend()
		defer st.Close()
		for {
			var out []byte
			if err := st.Receive(&out); err != nil {
				if errors.Is(err, io.EOF) {
					return connectOutcome(nil)
				}
				return connectOutcome(err)
			}
		}
	}
}
