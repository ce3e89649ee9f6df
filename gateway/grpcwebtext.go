package gateway

import (
	"bufio"
	"encoding/base64"
	"io"
	"net/http"
	"strings"
)

// gRPC-Web's text form (application/grpc-web-text, PROTOCOL-WEB.md in
// grpc/grpc): the binary gRPC-Web body, base64-encoded both ways.
// connect-go speaks binary gRPC-Web only, so a text request is decoded
// into a binary one on the way in and its answer encoded on the way out.

const grpcWebTextPrefix = "application/grpc-web-text"

// isGRPCWebText reports whether r is a gRPC-Web text request.
func isGRPCWebText(r *http.Request) bool {
	return strings.HasPrefix(strings.ToLower(r.Header.Get("Content-Type")), grpcWebTextPrefix)
}

// fromGRPCWebText turns a text request into a binary one (same codec
// suffix) and returns the writer that encodes the answer; finish must be
// called once the handler has returned.
func fromGRPCWebText(w http.ResponseWriter, r *http.Request) (*textWriter, *http.Request) {
	ct := r.Header.Get("Content-Type")
	r = r.Clone(r.Context())
	r.Header.Set("Content-Type", "application/grpc-web"+ct[len(grpcWebTextPrefix):])
	r.Body = &textBody{r: bufio.NewReader(r.Body), c: r.Body}
	r.ContentLength = -1
	return &textWriter{ResponseWriter: w}, r
}

// textBody decodes base64 text whose chunks may each carry padding (a
// client may encode each message on its own): it decodes one 4-character
// quantum at a time, skipping line breaks.
type textBody struct {
	r   *bufio.Reader
	c   io.Closer
	out []byte // decoded bytes not yet read
	q   [4]byte
	buf [3]byte
	err error
}

func (b *textBody) Read(p []byte) (int, error) {
	for len(b.out) == 0 {
		if b.err != nil {
			return 0, b.err
		}
		n := 0
		for n < 4 {
			c, err := b.r.ReadByte()
			if err != nil {
				if n != 0 && err == io.EOF {
					err = io.ErrUnexpectedEOF
				}
				b.err = err
				break
			}
			if c == '\r' || c == '\n' {
				continue
			}
			b.q[n] = c
			n++
		}
		if n < 4 {
			continue
		}
		m, err := base64.StdEncoding.Decode(b.buf[:], b.q[:])
		if err != nil {
			b.err = err
			return 0, err
		}
		b.out = b.buf[:m]
	}
	n := copy(p, b.out)
	b.out = b.out[n:]
	return n, nil
}

func (b *textBody) Close() error { return b.c.Close() }

// textWriter base64-encodes a binary gRPC-Web answer: the bytes written
// between two flushes are encoded as one padded chunk, and Content-Type
// names the text form.
type textWriter struct {
	http.ResponseWriter
	pending     []byte
	wroteHeader bool
}

func (w *textWriter) WriteHeader(code int) {
	if !w.wroteHeader {
		w.wroteHeader = true
		h := w.Header()
		if ct := h.Get("Content-Type"); strings.HasPrefix(ct, "application/grpc-web") {
			h.Set("Content-Type", grpcWebTextPrefix+ct[len("application/grpc-web"):])
		}
		h.Del("Content-Length")
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *textWriter) Write(p []byte) (int, error) {
	if !w.wroteHeader {
		w.WriteHeader(http.StatusOK)
	}
	w.pending = append(w.pending, p...)
	return len(p), nil
}

// Flush encodes and sends what was written since the last flush.
func (w *textWriter) Flush() {
	w.emit()
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *textWriter) emit() {
	if len(w.pending) == 0 {
		return
	}
	enc := make([]byte, base64.StdEncoding.EncodedLen(len(w.pending)))
	base64.StdEncoding.Encode(enc, w.pending)
	w.pending = w.pending[:0]
	_, _ = w.ResponseWriter.Write(enc)
}

// finish sends what is left.
func (w *textWriter) finish() { w.emit() }

func (w *textWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
