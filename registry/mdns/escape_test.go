package mdns

import (
	"testing"

	"github.com/miekg/dns"
)

// pack and unpack a TXT record the way hashicorp/mdns does on the wire.
func wire(t *testing.T, txt []string) []string {
	t.Helper()
	m := new(dns.Msg)
	m.Answer = []dns.RR{&dns.TXT{Hdr: dns.RR_Header{Name: "x.local.", Rrtype: dns.TypeTXT, Class: dns.ClassINET}, Txt: txt}}
	b, err := m.Pack()
	if err != nil {
		t.Fatalf("pack %q: %v", txt, err)
	}
	var back dns.Msg
	if err := back.Unpack(b); err != nil {
		t.Fatalf("unpack: %v", err)
	}
	return back.Answer[0].(*dns.TXT).Txt
}

// Every byte survives escapeTXT, miekg/dns's packing and unpacking, and
// unescapeTXT.
func TestEscapeTXTOverTheWire(t *testing.T) {
	all := make([]byte, 256)
	for i := range all {
		all[i] = byte(i)
	}
	for _, s := range []string{
		`tags=["a","b c"]`, `load={"inflight":1}`, `a\b`, `\\`, `\123`, `end\`, `"`,
		string(all[:128]), string(all[128:]),
	} {
		got := unescapeTXT(wire(t, escapeTXT([]string{s})))
		if len(got) != 1 || got[0] != s {
			t.Errorf("%q came back as %q", s, got)
		}
	}
}

func FuzzEscapeTXT(f *testing.F) {
	f.Add(`tags=["a","b"]`)
	f.Add(`x\y\065`)
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) > 255 {
			return
		}
		got := unescapeTXT(wire(t, escapeTXT([]string{s})))
		if len(got) != 1 || got[0] != s {
			t.Fatalf("%q came back as %q", s, got)
		}
		unescapeTXT([]string{s}) // any input: no panic
	})
}
