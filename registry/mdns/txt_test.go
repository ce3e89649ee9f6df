package mdns_test

import (
	"reflect"
	"strings"
	"testing"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/registry/mdns"
)

func TestTXTRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		in   registry.Instance
		txt  []string
	}{
		{
			name: "minimal",
			in:   registry.Instance{Service: "Arith", Addr: "127.0.0.1:8972"},
			txt:  []string{"txtvers=1", "service=Arith", "addr=127.0.0.1:8972"},
		},
		{
			name: "every field",
			in: registry.Instance{
				Service: "Arith", Addr: "10.0.0.1:8972", Network: "tls", Weight: 3,
				Group: "blue", Version: "v1.2.3", Tags: []string{"a", "b,c", `"q"`},
				Latitude: 52.520008, Longitude: -13.404954, State: registry.Draining,
				Load: registry.Load{InFlight: 7, CallsPerSecond: 0.1},
				Meta: map[string]string{"zone": "eu-1", "k": "v=w", "empty": ""},
			},
			txt: []string{
				"txtvers=1", "service=Arith", "addr=10.0.0.1:8972", "network=tls", "weight=3",
				"group=blue", "version=v1.2.3", `tags=["a","b,c","\"q\""]`,
				"lat=52.520008", "lon=-13.404954", "state=draining",
				`load={"inflight":7,"calls_per_second":0.1}`,
				"meta.empty=", "meta.k=v=w", "meta.zone=eu-1",
			},
		},
		{
			name: "negative weight and tiny float",
			in:   registry.Instance{Service: "S", Addr: "[::1]:1", Weight: -2, Latitude: 5e-324},
			txt:  []string{"txtvers=1", "service=S", "addr=[::1]:1", "weight=-2", "lat=5e-324"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			txt, err := mdns.EncodeTXT(tt.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(txt, tt.txt) {
				t.Fatalf("EncodeTXT =\n%q\nwant\n%q", txt, tt.txt)
			}
			got, err := mdns.DecodeTXT(txt)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.in) {
				t.Fatalf("DecodeTXT =\n%+v\nwant\n%+v", got, tt.in)
			}
		})
	}
}

func TestEncodeTXTErrors(t *testing.T) {
	long := strings.Repeat("x", 250)
	for name, in := range map[string]registry.Instance{
		"long meta":       {Service: "S", Addr: "127.0.0.1:1", Meta: map[string]string{"k": long}},
		"long tags":       {Service: "S", Addr: "127.0.0.1:1", Tags: []string{long}},
		"empty meta key":  {Service: "S", Addr: "127.0.0.1:1", Meta: map[string]string{"": "v"}},
		"'=' in meta key": {Service: "S", Addr: "127.0.0.1:1", Meta: map[string]string{"a=b": "v"}},
	} {
		if txt, err := mdns.EncodeTXT(in); err == nil {
			t.Errorf("%s: EncodeTXT = %q; want an error", name, txt)
		}
	}
}

func TestDecodeTXT(t *testing.T) {
	ok := func(txt ...string) registry.Instance {
		t.Helper()
		in, err := mdns.DecodeTXT(txt)
		if err != nil {
			t.Fatalf("DecodeTXT(%q): %v", txt, err)
		}
		return in
	}
	// First occurrence wins; fixed keys ignore case; junk is ignored.
	in := ok("TXTVERS=1", "Service=A", "service=B", "addr=h:1", "noequals", "=x", "future=1", "meta.K=1", "meta.K=2")
	if in.Service != "A" || in.Addr != "h:1" || in.Meta["K"] != "1" {
		t.Fatalf("got %+v", in)
	}
	for _, bad := range [][]string{
		nil,
		{"service=A", "addr=h:1"},                // no txtvers
		{"txtvers=2", "service=A", "addr=h:1"},   // unknown version
		{"txtvers=1", "addr=h:1"},                // no service
		{"txtvers=1", "service=A"},               // no addr
		{"txtvers=1", "service=a/b", "addr=h:1"}, // invalid service
		{"txtvers=1", "service=A", "addr=h:1", "weight=x"},
		{"txtvers=1", "service=A", "addr=h:1", "lat=north"},
		{"txtvers=1", "service=A", "addr=h:1", "tags=a,b"},
		{"txtvers=1", "service=A", "addr=h:1", `load={"inflight":"x"}`},
	} {
		if in, err := mdns.DecodeTXT(bad); err == nil {
			t.Errorf("DecodeTXT(%q) = %+v; want an error", bad, in)
		}
	}
}

// FuzzDecodeTXT: DecodeTXT never panics on what the network sends, and
// whatever it accepts encodes and decodes to the same instance.
func FuzzDecodeTXT(f *testing.F) {
	f.Add("txtvers=1\nservice=Arith\naddr=127.0.0.1:8972")
	f.Add("txtvers=1\nservice=A\naddr=h:1\ntags=[\"x\"]\nload={\"inflight\":1}\nmeta.k=v\nlat=1.5")
	f.Fuzz(func(t *testing.T, s string) {
		in, err := mdns.DecodeTXT(strings.Split(s, "\n"))
		if err != nil {
			return
		}
		txt, err := mdns.EncodeTXT(in)
		if err != nil {
			return // e.g. a value too long to advertise
		}
		back, err := mdns.DecodeTXT(txt)
		if err != nil {
			t.Fatalf("re-decode of %q: %v", txt, err)
		}
		if !reflect.DeepEqual(normalize(back), normalize(in)) {
			t.Fatalf("round trip changed %+v to %+v", in, back)
		}
	})
}

// normalize maps empty Tags and Meta to nil: EncodeTXT omits them.
func normalize(in registry.Instance) registry.Instance {
	if len(in.Tags) == 0 {
		in.Tags = nil
	}
	if len(in.Meta) == 0 {
		in.Meta = nil
	}
	return in
}

func TestServiceName(t *testing.T) {
	for in, want := range map[string]string{
		"Arith":   "_fleet-Arith._tcp",
		"a.b:c_d": "_fleet-a-b-c-d._tcp",
		"":        "_fleet-._tcp",
	} {
		if got := mdns.ServiceName(in); got != want {
			t.Errorf("ServiceName(%q) = %q; want %q", in, got, want)
		}
	}
	long := mdns.ServiceName(strings.Repeat("s", 100))
	if label := strings.TrimSuffix(long, "._tcp"); len(label) > 63 {
		t.Errorf("ServiceName of a long name has a %d-byte label", len(label))
	}
	if mdns.ServiceName(strings.Repeat("s", 100)) == mdns.ServiceName(strings.Repeat("s", 101)) {
		t.Error("long names collide")
	}
}
