package compress

import (
	"errors"
	"fmt"
	"runtime"
	"slices"
	"sync"

	"github.com/klauspost/compress/zstd"
)

// ZstdCompressor is the compressor registered under Zstd. It produces
// Zstandard frames (RFC 8878) with github.com/klauspost/compress/zstd at
// zstd.SpeedDefault (about zstd level 3) and a 1 MiB window, with the
// content size and a checksum in every frame, so any zstd implementation can read the output.
// Decompress accepts any sequence of frames without a dictionary, with
// windows up to MaxZstdWindow (MaxZstdStreamWindow for a frame that does
// not declare its content size).
//
// One encoder and one decoder are shared by all calls; each runs at most
// GOMAXPROCS (read at first use) operations at once and further calls wait
// for a free slot.
//
// Before decoding, Decompress walks the frame and block headers, without
// allocating, to bound the output: a frame's declared content size, or else
// the sum of its blocks' largest possible output. When every frame declares
// its size, a payload over the limit fails before any allocation. Otherwise
// the output buffer is reserved at the smaller of that bound and the limit,
// and the decoder is told never to write past it (zstd.WithDecodeAllCapLimit),
// so a bomb costs about limit bytes. The zero value is ready to use and safe
// for concurrent use.
type ZstdCompressor struct{}

// MaxZstdWindow is the largest window, in bytes, that ZstdCompressor's
// Decompress accepts: 128 MiB, the default limit of the reference zstd
// decoder. The window does not cost memory here, since the output buffer
// serves as the window.
const MaxZstdWindow = 128 << 20

// zstdWindow is the encoder's window: 1 MiB rather than the library's
// 8 MiB, which costs each encoder 16 MiB of history once it has seen a large
// payload and gains little on RPC payloads.
const zstdWindow = 1 << 20

// Name returns "zstd".
func (ZstdCompressor) Name() string { return "zstd" }

var (
	zstdEncoder = sync.OnceValue(func() *zstd.Encoder {
		e, err := zstd.NewWriter(nil,
			zstd.WithEncoderLevel(zstd.SpeedDefault),
			zstd.WithEncoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithEncoderCRC(true),
			zstd.WithWindowSize(zstdWindow),
		)
		if err != nil {
			panic("compress: zstd encoder options: " + err.Error()) // constant options
		}
		return e
	})
	zstdDecoder = sync.OnceValue(func() *zstd.Decoder {
		d, err := zstd.NewReader(nil,
			zstd.WithDecoderConcurrency(runtime.GOMAXPROCS(0)),
			zstd.WithDecoderLowmem(true),
			zstd.WithDecodeAllCapLimit(true),
			zstd.WithDecoderMaxWindow(MaxZstdWindow),
			// The per-call limit is the capacity given to DecodeAll; this
			// is only a backstop.
			zstd.WithDecoderMaxMemory(1<<40),
		)
		if err != nil {
			panic("compress: zstd decoder options: " + err.Error()) // constant options
		}
		return d
	})
)

// Compress appends a Zstandard frame holding src to dst. It does not fail.
func (ZstdCompressor) Compress(dst, src []byte) ([]byte, error) {
	return zstdEncoder().EncodeAll(src, dst), nil
}

// Decompress appends the content of the Zstandard frames in src to dst. It
// fails with an error wrapping ErrTooLarge when the content exceeds limit
// bytes (a negative limit counts as 0), and with another error when src is
// not valid, uses a dictionary or a window over MaxZstdWindow. On error it
// returns dst unchanged.
func (ZstdCompressor) Decompress(dst, src []byte, limit int) ([]byte, error) {
	limit = max(limit, 0)
	bound, exact, err := zstdBound(src)
	if err != nil {
		return dst, fmt.Errorf("compress zstd: %w", err)
	}
	if exact && bound > uint64(limit) {
		return dst, tooLarge("zstd", limit)
	}
	room := int(min(bound, uint64(limit)))
	n0 := len(dst)
	out := slices.Grow(dst, room)
	// A full slice expression, so that the decoder sees exactly room bytes
	// of capacity whatever slices.Grow rounded up to.
	out, err = zstdDecoder().DecodeAll(src, out[:n0:n0+room])
	if err != nil {
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) && room == limit {
			return dst, tooLarge("zstd", limit)
		}
		return dst, fmt.Errorf("compress zstd: %w", err)
	}
	if len(out)-n0 > limit {
		return dst, tooLarge("zstd", limit)
	}
	return out, nil
}

var (
	errZstdTruncated = errors.New("truncated frame")
	errZstdBlock     = errors.New("reserved block type")
	errZstdEmpty     = errors.New("no frame")
	errZstdWindow    = errors.New("frame without a content size declares a window over MaxZstdStreamWindow")
)

// zstdMaxBlock is the most a block can decode to (RFC 8878, 3.1.1.2.4).
const zstdMaxBlock = 128 << 10

// zstdBound returns an upper bound on the decoded size of the frames in src,
// reading only frame and block headers. exact reports that every frame
// declared its content size, making the bound the exact size of any valid
// src.
func zstdBound(src []byte) (bound uint64, exact bool, err error) {
	if len(src) == 0 {
		return 0, false, errZstdEmpty
	}
	exact = true
	for len(src) > 0 {
		var h zstd.Header
		rest, err := h.DecodeAndStrip(src)
		if err != nil {
			return 0, false, err
		}
		if h.Skippable {
			if uint64(h.SkippableSize) > uint64(len(rest)) {
				return 0, false, errZstdTruncated
			}
			src = rest[h.SkippableSize:]
			continue
		}
		// Walk the blocks: a 3-byte little-endian header holding
		// Last_Block (bit 0), Block_Type (bits 1-2), Block_Size (bits 3-23).
		var frame uint64
		for {
			if len(rest) < 3 {
				return 0, false, errZstdTruncated
			}
			hdr := uint32(rest[0]) | uint32(rest[1])<<8 | uint32(rest[2])<<16
			rest = rest[3:]
			size := int(hdr >> 3)
			switch (hdr >> 1) & 3 {
			case 0: // Raw: size bytes, copied.
				frame += uint64(size)
			case 1: // RLE: one byte, repeated size times.
				frame += uint64(size)
				size = 1
			case 2: // Compressed: at most zstdMaxBlock bytes out.
				frame += zstdMaxBlock
			default:
				return 0, false, errZstdBlock
			}
			if size > len(rest) {
				return 0, false, errZstdTruncated
			}
			rest = rest[size:]
			if hdr&1 != 0 {
				break
			}
		}
		if h.HasCheckSum {
			if len(rest) < 4 {
				return 0, false, errZstdTruncated
			}
			rest = rest[4:]
		}
		if h.HasFCS {
			frame = h.FrameContentSize
		} else {
			if h.WindowSize > MaxZstdStreamWindow {
				return 0, false, errZstdWindow
			}
			exact = false
		}
		bound += frame
		if bound < frame { // overflow
			bound = 1<<64 - 1
		}
		src = rest
	}
	return bound, exact, nil
}
