package codec

import "google.golang.org/protobuf/proto"

// For returns the codec ID that suits v when the caller chose none:
// Protobuf for a proto.Message, Raw for []byte and *[]byte, MsgPack for
// anything else. It does not allocate.
func For(v any) ID {
	switch v.(type) {
	case proto.Message:
		return Protobuf
	case []byte, *[]byte:
		return Raw
	}
	return MsgPack
}
