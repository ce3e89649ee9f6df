package protocol

import (
	"encoding/binary"
	"math"

	"github.com/fleetrpc/fleet"
)

// Frame types added by protocol revision 2. A peer sends them only after
// the capability exchange (see Hello) showed that the other side knows
// them; see docs/protocol.md, "Evolution".
const (
	// TypeCancel abandons the call or stream with the header's Seq. The
	// receiver ends the handler's context; a cancel for a sequence id it
	// does not know (finished, never seen) is ignored. Payload ignored.
	TypeCancel Type = 6
	// TypeStreamOpen opens a stream: same layout as a request (service,
	// method, metadata, timeout, codec); Seq is the stream id. No payload.
	TypeStreamOpen Type = 7
	// TypeStreamData carries one message of the stream Seq, or with
	// FlagEndStream the sender's half-close (payload empty).
	TypeStreamData Type = 8
	// TypeStreamEnd ends the stream Seq from the server: Status is the
	// outcome, metadata the trailers, payload the error message.
	TypeStreamEnd Type = 9
	// TypeWindowUpdate grants the peer more send credit on the stream Seq;
	// its payload is a WindowUpdate.
	TypeWindowUpdate Type = 10

	// maxKnownType is the highest type this package knows. Parse accepts
	// higher values (receivers ignore them); 0 is malformed.
	maxKnownType = TypeWindowUpdate
)

// Flags added by revision 2.
const (
	// FlagHello marks a ping or pong whose payload is a Hello.
	FlagHello Flags = 1 << 2
	// FlagEndStream on a TypeStreamData frame: the sender's half-close;
	// it sends no more messages on the stream.
	FlagEndStream Flags = 1 << 3
)

// Known reports whether t is a type this package knows. Receivers ignore
// frames of unknown types (the length prefix lets them skip the frame).
func (t Type) Known() bool { return t >= TypeRequest && t <= maxKnownType }

// Revision is the protocol revision this package speaks inside wire
// version 1: 1 is the original protocol (no Hello), 2 adds the frames
// above. A Hello carries it.
const Revision = 2

// Capability bits of a Hello. Unknown bits are ignored; a peer uses a
// capability only when both Hellos carry it.
const (
	CapCancel  uint32 = 1 << 0 // TypeCancel is understood
	CapStreams uint32 = 1 << 1 // stream frames and TypeWindowUpdate are understood
)

// Setting identifiers of a Hello. Unknown identifiers are ignored.
const (
	// SettingStreamWindow is the initial send credit, in bytes of
	// message payload, the sender of the Hello grants per stream.
	SettingStreamWindow uint64 = 1
	// SettingMaxStreams is how many concurrent streams the sender of the
	// Hello accepts on the connection.
	SettingMaxStreams uint64 = 2
	// SettingMaxMessage is the largest stream message, in bytes, the
	// sender of the Hello accepts.
	SettingMaxMessage uint64 = 3
	// SettingConnWindow is the connection-wide send credit, in bytes of
	// stream message payload, the sender of the Hello grants across all
	// streams of the connection. It is used only when both Hellos carry
	// it; a window update with stream id 0 returns it. See
	// docs/protocol.md, "Flow control".
	SettingConnWindow uint64 = 4
)

// maxSettings bounds the settings a Hello may carry.
const maxSettings = 32

// Hello is the payload of a ping or pong with FlagHello: the client's
// first frame is such a ping, and a server that knows revision 2 answers
// with such a pong. A server of revision 1 answers a plain pong (it
// ignores the flag and the payload), which tells the client to use no
// capability. Layout:
//
//	revision (1 byte) | capabilities (uint32) | count (uvarint) |
//	count x (id uvarint, value uvarint) | bytes ignored (room to grow)
type Hello struct {
	Revision     byte
	Capabilities uint32
	// Settings by identifier; values are uvarints. Nil when none.
	Settings map[uint64]uint64
}

// AppendHello appends h's encoding to dst. Settings are written in
// ascending identifier order.
func AppendHello(dst []byte, h *Hello) []byte {
	dst = append(dst, h.Revision)
	dst = binary.BigEndian.AppendUint32(dst, h.Capabilities)
	dst = binary.AppendUvarint(dst, uint64(len(h.Settings)))
	for id := uint64(0); len(h.Settings) > 0 && id <= 64; id++ {
		if v, ok := h.Settings[id]; ok {
			dst = binary.AppendUvarint(dst, id)
			dst = binary.AppendUvarint(dst, v)
		}
	}
	return dst
}

// ParseHello parses a Hello payload. It fails with InvalidArgument
// (wrapping ErrMalformed) when the bytes are short or a varint is bad,
// and with ResourceExhausted when more than 32 settings are announced.
// Bytes after the settings are ignored.
func ParseHello(p []byte) (Hello, error) {
	var h Hello
	if len(p) < 5 {
		return h, malformed("hello shorter than 5 bytes")
	}
	h.Revision = p[0]
	h.Capabilities = binary.BigEndian.Uint32(p[1:])
	p = p[5:]
	n, k := binary.Uvarint(p)
	if k <= 0 {
		return h, malformed("bad hello settings count")
	}
	if n > maxSettings {
		return h, fleet.Errorf(fleet.ResourceExhausted, "protocol: %d hello settings exceed limit %d: %w", n, maxSettings, ErrTooLarge)
	}
	p = p[k:]
	if n > 0 {
		h.Settings = make(map[uint64]uint64, n)
	}
	for i := uint64(0); i < n; i++ {
		id, k := binary.Uvarint(p)
		if k <= 0 {
			return h, malformed("bad hello setting id")
		}
		p = p[k:]
		v, k := binary.Uvarint(p)
		if k <= 0 {
			return h, malformed("bad hello setting value")
		}
		p = p[k:]
		h.Settings[id] = v
	}
	return h, nil
}

// Setting returns the value of setting id, or def when absent or over
// max (a value over max is treated as max).
func (h *Hello) Setting(id, def, max uint64) uint64 {
	v, ok := h.Settings[id]
	if !ok || v == 0 {
		return def
	}
	return min(v, max)
}

// GoAway reasons.
const (
	GoAwayUnspecified   byte = 0 // no reason given (revision 1 peers)
	GoAwayShutdown      byte = 1 // the server is shutting down
	GoAwayProtocolError byte = 2 // the peer sent bytes that do not parse or break a limit
	GoAwayIdle          byte = 3 // the connection was idle too long
	GoAwayAck           byte = 4 // answer to the peer's go-away: nothing follows
)

// maxGoAwayMessage bounds a go-away's message.
const maxGoAwayMessage = 1024

// GoAway is the payload of a TypeGoAway frame. Revision 1 peers send and
// accept an empty payload (ParseGoAway then returns the zero GoAway with
// HasLastSeq false). Layout:
//
//	reason (1 byte) | last sequence id (uint64) | message length (uvarint) |
//	message (UTF-8, at most 1024 bytes) | bytes ignored
type GoAway struct {
	Reason byte
	// LastSeq is the highest request sequence id the sender accepted for
	// processing; requests with higher ids were not run (they were
	// refused with shutting_down or not read).
	LastSeq    uint64
	HasLastSeq bool
	Message    string
}

// AppendGoAway appends g's encoding to dst (the message cut to 1024
// bytes).
func AppendGoAway(dst []byte, g *GoAway) []byte {
	msg := g.Message
	if len(msg) > maxGoAwayMessage {
		msg = msg[:maxGoAwayMessage]
	}
	dst = append(dst, g.Reason)
	dst = binary.BigEndian.AppendUint64(dst, g.LastSeq)
	dst = binary.AppendUvarint(dst, uint64(len(msg)))
	return append(dst, msg...)
}

// ParseGoAway parses a go-away payload. An empty payload (revision 1) is
// valid. It fails with InvalidArgument wrapping ErrMalformed when the
// bytes are short, and ResourceExhausted when the message is over 1024
// bytes.
func ParseGoAway(p []byte) (GoAway, error) {
	var g GoAway
	if len(p) == 0 {
		return g, nil
	}
	if len(p) < 10 {
		return g, malformed("go-away shorter than 10 bytes")
	}
	g.Reason = p[0]
	g.LastSeq = binary.BigEndian.Uint64(p[1:])
	g.HasLastSeq = true
	msg, _, err := readBytes(p[9:], maxGoAwayMessage, "go-away message")
	if err != nil {
		return GoAway{}, err
	}
	g.Message = string(msg)
	return g, nil
}

// MaxWindow is the largest credit a window may hold, 2^31-1 bytes, as in
// HTTP/2 (RFC 9113 §6.9.1).
const MaxWindow = math.MaxInt32

// AppendWindowUpdate appends a window update payload granting inc bytes:
// a uint32, 1 to MaxWindow.
func AppendWindowUpdate(dst []byte, inc uint32) []byte {
	return binary.BigEndian.AppendUint32(dst, inc)
}

// ParseWindowUpdate parses a window update payload. It fails with
// InvalidArgument wrapping ErrMalformed when the payload is shorter than
// 4 bytes or the increment is 0 or over MaxWindow. Bytes after the first
// four are ignored.
func ParseWindowUpdate(p []byte) (uint32, error) {
	if len(p) < 4 {
		return 0, malformed("window update shorter than 4 bytes")
	}
	inc := binary.BigEndian.Uint32(p)
	if inc == 0 || inc > MaxWindow {
		return 0, malformed("window increment out of range")
	}
	return inc, nil
}

// AppendControl appends a frame with no names, metadata or codec: pings,
// pongs, go-aways, cancels and window updates. It cannot fail for
// payloads under DefaultMaxFrameSize.
func AppendControl(dst []byte, t Type, flags Flags, seq uint64, payload []byte) []byte {
	out, err := AppendFrame(dst, &Header{Type: t, Flags: flags, Seq: seq}, "", "", nil, payload, 0)
	if err != nil {
		return dst
	}
	return out
}
