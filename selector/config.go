package selector

import (
	"errors"
	"strings"
	"time"

	"github.com/fleetrpc/fleet"
)

// P2CConfig configures NewP2C. The zero value works: every zero field
// means the default documented on it.
type P2CConfig struct {
	// Decay is the time constant τ of the latency EWMA: a sample arriving
	// Δ after the previous one has weight 1-exp(-Δ/τ), and an estimate
	// left without samples falls by a factor e every τ. Zero or negative
	// means DefaultDecay (10 s).
	Decay time.Duration
	// ErrorPenalty is the latency recorded for a failed call (when the
	// call itself took less). Zero or negative means DefaultErrorPenalty
	// (1 s).
	ErrorPenalty time.Duration
}

// HashConfig configures NewConsistentHash. The zero value works: every
// zero field means the default documented on it.
type HashConfig struct {
	// VirtualNodes is the number of points each server has on the ring.
	// Zero or negative means DefaultVirtualNodes (160).
	VirtualNodes int
	// WeightedNodes multiplies VirtualNodes by each server's
	// registry.Instance.EffectiveWeight (up to 65,536 points per server).
	// False means every server has VirtualNodes points.
	WeightedNodes bool
}

// GeoConfig configures NewGeo. The zero value works: every zero field
// means the default documented on it.
type GeoConfig struct {
	// Latitude and Longitude are the client's location, in decimal
	// degrees. (0, 0), the zero value, means unknown: every server is
	// then equally near.
	Latitude, Longitude float64
	// NearKm is the tolerance in kilometres: servers whose distance is
	// within NearKm of the nearest one's share its traffic at random.
	// Zero or negative means DefaultNearKm (10 km).
	NearKm float64
}

// Config holds the settings of every configurable selector, for New,
// which builds a selector by name: each selector gets only its own part.
// The zero value works.
type Config struct {
	P2C  P2CConfig  // used by "p2c"
	Hash HashConfig // used by "hash"
	Geo  GeoConfig  // used by "geo"
}

// The defaults of the selectors' settings.
const (
	DefaultDecay        = 10 * time.Second
	DefaultErrorPenalty = time.Second
	DefaultVirtualNodes = 160
	DefaultNearKm       = 10.0
)

func (c P2CConfig) decay() time.Duration {
	if c.Decay <= 0 {
		return DefaultDecay
	}
	return c.Decay
}

func (c P2CConfig) errorPenalty() time.Duration {
	if c.ErrorPenalty <= 0 {
		return DefaultErrorPenalty
	}
	return c.ErrorPenalty
}

func (c HashConfig) virtualNodes() int {
	if c.VirtualNodes <= 0 {
		return DefaultVirtualNodes
	}
	return min(c.VirtualNodes, maxPointsPerServer)
}

func (c GeoConfig) nearKm() float64 {
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
//	"p2c"          NewP2C(cfg.P2C)
//	"hash"         NewConsistentHash(cfg.Hash)
//	"geo"          NewGeo(cfg.Geo)
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
		return NewP2C(cfg.P2C), nil
	case "hash":
		return NewConsistentHash(cfg.Hash), nil
	case "geo":
		return NewGeo(cfg.Geo), nil
	}
	return nil, fleet.Errorf(fleet.InvalidArgument, "selector: %w %q (want one of %s)",
		ErrUnknown, name, strings.Join(names, ", "))
}
