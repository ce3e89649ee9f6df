package streamrecv

import (
	"google.golang.org/protobuf/proto"

	"github.com/fleetrpc/fleet/codec"
)

// mergeOpts decodes into a message without resetting it first.
var mergeOpts = proto.UnmarshalOptions{Merge: true}

// UnmarshalNew decodes data with cd into v, which must be a freshly
// allocated, empty message (new(T)): every stream receive decodes into
// one. It gives what cd.Unmarshal gives, only cheaper for protobuf:
// proto.Unmarshal resets its target first, which for an empty message
// only costs time (about 5% of decoding the 581-byte benchmark message,
// see docs/streams.md), so a generated message is decoded with
// proto.UnmarshalOptions{Merge: true}, which skips the reset; merging into
// an empty message yields the same message. A message that also has
// vtprotobuf's generated UnmarshalVT (which codec.ProtobufCodec uses after
// a reset) is decoded with it directly, without the reset. Other codecs,
// and protobuf targets that are not generated messages, go through
// cd.Unmarshal.
func UnmarshalNew(cd codec.Codec, data []byte, v any) error {
	if _, ok := cd.(codec.ProtobufCodec); ok {
		if m, ok := v.(proto.Message); ok && m.ProtoReflect().IsValid() {
			if vt, ok := m.(vtUnmarshaler); ok {
				return vt.UnmarshalVT(data)
			}
			return mergeOpts.Unmarshal(data, m)
		}
	}
	return cd.Unmarshal(data, v)
}

// vtUnmarshaler is a message with vtprotobuf's generated decoder
// (github.com/planetscale/vtprotobuf, feature unmarshal).
type vtUnmarshaler interface {
	UnmarshalVT(data []byte) error
}
