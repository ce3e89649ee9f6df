package codec

import (
	"fmt"

	"google.golang.org/protobuf/proto"
)

// ProtobufCodec is the codec registered under Protobuf. It encodes
// proto.Message values (google.golang.org/protobuf) in the protobuf binary
// wire format, so payloads interoperate with protobuf in any language.
// Values that are not a proto.Message yield an error built on
// ErrUnsupported. Marshal fails when a proto2 required field is missing;
// Unmarshal resets the target first and fails on malformed input or a
// missing required field. Decoding never retains data. It implements
// Appender. The zero value is ready to use and safe for concurrent use.
type ProtobufCodec struct{}

// Name returns "protobuf".
func (ProtobufCodec) Name() string { return "protobuf" }

// Marshal returns the wire encoding of v, which must be a proto.Message.
func (c ProtobufCodec) Marshal(v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return nil, c.notMessage(v)
	}
	return proto.Marshal(m)
}

// MarshalAppend appends the wire encoding of v, a proto.Message, to dst with
// proto.MarshalOptions.MarshalAppend. On error dst is returned unchanged.
func (c ProtobufCodec) MarshalAppend(dst []byte, v any) ([]byte, error) {
	m, ok := v.(proto.Message)
	if !ok {
		return dst, c.notMessage(v)
	}
	out, err := proto.MarshalOptions{}.MarshalAppend(dst, m)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// Unmarshal decodes data into v, which must be a non-nil pointer to a
// generated message (a proto.Message).
func (c ProtobufCodec) Unmarshal(data []byte, v any) error {
	m, ok := v.(proto.Message)
	if !ok {
		return c.notMessage(v)
	}
	if !m.ProtoReflect().IsValid() {
		return fmt.Errorf("codec protobuf: Unmarshal into nil %T", v)
	}
	return proto.Unmarshal(data, m)
}

func (c ProtobufCodec) notMessage(v any) error {
	return fmt.Errorf("%w (want a proto.Message)", ErrUnsupported(c.Name(), v))
}
