// Package codec turns call arguments and replies into payload bytes and
// back.
//
// A Codec has a Name, a Marshal and an Unmarshal. Every frame names the
// codec of its payload with a one-byte ID; Get looks the codec up in a
// fixed table without allocating, and Register fills the table. Codecs that
// can encode straight into a caller's buffer also implement Appender, which
// MarshalAppend uses when present, saving a copy and an allocation on the
// hot path.
//
// # Built-in codecs
//
// The codecs below are registered by this package's init function.
//
//	ID  constant  Name        type           encodes
//	0   Raw       "raw"       RawCodec       []byte / *[]byte, unchanged
//	1   JSON      "json"      JSONCodec      any value, with encoding/json
//	2   Protobuf  "protobuf"  ProtobufCodec  proto.Message values (binary wire format)
//	3   MsgPack   "msgpack"   MsgPackCodec   any value, with github.com/vmihailenco/msgpack/v5
//	4   Gob       "gob"       GobCodec       any value, one encoding/gob stream per value
//
// All five implement Appender, are zero-size structs whose zero value is
// ready to use, and are safe for concurrent use. Unmarshal never retains
// the data slice, because the caller reuses its buffer; RawCodec therefore
// copies. A value of a type a codec cannot handle yields an error made by
// ErrUnsupported; malformed input yields an error naming the codec. No
// codec panics on bad input.
//
// Protobuf is the fastest and the one to use across languages. JSON suits
// callers over HTTP; MsgPack is a compact schemaless alternative; Gob is
// for Go-only peers that already use net/rpc types.
//
// # Registering your own codec
//
// IDs 0–31 are reserved for Fleet; use 32–255 for your own. Register the
// codec on both the client and the server, at init time:
//
//	const CBOR codec.ID = 32
//
//	type cborCodec struct{}
//
//	func (cborCodec) Name() string                       { return "cbor" }
//	func (cborCodec) Marshal(v any) ([]byte, error)      { return cbor.Marshal(v) }
//	func (cborCodec) Unmarshal(b []byte, v any) error    { return cbor.Unmarshal(b, v) }
//
//	func init() { codec.Register(CBOR, cborCodec{}) }
//
// A codec must be safe for concurrent use, must not retain the data passed
// to Unmarshal, and must return an error rather than panic on bad input.
// Registering under a used ID replaces the codec there, which is how a
// built-in codec is swapped for another implementation of the same format.
//
// # Owns and imports
//
// This package owns payload encodings and their one-byte IDs. It must not
// import any other Fleet package (not even the root package), so that any
// package can use a codec; the root package's TestPackageImports checks
// this.
package codec
