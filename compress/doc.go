// Package compress compresses and decompresses payloads.
//
// A Compressor appends the compressed form of a payload to a buffer and
// back. Every frame names the compression of its payload with a one-byte
// ID; Get looks the compressor up in a fixed table and Register fills it.
// The server and the client decide when to compress (a payload-size
// threshold); this package only does the work.
//
// # Built-in compressors
//
// The compressors below, all built on github.com/klauspost/compress, are
// registered by this package's init function.
//
//	ID  constant  Name      type              format
//	0   None      -         -                 payload not compressed
//	1   Gzip      "gzip"    GzipCompressor    gzip, RFC 1952, default level
//	2   Snappy    "snappy"  SnappyCompressor  Snappy block format
//	3   Zstd      "zstd"    ZstdCompressor    Zstandard frames, RFC 8878, SpeedDefault
//
// Snappy is the fastest and compresses least; zstd compresses best at a
// speed close to Snappy's; gzip is for peers that speak nothing else. All
// are zero-size structs whose zero value is ready to use, and all are safe
// for concurrent use; encoders and decoders are pooled.
//
// # Limits
//
// Decompress takes a limit in bytes on the decompressed size. When the
// output would exceed it, Decompress returns an error wrapping ErrTooLarge
// (test with errors.Is) and does not allocate much past the limit, so a
// small "decompression bomb" cannot exhaust memory: Snappy and zstd frames
// that declare their size fail before any allocation; other input is
// decoded into a buffer of at most the limit.
//
// DecompressBound (the Bounder ability) gives the size to reserve before
// decompressing. Where the compressed bytes do not bound it (a zstd frame
// that declares no content size and may expand past the limit; a gzip
// trailer claiming more than GzipMeasureAbove) it measures: it
// decompresses into a counter that keeps nothing, with a stream decoder
// reused from a pool, and stops at the first byte past the limit. A
// refused bomb then costs decoding time up to the limit but no memory in
// proportion to its expansion, and a payload that fits gets an exact
// bound.
//
// # Registering your own compressor
//
// IDs 1–31 are reserved for Fleet; use 32–255 for your own, and register
// the compressor on both the client and the server at init time:
//
//	const LZ4 compress.ID = 32
//
//	func init() { compress.Register(LZ4, lz4Compressor{}) }
//
// A Compressor must be safe for concurrent use, must not retain src or dst,
// must honor the limit as described above, and must return an error rather
// than panic on bad input.
//
// # Owns and imports
//
// This package owns payload compressors and their one-byte IDs. It must
// not import any other Fleet package (not even the root package); the
// root package's TestPackageImports checks this.
package compress
