package gateway

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/codec"
	"github.com/fleetrpc/fleet/internal/jsonfields"
	"github.com/fleetrpc/fleet/server"
	"github.com/fleetrpc/fleet/server/reflection"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// MetadataHeaderPrefix is the prefix of the HTTP headers that carry call
// metadata over HTTP/JSON and JSON-RPC 2.0: the request header
// "Fleet-Meta-Tenant: a" is the metadata pair "tenant" = "a" (keys are
// lower-cased, as HTTP header names are case-insensitive), and response
// metadata comes back the same way. The Authorization header is the
// metadata key fleet.AuthKey ("authorization"), the token the server's
// auth function checks.
const MetadataHeaderPrefix = "Fleet-Meta-"

// TimeoutHeader is the request header that sets an HTTP/JSON or JSON-RPC
// 2.0 call's deadline, in milliseconds (a positive integer). gRPC calls
// use grpc-timeout instead.
const TimeoutHeader = "Fleet-Timeout-Ms"

// HTTPStatus returns the HTTP status with which HTTP/JSON answers an error
// of code c; it follows the gRPC to HTTP mapping of grpc-gateway, with
// ShuttingDown as Unavailable (503) and 499 for Canceled.
func HTTPStatus(c fleet.Code) int {
	switch c {
	case fleet.OK:
		return http.StatusOK
	case fleet.Canceled:
		return 499 // client closed request (nginx)
	case fleet.InvalidArgument, fleet.FailedPrecondition, fleet.OutOfRange:
		return http.StatusBadRequest
	case fleet.DeadlineExceeded:
		return http.StatusGatewayTimeout
	case fleet.NotFound:
		return http.StatusNotFound
	case fleet.AlreadyExists, fleet.Aborted:
		return http.StatusConflict
	case fleet.PermissionDenied:
		return http.StatusForbidden
	case fleet.Unauthenticated:
		return http.StatusUnauthorized
	case fleet.ResourceExhausted:
		return http.StatusTooManyRequests
	case fleet.Unimplemented:
		return http.StatusNotImplemented
	case fleet.Unavailable, fleet.ShuttingDown:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError // Unknown, Internal, DataLoss, others
}

// errorBody is the JSON body of an HTTP/JSON error.
type errorBody struct {
	Code    fleet.Code `json:"code"`    // Fleet's (and gRPC's) numeric code
	Status  string     `json:"status"`  // the code's name, such as "not_found"
	Message string     `json:"message"` // the handler's message, intact
}

// serveHTTP routes one request of the HTTP side.
func (g *Gateway) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if ct := r.Header.Get("Content-Type"); r.ProtoMajor == 2 && strings.HasPrefix(ct, "application/grpc") {
		if !grpcCodecOK(ct) {
			// A trailers-only answer (see checkGRPCCodec).
			h := w.Header()
			h.Set("Content-Type", "application/grpc")
			h.Set("Grpc-Status", "13") // Internal
			h.Set("Grpc-Message", errGRPCCodec)
			w.WriteHeader(http.StatusOK)
			return
		}
		g.serveGRPCHTTP(w, r)
		return
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(g.opts.limits.bodyTimeout))
	w = &deadlineWriter{ResponseWriter: w, rc: rc, timeout: g.opts.limits.writeTimeout}
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		writeError(w, http.StatusMethodNotAllowed, fleet.Errorf(fleet.Unimplemented, "method %s not allowed: calls are POST requests", r.Method))
		return
	}
	if !g.browserCheck(w, r) {
		return
	}
	switch r.URL.Path {
	case "/", "/jsonrpc":
		g.serveJSONRPC(w, r)
		return
	}
	g.serveJSON(w, r)
}

// serveJSON answers POST /{service}/{method} with a JSON body.
func (g *Gateway) serveJSON(w http.ResponseWriter, r *http.Request) {
	path := strings.TrimPrefix(r.URL.Path, "/")
	svc, method, ok := strings.Cut(path, "/")
	if !ok || svc == "" || method == "" || strings.Contains(method, "/") {
		writeError(w, http.StatusNotFound, fleet.Errorf(fleet.NotFound, "path %q is not /{service}/{method}", r.URL.Path))
		return
	}
	if g.hiddenOverHTTP(svc) {
		writeError(w, http.StatusNotFound, fleet.Errorf(fleet.NotFound, "service %s is not served over HTTP by a server without auth", svc))
		return
	}
	body, status, err := g.readBody(w, r)
	if err != nil {
		writeError(w, status, err)
		return
	}
	if err := checkDepth(body, g.opts.maxDepth); err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	ctx, cancel, err := callContext(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, err)
		return
	}
	defer cancel()
	call := &server.Call{
		Route:   fleet.RouteHTTP,
		Service: svc, Method: method, Payload: body,
		Metadata: requestMetadata(r.Header), RemoteAddr: remoteAddr(r.RemoteAddr), LocalAddr: localAddr(r),
	}
	if g.opts.limits.looseJSON {
		call.Codec = jsonCodec{}
	} else {
		call.CodecFor = strictCodecFor
	}
	reply, rmd, err := g.srv.Invoke(ctx, call)
	setResponseMetadata(w.Header(), rmd)
	setResponseMetadata(w.Header(), call.Trailer) // HTTP/JSON has headers only
	if err != nil {
		writeError(w, HTTPStatus(fleet.CodeOf(err)), err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(reply)))
	_, _ = w.Write(reply)
}

// readBody reads a request body of at most the server's
// MaxDecompressedSize bytes, refusing a larger one (by its Content-Length
// before reading, or once the limit is passed) with 413.
func (g *Gateway) readBody(w http.ResponseWriter, r *http.Request) ([]byte, int, error) {
	limit := int64(g.srv.Limits().MaxDecompressedSize)
	if r.ContentLength > limit {
		return nil, http.StatusRequestEntityTooLarge, fleet.Errorf(fleet.ResourceExhausted, "body of %d bytes exceeds the limit of %d", r.ContentLength, limit)
	}
	// Size the buffer by Content-Length, up to 64 KiB: a client that
	// announces a large body must send it before more is allocated.
	n := 512
	if r.ContentLength > 0 {
		n = int(min(r.ContentLength, 64<<10))
	}
	buf := bytes.NewBuffer(make([]byte, 0, n))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, http.StatusRequestEntityTooLarge, fleet.Errorf(fleet.ResourceExhausted, "body exceeds the limit of %d bytes", limit)
		}
		return nil, http.StatusBadRequest, fleet.Errorf(fleet.InvalidArgument, "read body: %v", err)
	}
	return buf.Bytes(), 0, nil
}

// callContext returns the request's context with the deadline of the
// TimeoutHeader, if any.
func callContext(r *http.Request) (context.Context, context.CancelFunc, error) {
	ctx := r.Context()
	v := r.Header.Get(TimeoutHeader)
	if v == "" {
		return ctx, func() {}, nil
	}
	ms, err := strconv.ParseInt(v, 10, 64)
	if err != nil || ms <= 0 {
		return nil, nil, fleet.Errorf(fleet.InvalidArgument, "%s %q is not a positive number of milliseconds", TimeoutHeader, v)
	}
	c, cancel := context.WithTimeout(ctx, time.Duration(ms)*time.Millisecond)
	return c, cancel, nil
}

// requestMetadata collects the metadata headers and Authorization, a
// repeated header's values combined by fleet.Metadata's rule.
func requestMetadata(h http.Header) fleet.Metadata {
	var md fleet.Metadata
	for k, vs := range h {
		if len(vs) == 0 {
			continue
		}
		var key string
		switch {
		case len(k) > len(MetadataHeaderPrefix) && strings.EqualFold(k[:len(MetadataHeaderPrefix)], MetadataHeaderPrefix):
			key = strings.ToLower(k[len(MetadataHeaderPrefix):])
		case k == "Authorization":
			key = fleet.AuthKey
		default:
			continue
		}
		if md == nil {
			md = make(fleet.Metadata, 4)
		}
		md[key] = joinValues(key, vs)
	}
	return md
}

// setResponseMetadata writes response metadata as headers.
func setResponseMetadata(h http.Header, md fleet.Metadata) {
	for k, v := range md {
		h.Set(MetadataHeaderPrefix+k, v)
	}
}

// writeError writes an HTTP/JSON error body with status.
func writeError(w http.ResponseWriter, status int, err error) {
	code := fleet.CodeOf(err)
	msg := err.Error()
	var fe *fleet.Error
	if errors.As(err, &fe) {
		msg = fe.Message()
	}
	b, _ := json.Marshal(errorBody{Code: code, Status: code.String(), Message: msg})
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// remoteAddr parses http.Request.RemoteAddr ("ip:port") into a *net.TCPAddr;
// nil when it is not one.
func remoteAddr(s string) net.Addr {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return nil
	}
	return net.TCPAddrFromAddrPort(ap)
}

// localAddr is the connection's local address, from the request context.
func localAddr(r *http.Request) net.Addr {
	a, _ := r.Context().Value(http.LocalAddrContextKey).(net.Addr)
	return a
}

// jsonCodec decodes arguments and encodes replies for HTTP/JSON and
// JSON-RPC 2.0: protobuf messages with protojson (the canonical protobuf
// JSON mapping), everything else with encoding/json. An empty payload
// leaves the arguments at their zero value. It implements
// codec.BudgetUnmarshaler by charging an estimate up front
// (jsonDecodeFactor).
type jsonCodec struct{}

// jsonDecodeFactor is what jsonCodec.UnmarshalBudget charges the server's
// memory budget before decoding, in multiples of the JSON text's length:
// encoding/json and protojson cannot count what they allocate, so the
// charge is an estimate. encoding/json allocates about 5 to 19 times the
// text for Go structs, strings and integer slices (slice growth
// included), and up to about 40 times for text of many tiny objects
// decoded into interfaces or maps, which this factor undercounts.
const jsonDecodeFactor = 16

func (jsonCodec) Name() string { return "json" }

func (jsonCodec) Marshal(v any) ([]byte, error) {
	if m, ok := v.(proto.Message); ok {
		return protojson.Marshal(m)
	}
	return json.Marshal(v)
}

func (c jsonCodec) Unmarshal(data []byte, v any) error { return c.UnmarshalBudget(data, v, nil) }

// UnmarshalBudget charges charge (when not nil) with jsonDecodeFactor
// times the length of data, before anything is decoded, then decodes as
// Unmarshal does; an error from charge is returned unchanged. An empty
// payload charges nothing.
func (jsonCodec) UnmarshalBudget(data []byte, v any, charge func(n int64) error) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if charge != nil {
		if err := charge(jsonDecodeFactor * int64(len(data))); err != nil {
			return err
		}
	}
	if m, ok := v.(proto.Message); ok {
		return protojson.Unmarshal(data, m)
	}
	return json.Unmarshal(data, v)
}

// checkDepth fails when the JSON text nests arrays and objects deeper
// than max. It scans bytes only (strings are skipped), allocating
// nothing; malformed JSON is left to the decoder.
func checkDepth(data []byte, max int) error {
	depth := 0
	inStr, esc := false, false
	for _, c := range data {
		if inStr {
			switch {
			case esc:
				esc = false
			case c == '\\':
				esc = true
			case c == '"':
				inStr = false
			}
			continue
		}
		switch c {
		case '"':
			inStr = true
		case '[', '{':
			depth++
			if depth > max {
				return fleet.Errorf(fleet.InvalidArgument, "JSON nests deeper than %d levels", max)
			}
		case ']', '}':
			depth--
		}
	}
	return nil
}

// WithLooseJSON, when on, lets the HTTP/JSON route decode a Go-typed
// argument as encoding/json does, ignoring object keys the type has no
// field for and leaving fields the JSON omits at their zero value.
// Default off: such JSON is refused with 400 and invalid_argument naming
// the field (see strictJSONCodec). Protobuf arguments follow protojson
// either way (unknown fields and unset required fields refused), and
// JSON-RPC 2.0 is not checked.
func WithLooseJSON(on bool) Option {
	return optionFunc(func(o *options) { o.limits.looseJSON = on })
}

// strictCodecFor is the HTTP/JSON codec of a method once the pipeline
// has looked it up (after auth and admission): jsonCodec for protobuf
// arguments, strictJSONCodec for Go types.
func strictCodecFor(d server.MethodDesc) (codec.Codec, error) {
	if d.ArgType == nil || isProto(d.ArgType) {
		return jsonCodec{}, nil
	}
	return strictJSONCodec{checkerOf(d.ArgType)}, nil
}

// checkers caches the field checker of each Go argument type,
// process-wide: it depends on the type only.
var checkers sync.Map // reflect.Type -> *jsonfields.Checker

func checkerOf(t reflect.Type) *jsonfields.Checker {
	if c, ok := checkers.Load(t); ok {
		return c.(*jsonfields.Checker)
	}
	ti := reflection.DescribeType(t)
	c, _ := checkers.LoadOrStore(t, jsonfields.New(ti.JSONSchema, ti.Example))
	return c.(*jsonfields.Checker)
}

// strictJSONCodec is jsonCodec with the arguments' fields checked first,
// as `fleet call` checks them (package internal/jsonfields): an object
// key the Go type has no field for (matched as encoding/json matches:
// exactly, else ignoring case) is refused, and so is a field the JSON
// leaves out that the type's zero value encodes (omitempty fields and
// pointers may be left out), each with invalid_argument naming the field
// and where it is. An empty body still means the zero value. It
// implements codec.BudgetUnmarshaler as jsonCodec does.
type strictJSONCodec struct{ c *jsonfields.Checker }

func (strictJSONCodec) Name() string { return "json" }

func (s strictJSONCodec) Marshal(v any) ([]byte, error) { return jsonCodec{}.Marshal(v) }

func (s strictJSONCodec) Unmarshal(data []byte, v any) error { return s.UnmarshalBudget(data, v, nil) }

// UnmarshalBudget charges charge (when not nil) as jsonCodec does, before
// the fields are checked (the check decodes the text too), then checks and
// decodes as Unmarshal does.
func (s strictJSONCodec) UnmarshalBudget(data []byte, v any, charge func(n int64) error) error {
	if len(bytes.TrimSpace(data)) == 0 {
		return nil
	}
	if charge != nil {
		if err := charge(jsonDecodeFactor * int64(len(data))); err != nil {
			return err
		}
	}
	if fe := s.c.Check(data); fe != nil {
		return fleet.NewError(fleet.InvalidArgument, fe.Error())
	}
	return jsonCodec{}.UnmarshalBudget(data, v, nil)
}
