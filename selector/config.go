package selector

import (
	"errors"
	"strings"
	"time"

	"github.com/fleetrpc/fleet"
)

// Config holds the options of every selector in this package; each selector
// reads only its own fields and ignores the rest. The zero value works:
// every zero field means the default documented on it.
type Config struct {
	// Decay is the time constant τ of p2c's latency EWMA: a sample arriving
	// Δ after the previous one has weight 1-exp(-Δ/τ), and an estimate
	// left without samples falls by a factor e every τ. Zero or negative
	// means 10 s.
	Decay time.Duration
	// ErrorPenalty is the latency p2c records for a failed call (when the
	// call itself took less). Zero or negative means 1 s.
	ErrorPenalty time.Duration

	// VirtualNodes is the number of points each server has on hash's ring.
	// Zero or negative means 160.
	VirtualNodes int
	// WeightedNodes multiplies hash's VirtualNodes by each server's
	// registry.Instance.EffectiveWeight (up to 65,536 points per server).
	// False means every server has VirtualNodes points.
	WeightedNodes bool

	// Latitude and Longitude are the client's location for geo, in
	// decimal degrees. (0, 0), the zero value, means unknown: every server
	// is then equally near.
	Latitude, Longitude float64
	// NearKm is geo's tolerance in kilometres: servers whose distance is
	// within NearKm of the nearest one's share its traffic at random.
	// Zero or negative means 10 km.
	NearKm float64
}

// The defaults of Config's fields.
const (
	DefaultDecay        = 10 * time.Second
	DefaultErrorPenalty = time.Second
	DefaultVirtualNodes = 160
	DefaultNearKm       = 10.0
)

func (c Config) decay() time.Duration {
	if c.Decay <= 0 {
		return DefaultDecay
	}
	return c.Decay
}

func (c Config) errorPenalty() time.Duration {
	if c.ErrorPenalty <= 0 {
		return DefaultErrorPenalty
	}
	return c.ErrorPenalty
}

func (c Config) virtualNodes() int {
	if c.VirtualNodes <= 0 {
		return DefaultVirtualNodes
	}
	return min(c.VirtualNodes, maxPointsPerServer)
}

func (c Config) nearKm() float64 {
	if !(c.NearKm > 0) { // also catches NaN
		return DefaultNearKm
	}
	return c.NearKm
}

// names lists the selectors New knows, in the order Names returns them.
var names = []string{"random", "roundrobin", "weighted", "leastloaded", "p2c", "hash", "geo"}

// Names returns the names New accepts: "random", "roundrobin", "weighted",
// "leastloaded", "p2c", "hash" and "geo". The slice is the caller's.
func Names() []string { return append([]string(nil), names...) }

// ErrUnknown is wrapped by the error New returns for a name it does not
// know, so errors.Is(err, ErrUnknown) holds.
var ErrUnknown = errors.New("unknown selector")

// New returns the selector with the given name, case-insensitive, built
// from cfg:
//
//	"random"       NewRandom()
//	"roundrobin"   NewRoundRobin()
//	"weighted"     NewWeightedRoundRobin()
//	"leastloaded"  NewLeastLoaded()
//	"p2c"          NewP2C(cfg)
//	"hash"         NewConsistentHash(cfg)
//	"geo"          NewGeo(cfg)
//
// For any other name it returns a *fleet.Error with code InvalidArgument
// that wraps ErrUnknown.
func New(name string, cfg Config) (Selector, error) {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "random":
		return NewRandom(), nil
	case "roundrobin":
		return NewRoundRobin(), nil
	case "weighted":
		return NewWeightedRoundRobin(), nil
	case "leastloaded":
		return NewLeastLoaded(), nil
	case "p2c":
		return NewP2C(cfg), nil
	case "hash":
		return NewConsistentHash(cfg), nil
	case "geo":
		return NewGeo(cfg), nil
	}
	return nil, fleet.Errorf(fleet.InvalidArgument, "selector: %w %q (want one of %s)",
		ErrUnknown, name, strings.Join(names, ", "))
}
