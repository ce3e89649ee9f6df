package gateway

import (
	"bytes"
	"testing"
)

func TestClassify(t *testing.T) {
	tests := []struct {
		in   string
		want connKind
	}{
		{"\x00\x00\x00\x30\xF1\xEE", kindNative},
		{"\x00\x00\x00\x30\xF1\xEEmore", kindNative},
		{"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", kindHTTP},
		{"POST / HTTP/1.1\r\n", kindHTTP},
		{"GET / HTTP/1.1\r\n", kindHTTP},
		{"OPTIONS * HTTP/1.1\r\n", kindHTTP},
		{"\x16\x03\x01\x02\x00\x01", kindTLS}, // a TLS ClientHello
		{"hello!", kindUnknown},
		{"POST", kindUnknown}, // too short to decide
		{"", kindUnknown},
	}
	for _, tc := range tests {
		if got := classify([]byte(tc.in)); got != tc.want {
			t.Errorf("classify(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzClassify checks that any input is classified without panicking and
// that Fleet's magic at bytes 4-5 always means native.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{"\x00\x00\x00\x30\xF1\xEE", "PRI * HTTP/2.0\r\n", "POST / HTTP/1.1\r\n", "\x16\x03\x01\x02\x00\x01", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		k := classify(b)
		if len(b) >= sniffLen && bytes.Equal(b[4:6], []byte{0xF1, 0xEE}) && k != kindNative {
			t.Fatalf("classify(%q) = %v with the magic at 4", b, k)
		}
		if len(b) < sniffLen && k != kindUnknown {
			t.Fatalf("classify(%q) = %v on fewer than %d bytes", b, k, sniffLen)
		}
	})
}
