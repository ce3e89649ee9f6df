package gateway

import (
	"fmt"
	"reflect"

	"github.com/fleetrpc/fleet"
)

// decodeMul is the default bound on what decoding one Go-typed gRPC
// request may allocate, in multiples of the server's
// Limits.MaxDecompressedSize (see maxDecodeCost).
const decodeMul = 8

// maxSizeHint bounds the capacity a reply's buffer starts with (the last
// reply's length), in bytes.
const maxSizeHint = 64 << 10

// maxDecodeCost returns the bound on the bytes decoding one Go-typed gRPC
// request may allocate: WithMaxDecodeCost, else decodeMul times the
// server's Limits.MaxDecompressedSize (32 MiB with the 4 MiB default).
func (g *Gateway) maxDecodeCost() int64 {
	if g.opts.maxDecodeCost > 0 {
		return g.opts.maxDecodeCost
	}
	return decodeMul * int64(g.srv.Limits().MaxDecompressedSize)
}

// goCodec is the codec.Codec of one gRPC call of a Go-typed method, handed
// to Server.Invoke: Unmarshal decodes the request's protobuf wire bytes
// straight into the method's argument (decodeWire: allocations counted
// against limit, nesting bounded by maxDepth) and Marshal encodes the
// reply straight into wire bytes (appendWire), both following the
// synthesized messages that reflection describes. It also implements
// codec.Appender and codec.BudgetUnmarshaler (Invoke then charges what
// decoding counts to the server's memory budget as it goes). A goCodec serves one call: err keeps Unmarshal's error,
// whose code (ResourceExhausted or InvalidArgument) is the call's.
type goCodec struct {
	args, reply *goMessage
	limit       int64
	maxDepth    int
	err         error
}

// Name returns "protobuf": the payload is protobuf wire format.
func (*goCodec) Name() string { return "protobuf" }

// Unmarshal decodes data into v, a *A of the method's argument type A. It
// keeps nothing of data.
func (c *goCodec) Unmarshal(data []byte, v any) error { return c.UnmarshalBudget(data, v, nil) }

// UnmarshalBudget is Unmarshal that charges charge (when not nil) with
// the bytes decoding counts (see decodeWire) before it allocates them, in
// steps of at least 8 KiB and within the codec's limit; an error from
// charge stops the decoding and is returned unchanged.
func (c *goCodec) UnmarshalBudget(data []byte, v any, charge func(n int64) error) error {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Type().Elem() != c.args.wire.goType {
		c.err = fleet.Errorf(fleet.Internal, "gateway: cannot decode %s into %T", c.args.wire.goType, v)
		return c.err
	}
	if _, err := decodeWireBudget(c.args.wire, data, rv.Elem(), c.limit, c.maxDepth, charge); err != nil {
		c.err = err
		return err
	}
	return nil
}

// Marshal encodes v, a *R of the method's reply type R.
func (c *goCodec) Marshal(v any) ([]byte, error) { return c.MarshalAppend(nil, v) }

// MarshalAppend appends the encoding of v, a *R of the method's reply type
// R, to dst.
func (c *goCodec) MarshalAppend(dst []byte, v any) ([]byte, error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() || rv.Type().Elem() != c.reply.wire.goType {
		return dst, fmt.Errorf("gateway: cannot encode %T as %s", v, c.reply.wire.goType)
	}
	w := c.reply.wire
	if n := w.lastSize.Load(); dst == nil && n <= maxSizeHint {
		// One allocation of the size the last reply took, instead of
		// growing from nothing (not for large replies: one of them must
		// not make every later one allocate as much).
		dst = make([]byte, 0, n)
	}
	b, err := appendWire(w, dst, rv.Elem())
	if err != nil {
		return dst, err
	}
	w.lastSize.Store(int64(len(b) - len(dst)))
	return b, nil
}
