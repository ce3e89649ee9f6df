package protocol_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/fleetrpc/fleet"
	"github.com/fleetrpc/fleet/protocol"
)

func TestHelloRoundTrip(t *testing.T) {
	for _, h := range []protocol.Hello{
		{Revision: 2},
		{Revision: 2, Capabilities: protocol.CapCancel | protocol.CapStreams | 1<<31,
			Settings: map[uint64]uint64{protocol.SettingStreamWindow: 1 << 20, protocol.SettingMaxStreams: 7, 40: 1}},
	} {
		p := protocol.AppendHello(nil, &h)
		got, err := protocol.ParseHello(append(p, "future fields"...))
		if err != nil {
			t.Fatal(err)
		}
		if got.Revision != h.Revision || got.Capabilities != h.Capabilities || len(got.Settings) != len(h.Settings) {
			t.Fatalf("got %+v, want %+v", got, h)
		}
		for k, v := range h.Settings {
			if got.Settings[k] != v {
				t.Fatalf("setting %d = %d, want %d", k, got.Settings[k], v)
			}
		}
	}
	h := protocol.Hello{Settings: map[uint64]uint64{1: 1 << 40}}
	if v := h.Setting(1, 5, 1000); v != 1000 {
		t.Fatalf("Setting over max = %d", v)
	}
	if v := h.Setting(2, 5, 1000); v != 5 {
		t.Fatalf("absent Setting = %d", v)
	}
}

func TestExtensionPayloadErrors(t *testing.T) {
	tooMany := []byte{2, 0, 0, 0, 0, 33}
	tests := []struct {
		name  string
		parse func() error
		code  fleet.Code
	}{
		{"short hello", func() error { _, err := protocol.ParseHello([]byte{2, 0}); return err }, fleet.InvalidArgument},
		{"hello settings over limit", func() error { _, err := protocol.ParseHello(tooMany); return err }, fleet.ResourceExhausted},
		{"hello truncated setting", func() error { _, err := protocol.ParseHello([]byte{2, 0, 0, 0, 0, 1, 1}); return err }, fleet.InvalidArgument},
		{"short go-away", func() error { _, err := protocol.ParseGoAway([]byte{1, 0, 0}); return err }, fleet.InvalidArgument},
		{"go-away message past end", func() error { _, err := protocol.ParseGoAway([]byte{1, 0, 0, 0, 0, 0, 0, 0, 9, 5, 'a'}); return err }, fleet.InvalidArgument},
		{"zero window increment", func() error { _, err := protocol.ParseWindowUpdate([]byte{0, 0, 0, 0}); return err }, fleet.InvalidArgument},
		{"window increment over max", func() error { _, err := protocol.ParseWindowUpdate([]byte{0x80, 0, 0, 0}); return err }, fleet.InvalidArgument},
		{"short window update", func() error { _, err := protocol.ParseWindowUpdate([]byte{0, 1}); return err }, fleet.InvalidArgument},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.parse()
			if fleet.CodeOf(err) != tc.code {
				t.Fatalf("err = %v, want code %v", err, tc.code)
			}
			if !errors.Is(err, protocol.ErrMalformed) && !errors.Is(err, protocol.ErrTooLarge) {
				t.Fatalf("err = %v wraps neither sentinel", err)
			}
		})
	}
}

func TestGoAwayRoundTrip(t *testing.T) {
	g0, err := protocol.ParseGoAway(nil)
	if err != nil || g0.HasLastSeq || g0.Reason != protocol.GoAwayUnspecified {
		t.Fatalf("revision 1 go-away: %+v, %v", g0, err)
	}
	g := protocol.GoAway{Reason: protocol.GoAwayProtocolError, LastSeq: 1<<63 + 5, Message: "bad magic"}
	got, err := protocol.ParseGoAway(protocol.AppendGoAway(nil, &g))
	if err != nil || got.Reason != g.Reason || got.LastSeq != g.LastSeq || got.Message != g.Message || !got.HasLastSeq {
		t.Fatalf("got %+v, %v", got, err)
	}
	long := protocol.GoAway{Message: string(bytes.Repeat([]byte("x"), 5000))}
	got, err = protocol.ParseGoAway(protocol.AppendGoAway(nil, &long))
	if err != nil || len(got.Message) != 1024 {
		t.Fatalf("long message: %d bytes, %v", len(got.Message), err)
	}
}

// TestUnknownTypeParses: a frame of a type this package does not know
// parses (so a receiver can skip it), type 0 does not.
func TestUnknownTypeParses(t *testing.T) {
	b := protocol.AppendControl(nil, 200, 0x80, 3, []byte("future"))
	f, err := protocol.Parse(b[protocol.PrefixSize:], &lim)
	if err != nil || f.Type != 200 || f.Type.Known() || string(f.Payload) != "future" {
		t.Fatalf("unknown type: %+v, %v", f.Header, err)
	}
	for ty := protocol.TypeRequest; ty <= protocol.TypeWindowUpdate; ty++ {
		if !ty.Known() {
			t.Fatalf("type %d not known", ty)
		}
	}
}

// FuzzParseHello: never panics, errors carry a code, accepted Hellos
// re-encode to something that parses to the same values. Seeds in
// testdata/fuzz/FuzzParseHello.
func FuzzParseHello(f *testing.F) {
	f.Add(protocol.AppendHello(nil, &protocol.Hello{Revision: 2, Capabilities: 3, Settings: map[uint64]uint64{1: 65536}}))
	f.Fuzz(func(t *testing.T, p []byte) {
		h, err := protocol.ParseHello(p)
		if err != nil {
			if c := fleet.CodeOf(err); c != fleet.InvalidArgument && c != fleet.ResourceExhausted {
				t.Fatalf("code %v: %v", c, err)
			}
			return
		}
		if len(h.Settings) > 32 {
			t.Fatalf("%d settings", len(h.Settings))
		}
		small := true
		for id := range h.Settings {
			small = small && id <= 64
		}
		if !small {
			return // AppendHello writes identifiers up to 64 only
		}
		g, err := protocol.ParseHello(protocol.AppendHello(nil, &h))
		if err != nil || g.Revision != h.Revision || g.Capabilities != h.Capabilities || len(g.Settings) != len(h.Settings) {
			t.Fatalf("re-encoded hello differs: %+v vs %+v (%v)", g, h, err)
		}
	})
}

// FuzzParseGoAway: never panics, errors carry a code, messages stay under
// their limit. Seeds in testdata/fuzz/FuzzParseGoAway.
func FuzzParseGoAway(f *testing.F) {
	f.Add(protocol.AppendGoAway(nil, &protocol.GoAway{Reason: 1, LastSeq: 42, Message: "bye"}))
	f.Fuzz(func(t *testing.T, p []byte) {
		g, err := protocol.ParseGoAway(p)
		if err != nil {
			if c := fleet.CodeOf(err); c != fleet.InvalidArgument && c != fleet.ResourceExhausted {
				t.Fatalf("code %v: %v", c, err)
			}
			return
		}
		if len(g.Message) > 1024 {
			t.Fatalf("message of %d bytes", len(g.Message))
		}
		if g.HasLastSeq {
			again, err := protocol.ParseGoAway(protocol.AppendGoAway(nil, &g))
			if err != nil || again != g {
				t.Fatalf("re-encoded go-away differs: %+v vs %+v", again, g)
			}
		}
	})
}

// FuzzParseWindowUpdate: never panics; accepted increments are in range.
// Seeds in testdata/fuzz/FuzzParseWindowUpdate.
func FuzzParseWindowUpdate(f *testing.F) {
	f.Add(protocol.AppendWindowUpdate(nil, 65536))
	f.Fuzz(func(t *testing.T, p []byte) {
		inc, err := protocol.ParseWindowUpdate(p)
		if err != nil {
			if fleet.CodeOf(err) != fleet.InvalidArgument {
				t.Fatalf("code %v", fleet.CodeOf(err))
			}
			return
		}
		if inc == 0 || inc > protocol.MaxWindow {
			t.Fatalf("increment %d accepted", inc)
		}
	})
}
