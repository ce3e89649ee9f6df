package compress

import "sync/atomic"

// Compressor compresses payloads. Implementations are safe for concurrent
// use and pool their encoders and decoders.
type Compressor interface {
	// Name is a short lowercase identifier, such as "zstd".
	Name() string
	// Compress appends the compressed form of src to dst.
	Compress(dst, src []byte) ([]byte, error)
	// Decompress appends the decompressed form of src to dst. It fails
	// with an error wrapping ErrTooLarge, without allocating past the
	// limit, when the output would exceed limit bytes.
	Decompress(dst, src []byte, limit int) ([]byte, error)
}

// ID is the one-byte compression identifier carried in every frame header.
type ID byte

// The built-in compression IDs; 0 means the payload is not compressed.
const (
	None   ID = 0
	Gzip   ID = 1
	Snappy ID = 2
	Zstd   ID = 3
)

var table [256]atomic.Pointer[Compressor]

// Register makes c available under id (1–255).
func Register(id ID, c Compressor) { table[id].Store(&c) }

// Get returns the compressor registered under id, or nil (always nil for None).
func Get(id ID) Compressor {
	if p := table[id].Load(); p != nil {
		return *p
	}
	return nil
}

// ErrTooLarge is wrapped by Decompress errors when the output would exceed
// the limit.
var ErrTooLarge = errTooLarge{}

type errTooLarge struct{}

func (errTooLarge) Error() string { return "compress: decompressed size exceeds limit" }
