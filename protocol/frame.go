package protocol

import (
	"encoding/binary"
	"errors"
	"math"
	"unsafe"

	"github.com/fleetrpc/fleet"
)

// Magic is the two bytes that open every frame header, 0xF1 0xEE.
const Magic uint16 = 0xF1EE

// Version is the protocol version this package writes and accepts.
const Version byte = 1

// PrefixSize is the size of the length prefix; HeaderSize the size of the
// length prefix plus the fixed header.
const (
	PrefixSize = 4
	HeaderSize = 24
)

// minBody is the smallest body (bytes after the prefix): the fixed header
// and three one-byte varints (empty service, method, metadata).
const minBody = HeaderSize - PrefixSize + 3

// Type is a frame's message type.
type Type byte

// The message types.
const (
	TypeRequest  Type = 1 // a call; answered by a Response unless FlagOneway is set
	TypeResponse Type = 2 // the answer to the Request with the same Seq
	TypePing     Type = 3 // heartbeat; answered by a Pong with the same Seq
	TypePong     Type = 4 // heartbeat answer
	TypeGoAway   Type = 5 // the sender is shutting down: send no new requests
)

// Flags are a frame's option bits.
type Flags byte

// The flags.
const (
	FlagOneway     Flags = 1 << 0 // request expects no response
	FlagCompressed Flags = 1 << 1 // payload is compressed with the header's Compression
	// FlagSole on a request: when the caller sent it, it was the only call
	// the caller had outstanding on the connection (a serial caller). A
	// hint that a peer may ignore: a server runs such a call on its
	// reading goroutine when nothing else runs, and writes the response
	// without waiting to coalesce it with others.
	FlagSole Flags = 1 << 4
)

// Header is a frame's fixed header.
type Header struct {
	Type        Type
	Flags       Flags
	Codec       byte   // codec.ID of the payload
	Compression byte   // compress.ID of the payload when FlagCompressed is set
	Status      byte   // fleet.Code of a response; 0 in requests
	Seq         uint64 // sequence id chosen by the requester, echoed in the response
	// Timeout is the time the caller still waits, in milliseconds, rounded
	// up; 0 means no deadline. Only meaningful in requests.
	Timeout uint32
}

// Frame is a parsed frame. Its byte slices point into the buffer it was
// parsed from and are valid only as long as that buffer is.
type Frame struct {
	Header
	Service []byte
	Method  []byte
	Payload []byte
	mdCount int
	md      []byte
}

// Limits bound what a peer may make us allocate. The zero value of any
// field means its default. Limits are plain values, safe to share.
type Limits struct {
	// MaxFrameSize caps a frame's size after the length prefix, in bytes.
	// Default 4 MiB.
	MaxFrameSize int
	// MaxDecompressedSize caps a payload's size after decompression, in
	// bytes. Default 4 MiB.
	MaxDecompressedSize int
	// MaxMetadataCount caps the number of metadata pairs. Default 64.
	MaxMetadataCount int
	// MaxMetadataSize caps the total bytes of metadata keys and values.
	// Default 16 KiB.
	MaxMetadataSize int
	// MaxNameSize caps the service and the method name, each, in bytes.
	// Default 256.
	MaxNameSize int
}

// Defaults of Limits.
const (
	DefaultMaxFrameSize        = 4 << 20
	DefaultMaxDecompressedSize = 4 << 20
	DefaultMaxMetadataCount    = 64
	DefaultMaxMetadataSize     = 16 << 10
	DefaultMaxNameSize         = 256
)

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits {
	if l.MaxFrameSize <= 0 {
		l.MaxFrameSize = DefaultMaxFrameSize
	}
	if l.MaxFrameSize > math.MaxUint32 {
		l.MaxFrameSize = math.MaxUint32
	}
	if l.MaxDecompressedSize <= 0 {
		l.MaxDecompressedSize = DefaultMaxDecompressedSize
	}
	if l.MaxMetadataCount <= 0 {
		l.MaxMetadataCount = DefaultMaxMetadataCount
	}
	if l.MaxMetadataSize <= 0 {
		l.MaxMetadataSize = DefaultMaxMetadataSize
	}
	if l.MaxNameSize <= 0 {
		l.MaxNameSize = DefaultMaxNameSize
	}
	return l
}

// ErrTooLarge is wrapped by errors for a frame, name or metadata section
// over its limit; ErrMalformed by errors for bytes that do not parse.
var (
	ErrTooLarge  = errors.New("over limit")
	ErrMalformed = errors.New("malformed frame")
)

func tooLarge(what string, n, max int) error {
	return fleet.Errorf(fleet.ResourceExhausted, "protocol: %s of %d bytes exceeds limit %d: %w", what, n, max, ErrTooLarge)
}

func malformed(why string) error {
	return fleet.Errorf(fleet.InvalidArgument, "protocol: %s: %w", why, ErrMalformed)
}

// BeginFrame appends a frame's length prefix (a placeholder), header,
// names and metadata to dst and returns the extended slice and the offset
// at which the frame starts. The caller appends the payload and then calls
// EndFrame. md's pairs are written in map order, then kv's (alternating
// keys and values, as fleet.OutgoingPairs returns them); a reader keeps
// the last value of a repeated key.
func BeginFrame(dst []byte, h *Header, service, method string, md fleet.Metadata, kv ...string) ([]byte, int) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0,
		byte(Magic>>8), byte(Magic&0xFF), Version, byte(h.Type), byte(h.Flags),
		h.Codec, h.Compression, h.Status)
	dst = binary.BigEndian.AppendUint64(dst, h.Seq)
	dst = binary.BigEndian.AppendUint32(dst, h.Timeout)
	dst = binary.AppendUvarint(dst, uint64(len(service)))
	dst = append(dst, service...)
	dst = binary.AppendUvarint(dst, uint64(len(method)))
	dst = append(dst, method...)
	dst = binary.AppendUvarint(dst, uint64(len(md)+len(kv)/2))
	for k, v := range md {
		dst = appendPair(dst, k, v)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		dst = appendPair(dst, kv[i], kv[i+1])
	}
	return dst, start
}

func appendPair(dst []byte, k, v string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(k)))
	dst = append(dst, k...)
	dst = binary.AppendUvarint(dst, uint64(len(v)))
	return append(dst, v...)
}

// EndFrame writes the length prefix of the frame that starts at start in
// buf. It fails with ResourceExhausted when the frame is over maxFrame
// bytes (0 means DefaultMaxFrameSize), in which case the frame must not be
// sent.
func EndFrame(buf []byte, start, maxFrame int) error {
	if maxFrame <= 0 {
		maxFrame = DefaultMaxFrameSize
	}
	n := len(buf) - start - PrefixSize
	if n > maxFrame {
		return tooLarge("frame", n, maxFrame)
	}
	binary.BigEndian.PutUint32(buf[start:], uint32(n))
	return nil
}

// AppendFrame appends a whole frame to dst. It fails as EndFrame does,
// returning dst unchanged.
func AppendFrame(dst []byte, h *Header, service, method string, md fleet.Metadata, payload []byte, maxFrame int) ([]byte, error) {
	out, start := BeginFrame(dst, h, service, method, md)
	out = append(out, payload...)
	if err := EndFrame(out, start, maxFrame); err != nil {
		return dst, err
	}
	return out, nil
}

// FrameSize checks a length prefix against the limits and returns the body
// size it announces.
func FrameSize(prefix [PrefixSize]byte, l *Limits) (int, error) {
	n := int(binary.BigEndian.Uint32(prefix[:]))
	if n > l.MaxFrameSize {
		return 0, tooLarge("frame", n, l.MaxFrameSize)
	}
	if n < minBody {
		return 0, malformed("frame shorter than its header")
	}
	return n, nil
}

// Parse parses a frame body (the bytes after the length prefix) under the
// limits, which must have their defaults applied (Limits.WithDefaults). It
// does not copy: the Frame's slices point into body.
func Parse(body []byte, l *Limits) (Frame, error) {
	var f Frame
	if len(body) > l.MaxFrameSize {
		return f, tooLarge("frame", len(body), l.MaxFrameSize)
	}
	if len(body) < minBody {
		return f, malformed("frame shorter than its header")
	}
	if binary.BigEndian.Uint16(body) != Magic {
		return f, malformed("bad magic")
	}
	if body[2] != Version {
		return f, malformed("unsupported version")
	}
	f.Type = Type(body[3])
	if f.Type == 0 {
		// Types above the known ones parse (their receivers ignore them,
		// see Type.Known); 0 is never valid.
		return f, malformed("message type 0")
	}
	f.Flags = Flags(body[4])
	f.Codec = body[5]
	f.Compression = body[6]
	f.Status = body[7]
	f.Seq = binary.BigEndian.Uint64(body[8:])
	f.Timeout = binary.BigEndian.Uint32(body[16:])
	p := body[HeaderSize-PrefixSize:]

	var err error
	if f.Service, p, err = readBytes(p, l.MaxNameSize, "service name"); err != nil {
		return f, err
	}
	if f.Method, p, err = readBytes(p, l.MaxNameSize, "method name"); err != nil {
		return f, err
	}
	count, n := binary.Uvarint(p)
	if n <= 0 {
		return f, malformed("bad metadata count")
	}
	if count > uint64(l.MaxMetadataCount) {
		return f, fleet.Errorf(fleet.ResourceExhausted, "protocol: %d metadata pairs exceed limit %d: %w", count, l.MaxMetadataCount, ErrTooLarge)
	}
	p = p[n:]
	mdStart := p
	total := 0
	for i := 0; i < int(count); i++ {
		var k, v []byte
		if k, p, err = readBytes(p, l.MaxMetadataSize, "metadata key"); err != nil {
			return f, err
		}
		if v, p, err = readBytes(p, l.MaxMetadataSize, "metadata value"); err != nil {
			return f, err
		}
		total += len(k) + len(v)
		if total > l.MaxMetadataSize {
			return f, tooLarge("metadata", total, l.MaxMetadataSize)
		}
	}
	f.mdCount = int(count)
	f.md = mdStart[:len(mdStart)-len(p)]
	f.Payload = p
	return f, nil
}

// readBytes reads a uvarint length and that many bytes.
func readBytes(p []byte, max int, what string) ([]byte, []byte, error) {
	n, k := binary.Uvarint(p)
	if k <= 0 {
		return nil, p, malformed("bad " + what + " length")
	}
	if n > uint64(max) {
		return nil, p, tooLarge(what, int(min(n, math.MaxInt32)), max)
	}
	p = p[k:]
	if uint64(len(p)) < n {
		return nil, p, malformed(what + " runs past the frame")
	}
	return p[:n:n], p[n:], nil
}

// MetadataLen returns the number of metadata pairs in the frame.
func (f *Frame) MetadataLen() int { return f.mdCount }

// RangeMetadata calls fn for each metadata pair in wire order until fn
// returns false. The slices are valid as long as the frame's buffer.
func (f *Frame) RangeMetadata(fn func(k, v []byte) bool) {
	p := f.md
	for i := 0; i < f.mdCount; i++ {
		// Parse validated the section, so these reads cannot fail.
		kl, n := binary.Uvarint(p)
		k := p[n : n+int(kl)]
		p = p[n+int(kl):]
		vl, n := binary.Uvarint(p)
		v := p[n : n+int(vl)]
		p = p[n+int(vl):]
		if !fn(k, v) {
			return
		}
	}
}

// MetadataSection returns the frame's metadata section, copied into a new
// string (one allocation; "" without metadata), and its number of pairs:
// what fleet.CallInfo.SetWireMetadata takes.
func (f *Frame) MetadataSection() (string, int) { return f.MetadataSectionIn(nil) }

// MetadataSize returns the length in bytes of the frame's metadata
// section (0 without metadata).
func (f *Frame) MetadataSize() int { return len(f.md) }

// MetadataSectionIn is MetadataSection with the string's bytes copied
// into dst's spare capacity when the section fits there, which then
// allocates nothing: the string points into dst's array. The caller must
// not write dst's array again while the string may be in use (the server
// hands each call a fresh one, inside the call's own allocation).
// Without room it allocates as MetadataSection does.
func (f *Frame) MetadataSectionIn(dst []byte) (string, int) {
	if f.mdCount == 0 {
		return "", 0
	}
	if len(f.md) > cap(dst)-len(dst) {
		return string(f.md), f.mdCount
	}
	b := append(dst, f.md...)[len(dst):]
	return unsafe.String(&b[0], len(b)), f.mdCount
}

// Metadata returns the frame's metadata as a new map, or nil when it has
// none. Later duplicates of a key win. The keys and values share one
// string copied from the frame (two allocations for the whole section,
// the map and that string, instead of two per pair), so a value kept after
// the call keeps the whole section alive; Parse bounds it by the
// metadata limits.
func (f *Frame) Metadata() fleet.Metadata {
	if f.mdCount == 0 {
		return nil
	}
	md := make(fleet.Metadata, f.mdCount)
	all := string(f.md)
	p := f.md
	off := 0
	for i := 0; i < f.mdCount; i++ {
		// Parse validated the section, so these reads cannot fail.
		kl, n := binary.Uvarint(p[off:])
		k := all[off+n : off+n+int(kl)]
		off += n + int(kl)
		vl, n := binary.Uvarint(p[off:])
		v := all[off+n : off+n+int(vl)]
		off += n + int(vl)
		md[k] = v
	}
	return md
}
