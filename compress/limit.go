package compress

import (
	"fmt"
	"io"
	"slices"
)

// tooLarge returns the error Decompress reports when the output of the
// named compressor would exceed limit bytes.
func tooLarge(name string, limit int) error {
	return fmt.Errorf("compress %s: output exceeds limit of %d bytes: %w", name, limit, ErrTooLarge)
}

// readLimited appends everything r yields to dst, failing with ErrTooLarge
// when that exceeds limit bytes. It first reserves min(hint, limit) bytes,
// then grows dst geometrically, never past limit. probe is a one-byte
// scratch buffer used to look for the end of r when dst is full, so that an
// output of exactly the hinted size needs no second allocation.
func readLimited(name string, r io.Reader, dst []byte, limit, hint int, probe []byte) ([]byte, error) {
	n0 := len(dst)
	hint = max(min(hint, limit), 0)
	dst = slices.Grow(dst, hint)
	for {
		if len(dst) == cap(dst) {
			n, err := readSome(r, probe[:1])
			if n == 0 {
				if err == io.EOF {
					return dst, nil
				}
				return dst[:n0], fmt.Errorf("compress %s: %w", name, err)
			}
			if len(dst)-n0 >= limit {
				return dst[:n0], tooLarge(name, limit)
			}
			dst = slices.Grow(dst, min(max(len(dst)-n0, 512), limit-(len(dst)-n0)))
			dst = append(dst, probe[0])
			continue
		}
		space := dst[len(dst):cap(dst)]
		if rest := limit - (len(dst) - n0); len(space) > rest {
			// slices.Grow may round capacity up; never read past limit.
			space = space[:rest]
		}
		if len(space) == 0 {
			// At the limit: any further byte is one too many.
			n, err := readSome(r, probe[:1])
			if n > 0 {
				return dst[:n0], tooLarge(name, limit)
			}
			if err == io.EOF {
				return dst, nil
			}
			return dst[:n0], fmt.Errorf("compress %s: %w", name, err)
		}
		n, err := r.Read(space)
		dst = dst[:len(dst)+n]
		if err == io.EOF {
			return dst, nil
		}
		if err != nil {
			return dst[:n0], fmt.Errorf("compress %s: %w", name, err)
		}
	}
}

// readSome reads into p until it gets a byte or an error, so that a reader
// returning (0, nil) is not mistaken for the end.
func readSome(r io.Reader, p []byte) (int, error) {
	for range 100 {
		n, err := r.Read(p)
		if n > 0 || err != nil {
			return n, err
		}
	}
	return 0, io.ErrNoProgress
}

// appendBuf is an io.Writer that appends to b, so that stream encoders
// write straight into a caller's buffer.
type appendBuf struct{ b []byte }

func (w *appendBuf) Write(p []byte) (int, error) {
	w.b = append(w.b, p...)
	return len(p), nil
}
