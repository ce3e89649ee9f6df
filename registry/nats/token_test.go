package nats_test

import (
	"regexp"
	"testing"

	fnats "github.com/fleetrpc/fleet/registry/nats"
)

// validToken is one token of a valid NATS KV key (no '.').
var validToken = regexp.MustCompile(`^[-/_=a-zA-Z0-9]*$`)

func TestToken(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"Arith", "Arith"},
		{"my-svc_2", "my-svc_2"},
		{"127.0.0.1:8972", "127=2E0=2E0=2E1=3A8972"},
		{"unix@/tmp/a b.sock", "unix=40=2Ftmp=2Fa=20b=2Esock"},
		{"=", "=3D"},
		{"*>", "=2A=3E"},
		{"é", "=C3=A9"},
	}
	for _, tt := range tests {
		got := fnats.EncodeToken(tt.in)
		if got != tt.want {
			t.Errorf("EncodeToken(%q) = %q; want %q", tt.in, got, tt.want)
		}
		back, err := fnats.DecodeToken(got)
		if err != nil || back != tt.in {
			t.Errorf("DecodeToken(%q) = %q, %v; want %q", got, back, err, tt.in)
		}
	}
	for _, bad := range []string{"=", "=4", "=4G", "=zz", "a.b", "a b", "a*"} {
		if _, err := fnats.DecodeToken(bad); err == nil {
			t.Errorf("DecodeToken(%q) succeeded", bad)
		}
	}
}

// FuzzToken: every string encodes to a valid key token that decodes
// back; DecodeToken never panics, and what it accepts re-encodes to
// itself unless it used lower-case-free escapes of safe bytes.
func FuzzToken(f *testing.F) {
	for _, s := range []string{"", "Arith", "127.0.0.1:8972", "unix@/tmp/x.sock", "=3A", "=", "é"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := fnats.EncodeToken(s)
		if !validToken.MatchString(tok) {
			t.Fatalf("EncodeToken(%q) = %q: not a valid key token", s, tok)
		}
		back, err := fnats.DecodeToken(tok)
		if err != nil || back != s {
			t.Fatalf("round trip of %q: %q, %v", s, back, err)
		}
		if dec, err := fnats.DecodeToken(s); err == nil {
			if again, err := fnats.DecodeToken(fnats.EncodeToken(dec)); err != nil || again != dec {
				t.Fatalf("decoded %q to %q, which does not round-trip", s, dec)
			}
		}
	})
}
