package client

import (
	"testing"
	"time"

	"github.com/fleetrpc/fleet"
	"github.com/sony/gobreaker/v2"
)

// TestBreakerSettings: each setting, and each default, decides after how
// many server failures the breaker opens; errors that are not server
// failures never open it.
func TestBreakerSettings(t *testing.T) {
	unavailable := fleet.NewError(fleet.Unavailable, "down")
	handlerErr := fleet.NewError(fleet.InvalidArgument, "bad input")
	tests := []struct {
		name     string
		settings BreakerSettings
		err      error
		calls    int
		wantOpen bool
	}{
		{"default stays closed at 4", BreakerSettings{}, unavailable, 4, false},
		{"default opens at 5", BreakerSettings{}, unavailable, 5, true},
		{"failures 2", BreakerSettings{Failures: 2}, unavailable, 2, true},
		{"failures 2, one failure", BreakerSettings{Failures: 2}, unavailable, 1, false},
		{"handler errors do not count", BreakerSettings{Failures: 1}, handlerErr, 50, false},
		{"disabled", BreakerSettings{Disabled: true, Failures: 1}, unavailable, 50, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cb := newBreaker("srv", tt.settings, nil)
			for i := 0; i < tt.calls; i++ {
				done, err := cb.Allow()
				if err != nil {
					t.Fatalf("call %d refused: %v", i, err)
				}
				done(tt.err)
			}
			if got := cb.State() == gobreaker.StateOpen; got != tt.wantOpen {
				t.Fatalf("open = %v after %d calls, want %v", got, tt.calls, tt.wantOpen)
			}
		})
	}
}

// TestBreakerSettingsOpenForAndProbes: OpenFor bounds how long the breaker
// stays open; Probes is how many calls the half-open breaker admits.
func TestBreakerSettingsOpenForAndProbes(t *testing.T) {
	cb := newBreaker("srv", BreakerSettings{Failures: 1, OpenFor: time.Millisecond, Probes: 2}, nil)
	done, _ := cb.Allow()
	done(fleet.NewError(fleet.Unavailable, "down"))
	deadline := time.Now().Add(20 * time.Second)
	for cb.State() == gobreaker.StateOpen && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	if s := cb.State(); s != gobreaker.StateHalfOpen {
		t.Fatalf("state = %v, want half-open once OpenFor passed", s)
	}
	d1, err1 := cb.Allow()
	d2, err2 := cb.Allow()
	_, err3 := cb.Allow()
	if err1 != nil || err2 != nil || err3 == nil {
		t.Fatalf("half-open admitted %v %v %v, want two probes then a refusal", err1, err2, err3)
	}
	d1(nil)
	d2(nil)
	if s := cb.State(); s != gobreaker.StateClosed {
		t.Fatalf("state = %v after two good probes, want closed", s)
	}
}

// TestPolicyBreakersBounded: a server keeps at most maxPolicyBreakers
// breakers for policies' settings, dropping the least recently used; a
// setting seen again gets the same breaker.
func TestPolicyBreakersBounded(t *testing.T) {
	x := &XClient{}
	ep := &endpoint{key: "k"}
	get := func(f uint32) *gobreaker.TwoStepCircuitBreaker[struct{}] {
		s := callSettings{breaker: BreakerSettings{Failures: f}.normalized(), ownBreaker: true}
		return x.breakerFor(ep, &s)
	}
	first := get(1)
	if get(1) != first {
		t.Fatal("the same setting got a new breaker")
	}
	for f := uint32(2); f <= maxPolicyBreakers+2; f++ {
		get(f)
		// Keep 1 recently used: the others are older.
		(*ep.pbs.Load())[0].used.Store(time.Now().Unix() + int64(f))
	}
	if n := len(*ep.pbs.Load()); n != maxPolicyBreakers {
		t.Fatalf("%d breakers kept, want %d", n, maxPolicyBreakers)
	}
	if ep.findPolicyBreaker(BreakerSettings{Failures: 1}.normalized()) == nil {
		t.Fatal("the most recently used breaker was dropped")
	}
	if get(1) != first {
		t.Fatal("the most recently used breaker was replaced")
	}
	if ep.findPolicyBreaker(BreakerSettings{Failures: 2}.normalized()) != nil {
		t.Fatal("the least recently used breaker was kept")
	}
	if s := (callSettings{breaker: BreakerSettings{Disabled: true}, ownBreaker: true}); x.breakerFor(ep, &s) != nil {
		t.Fatal("a disabled setting got a breaker")
	}
}
