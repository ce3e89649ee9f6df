package selector_test

import (
	"slices"
	"testing"

	"github.com/fleetrpc/fleet/registry"
	"github.com/fleetrpc/fleet/selector"
)

// Distances from Paris (48.8566, 2.3522): Paris-Est about 2 km, London
// about 344 km, Frankfurt about 479 km, Madrid about 1054 km.
var cities = []registry.Instance{
	{Service: "S", Addr: "madrid:1", Latitude: 40.4168, Longitude: -3.7038},
	{Service: "S", Addr: "london:1", Latitude: 51.5074, Longitude: -0.1278},
	{Service: "S", Addr: "paris:1", Latitude: 48.8566, Longitude: 2.3522},
	{Service: "S", Addr: "paris-est:1", Latitude: 48.8769, Longitude: 2.3592},
	{Service: "S", Addr: "frankfurt:1", Latitude: 50.1109, Longitude: 8.6821},
	{Service: "S", Addr: "nowhere:1"}, // location unknown
}

func TestGeo(t *testing.T) {
	paris := selector.GeoConfig{Latitude: 48.8566, Longitude: 2.3522}
	withNear := func(km float64) selector.GeoConfig { c := paris; c.NearKm = km; return c }
	tests := []struct {
		name    string
		cfg     selector.GeoConfig
		servers []string // subset of cities by Addr; nil: all
		exclude []string
		want    []string // the servers that may be chosen, each at some point
	}{
		{name: "nearest two share", cfg: paris, want: []string{"paris:1", "paris-est:1"}},
		{name: "exact only", cfg: withNear(0.5), want: []string{"paris:1"}},
		{name: "next nearest", cfg: paris, exclude: []string{"paris:1", "paris-est:1"}, want: []string{"london:1"}},
		{name: "one of the near excluded", cfg: paris, exclude: []string{"paris:1"}, want: []string{"paris-est:1"}},
		{name: "wide tolerance", cfg: withNear(150), exclude: []string{"paris:1", "paris-est:1"}, want: []string{"london:1", "frankfurt:1"}},
		{name: "narrower tolerance", cfg: withNear(130), exclude: []string{"paris:1", "paris-est:1"}, want: []string{"london:1"}},
		{name: "unknown location last", cfg: paris, servers: []string{"nowhere:1", "madrid:1"}, want: []string{"madrid:1"}},
		{name: "only unknown", cfg: paris, servers: []string{"nowhere:1"}, want: []string{"nowhere:1"}},
		{name: "client unknown", cfg: selector.GeoConfig{}, servers: []string{"madrid:1", "london:1", "nowhere:1"},
			want: []string{"madrid:1", "london:1", "nowhere:1"}},
		{name: "from Madrid", cfg: selector.GeoConfig{Latitude: 40.4, Longitude: -3.7}, want: []string{"madrid:1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			list := cities
			if tt.servers != nil {
				list = slices.DeleteFunc(slices.Clone(cities), func(in registry.Instance) bool {
					return !slices.Contains(tt.servers, in.Addr)
				})
			}
			s := selector.NewGeo(tt.cfg)
			s.Update(list)
			p := &selector.Pick{}
			if tt.exclude != nil {
				p.Exclude = excludeSet(tt.exclude...)
			}
			seen := map[string]int{}
			for range 400 {
				k := s.Select(p)
				if !slices.Contains(tt.want, k) {
					t.Fatalf("Select = %q, want one of %q", k, tt.want)
				}
				seen[k]++
			}
			for _, k := range tt.want {
				if seen[k] < 400/len(tt.want)/2 {
					t.Errorf("not spread: %v", seen)
				}
			}
		})
	}
}
