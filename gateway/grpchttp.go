package gateway

import (
	"net/http"
	"strings"
)

// trailersOnlyWriter is the http.ResponseWriter the gateway hands to
// grpc.Server.ServeHTTP (gRPC over TLS, and over h2c with
// WithH2CToHTTP). grpc-go's handler transport, ending a call that sent
// neither a message nor headers of its own, flushes the default headers
// (which declare the Grpc-Status trailer) and writes the status as HTTP
// trailers after them: a client whose own deadline fires between the two
// (the deadline both sides share) sees headers and no status. gRPC's
// trailers-only form carries the status in the headers instead, as
// grpc-go's own transport sends it (gRPC over HTTP/2, "Responses"). So
// that flush is held back: the writer passes a WriteHeader (grpc-go's
// headers sent on their own, ServerStream.SendHeader) and the first
// message byte through as they come, and a call that ends with neither is
// sent as trailers-only, its declared trailers made headers.
type trailersOnlyWriter struct {
	http.ResponseWriter
	committed bool // the status line went out
}

// WriteHeader sends the status line: grpc-go sends headers of their own.
func (w *trailersOnlyWriter) WriteHeader(code int) {
	w.committed = true
	w.ResponseWriter.WriteHeader(code)
}

// Write sends b (net/http sends the status line first if need be).
func (w *trailersOnlyWriter) Write(b []byte) (int, error) {
	w.committed = true
	return w.ResponseWriter.Write(b)
}

// Flush flushes once the status line is out; before, it is grpc-go's
// flush ahead of the status, held back until the end.
func (w *trailersOnlyWriter) Flush() {
	if w.committed {
		w.ResponseWriter.(http.Flusher).Flush()
	}
}

// finish ends a call that wrote no message: its trailers (the declared
// Grpc-Status, Grpc-Message, Grpc-Status-Details-Bin and the
// "Trailer:"-prefixed metadata) become headers, and nothing is declared
// as a trailer any more.
func (w *trailersOnlyWriter) finish() {
	if w.committed {
		return
	}
	h := w.ResponseWriter.Header()
	if _, ok := h["Grpc-Status"]; ok {
		delete(h, "Trailer")
		for k, vs := range h {
			if name, ok := strings.CutPrefix(k, http.TrailerPrefix); ok {
				delete(h, k)
				h[http.CanonicalHeaderKey(name)] = append(h[http.CanonicalHeaderKey(name)], vs...)
			}
		}
	}
	w.WriteHeader(http.StatusOK)
}

// serveGRPCHTTP serves a gRPC request through grpc-go's ServeHTTP with a
// trailersOnlyWriter.
func (g *Gateway) serveGRPCHTTP(w http.ResponseWriter, r *http.Request) {
	tw := &trailersOnlyWriter{ResponseWriter: w}
	g.grpc.ServeHTTP(tw, r)
	tw.finish()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *trailersOnlyWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
