package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"iter"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect/v2"
	"connectrpc.com/connect/v2/connecthttp"
	"connectrpc.com/connect/v2/connectproto"
	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/server"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/descriptorpb"
)

// The Connect and gRPC-Web side. connect-go (connectrpc.com/connect/v2,
// package connecthttp) speaks the protocols: content types, envelopes,
// gRPC-Web's text encoding, compression, timeouts, the error and
// end-of-stream formats, Connect GET. The gateway gives it, per Fleet
// method, one untyped connect.ServerFunc whose messages are the payload
// bytes as they came (rawMessage, through rawCodec) and which hands them
// to Server.Invoke or Server.InvokeStream, like the gRPC route.

// isConnectRequest reports whether r is a Connect or gRPC-Web request:
// any request with a Connect-Protocol-Version header (connect-es,
// connect-go and buf curl send it; connect-go then answers a wrong verb
// or content type as the protocol says), a gRPC-Web content type
// (application/grpc-web, -web+proto, -web+json, -web-text, ...), a
// Connect streaming type (application/connect+...), Connect unary binary
// (application/proto), a GET with the Connect query parameters
// (connect=v1 or encoding=...), and gRPC with the JSON codec
// (application/grpc+json), which connect-go's gRPC handler serves when
// the request reaches net/http (over TLS, or cleartext HTTP/2 with
// WithH2CToHTTP). Without Connect-Protocol-Version, application/json is
// HTTP/JSON.
func isConnectRequest(r *http.Request) bool {
	if r.Header.Get("Connect-Protocol-Version") != "" {
		return true
	}
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	switch r.Method {
	case http.MethodGet:
		q := r.URL.Query()
		return q.Get("connect") != "" || q.Get("encoding") != ""
	case http.MethodOptions:
		return false
	}
	return strings.HasPrefix(ct, "application/grpc-web") ||
		strings.HasPrefix(ct, "application/connect+") ||
		strings.HasPrefix(ct, "application/grpc+json") ||
		ct == "application/proto" || strings.HasPrefix(ct, "application/proto;")
}

// connectRoute holds the connect-go handlers, one per Fleet method, built
// the first time the method is called (so methods registered after New
// are served) and kept: the map grows with the registered methods only.
type connectRoute struct {
	g        *Gateway
	handlers sync.Map // connectKey -> http.Handler
	errs     *connecthttp.ErrorWriter
	opts     []connecthttp.Option
	// introspection holds the handlers of server reflection, by path
	// (connect_reflect.go); set once by New, read-only after.
	introspection map[string]http.Handler
}

type connectKey struct {
	service, method string // the Fleet names
	kind            connect.StreamType
}

// connectCompressMin is the size from which Connect and gRPC-Web answers
// are compressed for clients that accept gzip, in bytes.
const connectCompressMin = 1024

func newConnectRoute(g *Gateway) *connectRoute {
	l := g.srv.Limits()
	opts := []connecthttp.Option{
		connecthttp.WithCodecs(rawCodec{name: connect.CodecNameProto}, rawCodec{name: connect.CodecNameJSON}),
		connecthttp.WithReadMaxBytes(l.MaxDecompressedSize),
		connecthttp.WithSendMaxBytes(l.MaxFrameSize),
		// Answers to clients that accept gzip are compressed from 1 KiB:
		// below that, gzip costs more CPU than the bytes it saves.
		connecthttp.WithCompressMinBytes(connectCompressMin),
	}
	return &connectRoute{g: g, errs: connecthttp.NewErrorWriter(opts...), opts: opts}
}

// serveConnect answers one Connect or gRPC-Web request (isConnectRequest):
// the browser checks (origin, CORS), then the method's handler. A unary
// call's body is read within the gateway's body timeout and its answer
// written within the write timeout; a stream's are not bounded (as gRPC
// streams are not), its deadline being the call's timeout.
func (c *connectRoute) serve(w http.ResponseWriter, r *http.Request) {
	g := c.g
	if !g.originAllowed(r) {
		_ = c.errs.Write(w, r, connect.NewError(connect.CodePermissionDenied, "cross-origin request refused: origin not allowed by the gateway's CORS configuration"))
		return
	}
	if g.cors != nil {
		g.cors.addHeaders(w, r)
	}
	if h, ok := c.introspection[r.URL.Path]; ok {
		c.serveWith(h, w, r)
		return
	}
	svc, method, ok := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	if !ok || svc == "" || method == "" || strings.Contains(method, "/") {
		c.unknown(w, r, svc, method)
		return
	}
	key, schema, found := c.lookup(svc, method)
	if !found || g.hiddenOverHTTP(key.service) {
		// Auth before anything is said about the method.
		if _, err := g.srv.Authenticate(r.Context(), svc, method, connectMetadata(httpHeaderAll(r.Header))); err != nil {
			_ = c.errs.Write(w, r, connectError(err))
			return
		}
		c.unknown(w, r, svc, method)
		return
	}
	if key.kind == connect.StreamTypeUnary && r.ContentLength > int64(g.srv.Limits().MaxDecompressedSize) && isConnectUnaryBody(r) {
		// A Connect unary body is the message (compressed or not), which
		// connect-go refuses past the limit only once it has read (and
		// buffered) limit+1 bytes: refuse it by its declared length, as
		// HTTP/JSON does, after the auth function.
		if _, err := g.srv.Authenticate(r.Context(), svc, method, connectMetadata(httpHeaderAll(r.Header))); err != nil {
			_ = c.errs.Write(w, r, connectError(err))
			return
		}
		_ = c.errs.Write(w, r, connect.Errorf(connect.CodeResourceExhausted, "message of %d bytes exceeds the limit of %d", r.ContentLength, g.srv.Limits().MaxDecompressedSize))
		return
	}
	if key.kind == connect.StreamTypeUnary {
		// The body within the body timeout (then no read deadline while
		// the handler runs), the answer within the write timeout from
		// its start.
		rc := http.NewResponseController(w)
		_ = rc.SetReadDeadline(time.Now().Add(g.opts.limits.bodyTimeout))
		r.Body = &bodyDeadline{ReadCloser: r.Body, rc: rc}
		w = &deadlineWriter{ResponseWriter: w, rc: rc, timeout: g.opts.limits.writeTimeout}
		if r.ProtoMajor == 1 {
			r = r.WithContext(context.WithValue(r.Context(), unreadBodyKey{}, r.Body))
		}
	}
	h, ok := c.handlers.Load(key)
	if !ok {
		h, _ = c.handlers.LoadOrStore(key, c.build(key, svc, schema))
	}
	c.serveWith(h.(http.Handler), w, r)
}

// serveWith has h (a connect-go handler) answer r, through the base64
// coding of gRPC-Web text when r is gRPC-Web text.
func (c *connectRoute) serveWith(h http.Handler, w http.ResponseWriter, r *http.Request) {
	if isGRPCWebText(r) {
		tw, br := fromGRPCWebText(w, r)
		h.ServeHTTP(tw, br)
		tw.finish()
		return
	}
	h.ServeHTTP(w, r)
}

// isConnectUnaryBody reports whether r's body is one Connect unary message
// (a POST of application/proto or application/json, not an enveloped
// gRPC-Web or Connect streaming body, which may carry several).
func isConnectUnaryBody(r *http.Request) bool {
	ct := strings.ToLower(r.Header.Get("Content-Type"))
	return r.Method == http.MethodPost && !strings.HasPrefix(ct, "application/grpc") && !strings.HasPrefix(ct, "application/connect+")
}

// unreadBodyKey is the context key of an HTTP/1.x unary call's request
// body (drainRefused).
type unreadBodyKey struct{}

// drainRefused reads and drops what is left of an HTTP/1.x unary call's
// body, up to limit bytes within the body timeout, when the call is
// refused before its body was read. Over HTTP/1.1 a client still writing
// its body when the server closes the connection gets a reset that may
// take the answer with it (net/http closes a connection whose unread body
// is over 256 KiB); read first, the answer reaches the caller. Nothing is
// kept: the cost is the bytes on the wire, never memory.
func drainRefused(ctx context.Context, limit int) {
	if b, ok := ctx.Value(unreadBodyKey{}).(io.Reader); ok {
		_, _ = io.Copy(io.Discard, io.LimitReader(b, int64(limit)+1))
	}
}

// bodyDeadline clears the connection's read deadline once the body has
// been read to its end, so that it does not fire while the handler runs.
type bodyDeadline struct {
	io.ReadCloser
	rc *http.ResponseController
}

func (b *bodyDeadline) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		_ = b.rc.SetReadDeadline(time.Time{})
	}
	return n, err
}

// Close clears the read deadline too (a GET's body is closed unread).
func (b *bodyDeadline) Close() error {
	_ = b.rc.SetReadDeadline(time.Time{})
	return b.ReadCloser.Close()
}

// unknown answers a call of an unknown method: over gRPC and gRPC-Web the
// status Unimplemented, over Connect 404 with the error unimplemented (as
// connect-go answers a path it does not route).
func (c *connectRoute) unknown(w http.ResponseWriter, r *http.Request, svc, method string) {
	err := connect.Errorf(connect.CodeUnimplemented, "unknown method %s/%s", svc, method)
	if strings.HasPrefix(strings.ToLower(r.Header.Get("Content-Type")), "application/grpc") {
		_ = c.errs.Write(w, r, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	msg, _ := json.Marshal(err.Message())
	_, _ = io.WriteString(w, `{"code":"unimplemented","message":`+string(msg)+`}`)
}

// lookup finds the Fleet method of a Connect path and, when the protobuf
// registry holds the service under the path's name (or under the
// gateway's proto package), its method descriptor.
func (c *connectRoute) lookup(svc, method string) (connectKey, protoreflect.MethodDescriptor, bool) {
	g := c.g
	var key connectKey
	if name, _, ok := g.fleetName(svc, method); ok {
		key = connectKey{service: name, method: method, kind: connect.StreamTypeUnary}
	} else if name, sd, ok := g.fleetStream(svc, method); ok {
		key = connectKey{service: name, method: method}
		switch sd.Kind {
		case server.ServerStreaming:
			key.kind = connect.StreamTypeServer
		case server.ClientStreaming:
			key.kind = connect.StreamTypeClient
		default:
			key.kind = connect.StreamTypeBidi
		}
	} else {
		return key, nil, false
	}
	names := []string{svc, key.service}
	if g.opts.protoPackage != "" {
		names = append(names, g.opts.protoPackage+"."+key.service)
	}
	for _, n := range names {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(n))
		if err != nil {
			continue
		}
		if sd, ok := d.(protoreflect.ServiceDescriptor); ok {
			if md := sd.Methods().ByName(protoreflect.Name(method)); md != nil {
				return key, md, true
			}
		}
	}
	return key, nil, true
}

// build makes the connect-go handler of one Fleet method. A method is
// served over Connect GET when its protobuf descriptor (found in the
// global registry) marks it idempotency_level = NO_SIDE_EFFECTS.
func (c *connectRoute) build(key connectKey, svc string, md protoreflect.MethodDescriptor) http.Handler {
	spec := connect.Spec{Procedure: "/" + svc + "/" + key.method, StreamType: key.kind}
	if md != nil {
		spec.Schema = md
		if o, ok := md.Options().(*descriptorpb.MethodOptions); ok {
			switch o.GetIdempotencyLevel() {
			case descriptorpb.MethodOptions_NO_SIDE_EFFECTS:
				spec.IdempotencyLevel = connect.IdempotencyNoSideEffects
			case descriptorpb.MethodOptions_IDEMPOTENT:
				spec.IdempotencyLevel = connect.IdempotencyIdempotent
			}
		}
	}
	fn := c.unary(key)
	if key.kind != connect.StreamTypeUnary {
		fn = c.stream(key)
	}
	cs := connect.NewServer()
	cs.Register(connect.Method{Spec: spec, Handler: fn})
	mux := &oneHandler{procedure: spec.Procedure}
	connecthttp.Mount(mux, cs, c.opts...)
	return mux.h
}

// oneHandler is the connecthttp.ServeMux given to Mount: it keeps the
// procedure's handler and drops the per-service catch-all.
type oneHandler struct {
	procedure string
	h         http.Handler
}

func (m *oneHandler) Handle(pattern string, h http.Handler) {
	if pattern == m.procedure {
		m.h = h
	}
}

// route is the Fleet route of a Connect or gRPC-Web call.
func route(ctx context.Context) fleet.Route {
	if info, ok := connect.CallInfoForServerContext(ctx); ok && info.Protocol == "grpcweb" {
		return fleet.RouteGRPCWeb
	}
	return fleet.RouteConnect
}

// unary is the ServerFunc of a unary Fleet method.
func (c *connectRoute) unary(key connectKey) connect.ServerFunc {
	g := c.g
	return func(ctx context.Context, _ connect.Spec, stream connect.ServerStream) error {
		info, _ := connect.CallInfoForServerContext(ctx)
		md := connectMetadata(info.RequestHeader())
		if g.authOn {
			// Auth before the body is decompressed and read.
			if _, err := g.srv.Authenticate(ctx, key.service, key.method, md); err != nil {
				drainRefused(ctx, g.srv.Limits().MaxDecompressedSize)
				return connectError(err)
			}
		}
		var in rawMessage
		if err := stream.Receive(&in); err != nil {
			return err
		}
		call := &server.Call{Service: key.service, Method: key.method, Payload: in, Metadata: md, Route: route(ctx)}
		if info.Codec == connect.CodecNameJSON {
			if err := checkDepth(in, g.opts.maxDepth); err != nil {
				return connectError(err)
			}
			call.Codec = jsonCodec{}
		} else {
			call.CodecFor = g.codecForFn
		}
		call.RemoteAddr, call.LocalAddr = peerAddrs(ctx, info)
		reply, rmd, err := g.srv.Invoke(ctx, call)
		setConnectMetadata(info.ResponseHeader(), rmd)
		setConnectMetadata(info.ResponseTrailer(), call.Trailer)
		if err != nil {
			return connectError(err)
		}
		out := rawMessage(reply)
		return stream.Send(&out)
	}
}

// stream is the ServerFunc of a streaming Fleet method: each message
// received is handed to the handler's Receive, each one it sends is
// written at once (connect-go flushes it), with no buffer between the two
// sides' flow control.
func (c *connectRoute) stream(key connectKey) connect.ServerFunc {
	g := c.g
	return func(ctx context.Context, _ connect.Spec, stream connect.ServerStream) error {
		info, _ := connect.CallInfoForServerContext(ctx)
		sd, ok := g.srv.StreamMethod(key.service, key.method)
		if !ok {
			return connect.Errorf(connect.CodeUnimplemented, "unknown method %s/%s", key.service, key.method)
		}
		var cd codec.Codec = jsonCodec{}
		if info.Codec != connect.CodecNameJSON {
			if (sd.ArgType != nil && !isProto(sd.ArgType)) || (sd.ReplyType != nil && !isProto(sd.ReplyType)) {
				return connect.Errorf(connect.CodeUnimplemented, "%s.%s does not take and return protobuf messages: call it with JSON", key.service, key.method)
			}
			cd = codec.ProtobufCodec{}
		}
		call := &server.StreamCall{
			Route:   route(ctx),
			Service: key.service, Method: key.method, Codec: cd, Metadata: connectMetadata(info.RequestHeader()),
			Recv: func() ([]byte, error) {
				var in rawMessage
				if err := stream.Receive(&in); err != nil {
					if errors.Is(err, io.EOF) {
						return nil, io.EOF
					}
					return nil, fleetFromConnect(err)
				}
				if cd.Name() == "json" {
					if err := checkDepth(in, g.opts.maxDepth); err != nil {
						return nil, err
					}
				}
				return in, nil
			},
			Send: func(b []byte) error {
				out := rawMessage(b)
				if err := stream.Send(&out); err != nil {
					return fleetFromConnect(err)
				}
				return nil
			},
			// connect-go writes the response headers with the first
			// message (or the end), so setting them suffices.
			SendHeader: func(md fleet.Metadata) error {
				setConnectMetadata(info.ResponseHeader(), md)
				return nil
			},
		}
		call.RemoteAddr, call.LocalAddr = peerAddrs(ctx, info)
		trailer, err := g.srv.InvokeStream(ctx, call)
		setConnectMetadata(info.ResponseTrailer(), trailer)
		if err != nil {
			return connectError(err)
		}
		return nil
	}
}

// peerAddrs are the call's addresses, from the HTTP request.
func peerAddrs(ctx context.Context, info *connect.CallInfo) (remote, local net.Addr) {
	local, _ = ctx.Value(http.LocalAddrContextKey).(net.Addr)
	return remoteAddr(info.PeerAddr), local
}

// rawMessage is a message passed through undecoded: the bytes of its
// encoding (binary protobuf or JSON) as the client sent them, which
// Invoke decodes with the codec the method calls for.
type rawMessage []byte

// rawCodec is connect-go's codec for rawMessage values under one codec
// name ("proto" or "json"): it copies bytes in and out, decoding nothing.
type rawCodec struct{ name string }

func (c rawCodec) Name() string { return c.name }

func (c rawCodec) MarshalWrite(ctx context.Context, dst io.Writer, msg any) error {
	m, ok := msg.(*rawMessage)
	if !ok {
		// connect-go's own messages (the google.rpc.Status of a gRPC
		// error) go through the protobuf codec.
		if c.name == connect.CodecNameProto {
			return protoCodec.MarshalWrite(ctx, dst, msg)
		}
		return connect.Errorf(connect.CodeInternal, "gateway: cannot encode %T", msg)
	}
	_, err := dst.Write(*m)
	return err
}

func (c rawCodec) UnmarshalRead(ctx context.Context, src io.Reader, msg any) error {
	m, ok := msg.(*rawMessage)
	if !ok {
		if c.name == connect.CodecNameProto {
			return protoCodec.UnmarshalRead(ctx, src, msg)
		}
		return connect.Errorf(connect.CodeInternal, "gateway: cannot decode into %T", msg)
	}
	var b bytes.Buffer
	if _, err := b.ReadFrom(src); err != nil {
		return err
	}
	*m = b.Bytes()
	return nil
}

var protoCodec = connectproto.NewBinaryCodec()

// MarshalWriteStable is MarshalWrite: the bytes are the client's or the
// handler's, already in their final form.
func (c rawCodec) MarshalWriteStable(ctx context.Context, dst io.Writer, msg any) error {
	return c.MarshalWrite(ctx, dst, msg)
}

// IsBinary reports whether the codec is binary protobuf.
func (c rawCodec) IsBinary() bool { return c.name == connect.CodecNameProto }

// notMetadata are the request headers that are not call metadata over
// Connect and gRPC-Web: those of the protocols themselves and those that
// HTTP clients and browsers send on their own (lower case).
var notMetadata = map[string]bool{
	"accept": true, "accept-encoding": true, "accept-language": true, "cache-control": true,
	"connection": true, "content-encoding": true, "content-length": true, "content-type": true,
	"cookie": true, "dnt": true, "host": true, "keep-alive": true, "origin": true, "pragma": true,
	"priority": true, "referer": true, "te": true, "trailer": true, "transfer-encoding": true,
	"upgrade": true, "user-agent": true, "x-user-agent": true, "x-grpc-web": true,
}

// connectMetadata turns request headers into Fleet metadata: every header
// but the protocols' own (Connect-*, Grpc-*, Content-*, ...) and those
// browsers add (Sec-*, Accept-*, Origin, Cookie, ...), keys lower-cased,
// a repeated key's values combined by fleet.Metadata's rule (joined with
// ", ", "," for a "-bin" key, whose values stay the base64 text sent).
// Authorization is the metadata key fleet.AuthKey.
func connectMetadata(h interface {
	All() iter.Seq2[string, []string]
}) fleet.Metadata {
	var md fleet.Metadata
	var buf [64]byte
	for k, vs := range h.All() {
		if len(vs) == 0 {
			continue
		}
		// The key is lower-cased into buf (the usual short key) and
		// checked there: a header left out costs no string.
		lk := lowerASCII(buf[:0], k)
		if notMetadata[string(lk)] || hasPrefix(lk, "connect-") || hasPrefix(lk, "grpc-") ||
			hasPrefix(lk, "sec-") || hasPrefix(lk, "access-control-") || hasPrefix(lk, "if-") {
			continue
		}
		if md == nil {
			md = make(fleet.Metadata, 4)
		}
		key := string(lk)
		md[key] = joinValues(key, vs)
	}
	return md
}

// lowerASCII appends k to dst with its ASCII letters in lower case, as
// strings.ToLower does for the ASCII header names HTTP carries (other
// bytes are kept as they are).
func lowerASCII(dst []byte, k string) []byte {
	for i := 0; i < len(k); i++ {
		c := k[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// hasPrefix reports whether b begins with prefix.
func hasPrefix(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && string(b[:len(prefix)]) == prefix
}

// httpHeaderAll adapts http.Header to connectMetadata.
type httpHeaderAll http.Header

func (h httpHeaderAll) All() iter.Seq2[string, []string] {
	return func(yield func(string, []string) bool) {
		for k, v := range h {
			if !yield(k, v) {
				return
			}
		}
	}
}

// setConnectMetadata writes response metadata into response headers (a
// unary call) or trailers (a stream): one header line per key, a combined
// value (fleet.Metadata.Add) as it is, which clients read as its list.
func setConnectMetadata(h *connect.Header, md fleet.Metadata) {
	for k, v := range md {
		h.Set(k, v)
	}
}

// ConnectCode returns the Connect (and gRPC-Web) code of a Fleet code:
// codes 1 to 16 are the same; ShuttingDown becomes Unavailable, anything
// else Unknown.
func ConnectCode(c fleet.Code) connect.Code {
	switch {
	case c >= fleet.Canceled && c <= fleet.Unauthenticated:
		return connect.Code(c)
	case c == fleet.ShuttingDown:
		return connect.CodeUnavailable
	}
	return connect.CodeUnknown
}

// connectError is a Fleet error as connect-go writes it: its code mapped
// by ConnectCode, its message intact.
func connectError(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce
	}
	return withDetails(connect.NewError(ConnectCode(fleet.CodeOf(err)), fleetMessage(err)), err)
}

// fleetFromConnect turns an error of connect-go's stream into a
// *fleet.Error with the same code.
func fleetFromConnect(err error) error {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return fleet.NewError(fleet.Code(ce.Code()), ce.Message())
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return fleet.FromContextError(err)
	}
	return fleet.WrapError(fleet.Canceled, err)
}
