package fleet

import (
	"context"
	"iter"
	"net"
	"sync/atomic"

	"github.com/fleetrpc/fleet/internal/ctxkey"
)

// Metadata is a call's string key/value pairs, sent beside the payload in
// both directions (request metadata from client to server, response
// metadata back). Keys are case-sensitive. A Metadata is not safe for
// concurrent mutation.
//
// Keys that begin with "fleet-" are reserved for the framework.
//
// One value per key: a key that arrives more than once holds its values
// combined into one, in the order they arrived, by HTTP's field-combination
// rule (RFC 9110, section 5.3): joined with ", ". The gateway's routes
// (gRPC, Connect, gRPC-Web, HTTP/JSON, JSON-RPC) combine request headers
// so, and Add, AddResponseMetadata and AddResponseTrailer append so; the
// gateway writes such a value as one header line, which by HTTP's rule
// means the same as one line per value (grpc-go and connect-go clients
// see the one combined value). A value holding ", " of its own cannot be
// told apart from two values, as in HTTP. Keys ending in
// "-bin" (gRPC's binary headers) hold their values as base64 text on
// every gateway route (gRPC's own encoding: the gRPC route encodes the
// bytes grpc-go decoded with base64.RawStdEncoding and decodes a
// response's before handing them to grpc-go), so that repeated ones are
// joined with "," (no space) into gRPC's comma-separated form, never as
// raw bytes. On the native protocol a key sent twice (AppendOutgoingMetadata)
// keeps its last value: there a later pair overrides, it does not add.
type Metadata map[string]string

// Add appends value to key's value: key is set to value when md has no
// such key, else to the old value, ", " and value (for a key ending in
// "-bin", "," and value, the base64 values in gRPC's comma-separated form).
// md must not be nil.
func (md Metadata) Add(key, value string) {
	old, ok := md[key]
	if !ok {
		md[key] = value
		return
	}
	md[key] = old + MetadataSeparator(key) + value
}

// MetadataSeparator returns what joins the values of a key that holds
// more than one (see Metadata): "," for a key ending in "-bin" (gRPC's
// binary headers, base64 values), ", " otherwise (RFC 9110, section 5.3).
func MetadataSeparator(key string) string {
	if IsBinaryKey(key) {
		return ","
	}
	return ", "
}

// IsBinaryKey reports whether key names a gRPC binary header: it ends in
// "-bin" (in any case), and its value is base64 text.
func IsBinaryKey(key string) bool {
	n := len(key)
	return n >= 4 && key[n-4] == '-' && (key[n-3]|0x20) == 'b' && (key[n-2]|0x20) == 'i' && (key[n-1]|0x20) == 'n'
}

// Clone returns a copy of md; nil for nil.
func (md Metadata) Clone() Metadata {
	if md == nil {
		return nil
	}
	c := make(Metadata, len(md))
	for k, v := range md {
		c[k] = v
	}
	return c
}

// AuthKey is the metadata key that carries a caller's credential token,
// checked by a server's auth function before any handler runs.
const AuthKey = "authorization"

type outgoingKey struct{}

// outgoing is the request metadata a context carries: md, then kv's pairs
// (alternating keys and values), later pairs winning. Neither is modified
// once stored.
type outgoing struct {
	md Metadata
	kv []string
}

func outgoingFrom(ctx context.Context) outgoing {
	if o, ok := ctx.Value(outgoingKey{}).(*outgoing); ok {
		return *o
	}
	return outgoing{}
}

// outgoingCtx is a context carrying request metadata: what
// context.WithValue(ctx, outgoingKey{}, &o) would make, in one allocation
// instead of two (the value and the context), as Value answers a pointer
// into the context itself.
type outgoingCtx struct {
	context.Context
	o outgoing
}

func withOutgoing(ctx context.Context, o outgoing) context.Context {
	return &outgoingCtx{Context: ctx, o: o}
}

// outgoingPairCtx is an outgoingCtx whose appended pairs are one pair held
// in the same allocation, so that the caller's slice is not kept.
type outgoingPairCtx struct {
	outgoingCtx
	pair [2]string
}

func (c *outgoingCtx) Value(key any) any {
	if key == (outgoingKey{}) {
		return &c.o
	}
	return c.Context.Value(key)
}

func (c *outgoingCtx) String() string {
	if s, ok := c.Context.(interface{ String() string }); ok {
		return s.String() + ".WithOutgoingMetadata"
	}
	return "context.WithOutgoingMetadata"
}

// merged returns o as one new map, or nil when it is empty.
func (o outgoing) merged(extra int) Metadata {
	if len(o.md) == 0 && len(o.kv) == 0 && extra == 0 {
		return nil
	}
	m := make(Metadata, len(o.md)+len(o.kv)/2+extra)
	for k, v := range o.md {
		m[k] = v
	}
	for i := 0; i < len(o.kv); i += 2 {
		m[o.kv[i]] = o.kv[i+1]
	}
	return m
}

// WithOutgoingMetadata returns a context whose calls send md as request
// metadata, merged over any metadata already attached to ctx (keys in md
// win). The map is copied; md may be reused after the call.
func WithOutgoingMetadata(ctx context.Context, md Metadata) context.Context {
	m := outgoingFrom(ctx).merged(len(md))
	for k, v := range md {
		m[k] = v
	}
	return withOutgoing(ctx, outgoing{md: m})
}

// AppendOutgoingMetadata is WithOutgoingMetadata for pairs given as
// alternating keys and values (k1, v1, k2, v2, ...), later ones winning
// over earlier ones and over the metadata already attached to ctx. It
// makes no map: the context keeps kv itself (or, when ctx already carries
// appended pairs, one new slice holding both), and the client writes the
// pairs to the request as they are. kv must not be modified after the
// call, except when it is a single pair appended to a context without
// appended pairs: that pair is copied into the context's own allocation
// (the common case of a trace context interceptor, one allocation in all).
// Interceptors that add a few keys on every call (trace context) use it.
// It panics if kv has an odd length, a programming error.
func AppendOutgoingMetadata(ctx context.Context, kv ...string) context.Context {
	if len(kv)%2 != 0 {
		panic("fleet: AppendOutgoingMetadata: odd number of strings")
	}
	o := outgoingFrom(ctx)
	if len(kv) == 2 && len(o.kv) == 0 {
		c := &outgoingPairCtx{outgoingCtx: outgoingCtx{Context: ctx, o: o}}
		c.pair = [2]string{kv[0], kv[1]}
		c.o.kv = c.pair[:]
		return c
	}
	if len(o.kv) > 0 {
		all := make([]string, 0, len(o.kv)+len(kv))
		kv = append(append(all, o.kv...), kv...)
	}
	o.kv = kv
	return withOutgoing(ctx, o)
}

// OutgoingMetadata returns the request metadata attached to ctx by
// WithOutgoingMetadata and AppendOutgoingMetadata, or nil. The returned map
// must not be modified. When ctx carries appended pairs it is a new map
// each time; OutgoingPairs reads the same without making one.
func OutgoingMetadata(ctx context.Context) Metadata {
	o := outgoingFrom(ctx)
	if len(o.kv) == 0 {
		return o.md
	}
	return o.merged(0)
}

// OutgoingPairs returns the request metadata attached to ctx as the client
// writes it to a request: the pairs of md (nil when none), then kv's
// (alternating keys and values), a later pair winning over an earlier one
// with the same key, as the server reads them. Neither may be modified. It
// allocates nothing.
func OutgoingPairs(ctx context.Context) (md Metadata, kv []string) {
	o := outgoingFrom(ctx)
	return o.md, o.kv
}

// LookupOutgoing returns the value of key in the request metadata attached
// to ctx (the last one written when appended pairs repeat it) and whether
// it is there.
func LookupOutgoing(ctx context.Context, key string) (string, bool) {
	o := outgoingFrom(ctx)
	for i := len(o.kv) - 2; i >= 0; i -= 2 {
		if o.kv[i] == key {
			return o.kv[i+1], true
		}
	}
	v, ok := o.md[key]
	return v, ok
}

// WithResponseMetadata returns a context whose next call stores the
// response metadata the server sent into *dst (replacing its value; nil
// when the server sent none). dst is written before the call returns and
// must not be read concurrently with the call.
func WithResponseMetadata(ctx context.Context, dst *Metadata) context.Context {
	return context.WithValue(ctx, ctxkey.ResponseSink{}, dst)
}

// CallInfo describes the call a server handler is running. Server
// implementations attach it to the handler's context; handlers read it
// with CallInfoFrom and may set response metadata through it.
//
// A CallInfo belongs to one call; its methods are safe to use from the
// handler's goroutines only until the handler returns.
//
// The request metadata is read with Metadata (a map, made on first use)
// or MetadataValue (one key, no map): a server keeps it in its wire form
// until asked, so a call whose metadata only an auth check or a trace
// propagator reads costs no map.
type CallInfo struct {
	Service    string   // service name as the client sent it
	Method     string   // method name as the client sent it
	RemoteAddr net.Addr // the caller's address
	LocalAddr  net.Addr // the server's address for this connection
	Oneway     bool     // the caller expects no response
	Route      Route    // how the call reached the server (RouteNative, RouteGRPC, ...)

	// ResponseMetadata is sent back to the caller with the response. Set
	// it with SetResponseMetadata. Over gRPC, Connect and gRPC-Web (the
	// gateway) it is the response's headers: a stream's goes out before
	// its first message (see docs/streams.md).
	ResponseMetadata Metadata
	// ResponseTrailer is sent back after the response: set it with
	// SetResponseTrailer. The gateway sends it as gRPC or Connect
	// trailers; the native protocol has one metadata section per
	// response, so there it is merged into ResponseMetadata (a key in
	// both gets the trailer's value).
	ResponseTrailer Metadata

	md    atomic.Pointer[Metadata] // the map, once made or set
	wire  string                   // or the metadata section in wire form
	wireN int                      // and its number of pairs
}

// Metadata returns the request metadata, or nil when the client sent
// none. The first call makes the map (a key the client repeated keeps its
// last value); later calls return the same map, which must not be
// modified. Safe for concurrent use.
func (ci *CallInfo) Metadata() Metadata {
	if p := ci.md.Load(); p != nil {
		return *p
	}
	if ci.wireN == 0 {
		return nil
	}
	m := make(Metadata, ci.wireN)
	for k, v := range wirePairs(ci.wire, ci.wireN) {
		m[k] = v
	}
	if ci.md.CompareAndSwap(nil, &m) {
		return m
	}
	return *ci.md.Load()
}

// MetadataValue returns the value of key in the request metadata (the
// last one when the client repeated the key) and whether it is there. It
// makes no map. Safe for concurrent use.
func (ci *CallInfo) MetadataValue(key string) (string, bool) {
	if p := ci.md.Load(); p != nil {
		v, ok := (*p)[key]
		return v, ok
	}
	var v string
	var ok bool
	for k, val := range wirePairs(ci.wire, ci.wireN) {
		if k == key {
			v, ok = val, true
		}
	}
	return v, ok
}

// MetadataLen returns the number of request metadata pairs: as sent (a
// repeated key counted each time) until Metadata is called, the map's size
// after.
func (ci *CallInfo) MetadataLen() int {
	if p := ci.md.Load(); p != nil {
		return len(*p)
	}
	return ci.wireN
}

// SetMetadata sets the request metadata to md, which is kept, not copied.
// It is for code that builds a CallInfo for a call it is about to run (a
// server, a gateway); it must not be called once the call runs.
func (ci *CallInfo) SetMetadata(md Metadata) {
	ci.wire, ci.wireN = "", 0
	if md == nil {
		ci.md.Store(nil)
		return
	}
	ci.md.Store(&md)
}

// SetWireMetadata sets the request metadata to the n pairs of section in
// Fleet's wire form (docs/protocol.md, "Metadata": each key, then its
// value, as a uvarint byte length followed by the bytes), which the caller
// has validated (protocol.Parse does; protocol.Frame.MetadataSection
// returns it). The map is made only if Metadata is called. Like
// SetMetadata, it is for the code that builds the CallInfo.
func (ci *CallInfo) SetWireMetadata(section string, n int) {
	ci.md.Store(nil)
	ci.wire, ci.wireN = section, n
}

// wirePairs yields the n pairs of a validated metadata section, in order.
func wirePairs(s string, n int) iter.Seq2[string, string] {
	return func(yield func(k, v string) bool) {
		for i := 0; i < n; i++ {
			var k, v string
			k, s = wireString(s)
			v, s = wireString(s)
			if !yield(k, v) {
				return
			}
		}
	}
}

// wireString reads a uvarint length and that many bytes from a validated
// section.
func wireString(s string) (string, string) {
	var n uint64
	var shift uint
	i := 0
	for ; i < len(s); i++ {
		b := s[i]
		n |= uint64(b&0x7F) << shift
		if b < 0x80 {
			i++
			break
		}
		shift += 7
	}
	return s[i : i+int(n)], s[i+int(n):]
}

// CallInfoFrom returns the *CallInfo of the call ctx belongs to, or nil
// outside a server handler.
func CallInfoFrom(ctx context.Context) *CallInfo {
	ci, _ := ctx.Value(ctxkey.CallInfo{}).(*CallInfo)
	return ci
}

// IncomingMetadata returns the request metadata of the call ctx belongs to,
// or nil. The returned map must not be modified.
func IncomingMetadata(ctx context.Context) Metadata {
	if ci := CallInfoFrom(ctx); ci != nil {
		return ci.Metadata()
	}
	return nil
}

// PeerAddr returns the caller's address of the call ctx belongs to, or nil.
func PeerAddr(ctx context.Context) net.Addr {
	if ci := CallInfoFrom(ctx); ci != nil {
		return ci.RemoteAddr
	}
	return nil
}

// SetResponseMetadata sets key to value in the response metadata of the
// call ctx belongs to. It reports false outside a server handler.
func SetResponseMetadata(ctx context.Context, key, value string) bool {
	ci := CallInfoFrom(ctx)
	if ci == nil {
		return false
	}
	if ci.ResponseMetadata == nil {
		ci.ResponseMetadata = make(Metadata, 2)
	}
	ci.ResponseMetadata[key] = value
	return true
}

// AddResponseMetadata appends value to key in the response metadata of
// the call ctx belongs to, as Metadata.Add does (joined with ", " to a
// value already set; "," for a "-bin" key): a header sent with several
// values. It reports false outside a server handler. Like
// SetResponseMetadata, it is not safe for concurrent use on one call.
func AddResponseMetadata(ctx context.Context, key, value string) bool {
	ci := CallInfoFrom(ctx)
	if ci == nil {
		return false
	}
	if ci.ResponseMetadata == nil {
		ci.ResponseMetadata = make(Metadata, 2)
	}
	ci.ResponseMetadata.Add(key, value)
	return true
}

// AddResponseTrailer is AddResponseMetadata for the response trailer
// (see SetResponseTrailer). In a stream handler it joins the stream's
// ResponseTrailer when the handler returns (a key set both ways gets the
// stream's values first).
func AddResponseTrailer(ctx context.Context, key, value string) bool {
	ci := CallInfoFrom(ctx)
	if ci == nil {
		return false
	}
	if ci.ResponseTrailer == nil {
		ci.ResponseTrailer = make(Metadata, 2)
	}
	ci.ResponseTrailer.Add(key, value)
	return true
}

// SetResponseTrailer sets key to value in the response trailer of the
// call ctx belongs to (CallInfo.ResponseTrailer: gRPC and Connect
// trailers through the gateway, merged into the response metadata on the
// native protocol; in a stream handler it joins the stream's
// ResponseTrailer when the handler returns, as AddResponseTrailer does).
// It reports false outside a server handler. Like SetResponseMetadata,
// it is not safe for concurrent use on one call.
func SetResponseTrailer(ctx context.Context, key, value string) bool {
	ci := CallInfoFrom(ctx)
	if ci == nil {
		return false
	}
	if ci.ResponseTrailer == nil {
		ci.ResponseTrailer = make(Metadata, 2)
	}
	ci.ResponseTrailer[key] = value
	return true
}
