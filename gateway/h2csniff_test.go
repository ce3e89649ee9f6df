package gateway

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"

	"github.com/fleetrpc/fleet/server"
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// h2cStart is the client side of a cleartext HTTP/2 connection up to its
// first request: the preface, SETTINGS, the ACK of the server's SETTINGS
// when ack, then HEADERS for path with content type ct.
func h2cStart(ct string, ack bool) []byte {
	var b bytes.Buffer
	b.WriteString(http2Preface)
	fr := http2.NewFramer(&b, nil)
	_ = fr.WriteSettings()
	if ack {
		_ = fr.WriteSettingsAck()
	}
	_ = fr.WriteWindowUpdate(0, 1<<20)
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":scheme", Value: "http"},
		{Name: ":path", Value: "/Hello/Say"}, {Name: ":authority", Value: "x"}, {Name: "content-type", Value: ct}} {
		_ = enc.WriteField(f)
	}
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true})
	return b.Bytes()
}

// sniffPipe runs sniffH2C on the server end of a pipe whose client writes
// in (the whole connection start, preface included) and then closes; it
// returns sniffH2C's verdict and error and, when it handed the connection
// on, everything a server would read from it.
func sniffPipe(t testing.TB, g *Gateway, in []byte) (bool, []byte, error) {
	cc, sc := net.Pipe()
	go func() {
		_, _ = cc.Write(in)
		_ = cc.Close()
	}()
	// The client end's reads (the server's SETTINGS) are drained by the
	// pipe closing: Write on sc fails once cc is closed.
	go func() { _, _ = io.Copy(io.Discard, cc) }()
	pc := &prefixConn{Conn: sc}
	if _, err := io.ReadFull(sc, pc.buf[:]); err != nil {
		return false, nil, err
	}
	defer sc.Close()
	toHTTP, rc, err := g.sniffH2C(pc)
	if err != nil {
		return toHTTP, nil, err
	}
	_ = rc.SetReadDeadline(time.Now().Add(5 * time.Second))
	out, _ := io.ReadAll(rc)
	return toHTTP, out, nil
}

func sniffGateway(t testing.TB) *Gateway {
	srv := server.New()
	t.Cleanup(func() { srv.Close() })
	g := New(srv)
	g.opts.limits.frameTimeout = 200 * time.Millisecond
	return g
}

// TestSniffH2C: the first request's content type picks the server; what
// the server then reads is what the client sent, less the client's ACK
// of the gateway's empty SETTINGS.
func TestSniffH2C(t *testing.T) {
	g := sniffGateway(t)
	for _, tc := range []struct {
		ct     string
		toHTTP bool
	}{
		{"application/grpc", false},
		{"application/grpc+proto", false},
		{"application/grpc; charset=utf-8", false},
		{"application/connect+proto", true},
		{"application/grpc-web+proto", true},
		{"application/grpc+json", true},
		{"application/json", true},
		{"application/proto", true},
	} {
		for _, ack := range []bool{false, true} {
			in := h2cStart(tc.ct, ack)
			toHTTP, out, err := sniffPipe(t, g, in)
			if err != nil || toHTTP != tc.toHTTP {
				t.Fatalf("%s (ack %v): to net/http %v, %v; want %v", tc.ct, ack, toHTTP, err, tc.toHTTP)
			}
			want := h2cStart(tc.ct, false)
			if !bytes.Equal(out, want) {
				t.Fatalf("%s (ack %v): the server reads\n%x\nwant\n%x", tc.ct, ack, out, want)
			}
		}
	}
	// A header block split over a padded HEADERS with priority and a
	// CONTINUATION.
	for _, tc := range []struct {
		ct     string
		toHTTP bool
	}{{"application/grpc", false}, {"application/connect+proto", true}} {
		var b bytes.Buffer
		b.WriteString(http2Preface)
		fr := http2.NewFramer(&b, nil)
		_ = fr.WriteSettings()
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range []hpack.HeaderField{{Name: ":method", Value: "POST"}, {Name: ":path", Value: "/Hello/Say"}, {Name: "content-type", Value: tc.ct}} {
			_ = enc.WriteField(f)
		}
		blk := hb.Bytes()
		_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:4], PadLength: 7,
			Priority: http2.PriorityParam{StreamDep: 0, Weight: 15}})
		_ = fr.WriteContinuation(1, true, blk[4:])
		toHTTP, out, err := sniffPipe(t, g, b.Bytes())
		if err != nil || toHTTP != tc.toHTTP || !bytes.Equal(out, b.Bytes()) {
			t.Fatalf("split block, %s: to net/http %v, %v, replay equal %v", tc.ct, toHTTP, err, bytes.Equal(out, b.Bytes()))
		}
	}
	// Not a preface; a frame over the default max size: closed.
	for _, in := range [][]byte{
		[]byte("PRI * HTTP/2.0\r\n\r\nXX\r\n\r\n"),
		append([]byte(http2Preface), 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, 0),
	} {
		if _, _, err := sniffPipe(t, g, in); err == nil {
			t.Fatalf("%q: no error", in)
		}
	}
}

// FuzzSniffH2C feeds arbitrary bytes after the HTTP/2 preface to the
// cleartext HTTP/2 sniffer: never a panic, and a connection handed on
// replays at most what the client sent, starting with the preface.
func FuzzSniffH2C(f *testing.F) {
	for _, ct := range []string{"application/grpc", "application/connect+proto"} {
		f.Add(h2cStart(ct, true)[len(http2Preface):])
		f.Add(h2cStart(ct, false)[len(http2Preface):])
	}
	f.Add([]byte{0, 0, 0, 4, 1, 0, 0, 0, 0})
	g := sniffGateway(f)
	f.Fuzz(func(t *testing.T, rest []byte) {
		in := append([]byte(http2Preface), rest...)
		_, out, err := sniffPipe(t, g, in)
		if err != nil {
			return
		}
		if !bytes.HasPrefix(out, []byte(http2Preface)) || len(out) > len(in) {
			t.Fatalf("replayed %d bytes %x for %d sent", len(out), out, len(in))
		}
	})
}
