package selector

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
	"sync/atomic"

	"github.com/fleetrpc/fleet/registry"
)

// NewGeo returns a Selector that prefers the server nearest to the client at
// cfg.Latitude, cfg.Longitude (decimal degrees, WGS 84, as in
// registry.Instance). Update computes each server's great-circle distance
// once, with the haversine formula on a sphere of the Earth's mean radius
// (6371.0088 km), and sorts the servers by it. Select returns the nearest
// server not excluded; when other servers are within cfg.NearKm (default
// 10 km) of that one's distance, it chooses uniformly at random among them,
// so servers in one city or data centre share the load.
//
// The point (0, 0) means "location unknown": servers there rank after every
// located server, and a client there (the zero GeoConfig) treats all servers
// as equally near. Select allocates nothing and never blocks.
func NewGeo(cfg GeoConfig) Selector {
	return &geo{lat: cfg.Latitude, lon: cfg.Longitude, near: cfg.nearKm()}
}

type geo struct {
	lat, lon, near float64
	snap           atomic.Pointer[geoSnapshot]
}

type geoSnapshot struct {
	keys []string  // by ascending distance
	end  []int     // end[i]: one past the last server within near of keys[i]'s distance
	dist []float64 // km; +Inf when unknown
}

// earthRadiusKm is the mean radius of the Earth (IUGG), in kilometres.
const earthRadiusKm = 6371.0088

// haversineKm returns the great-circle distance in kilometres between two
// points given in decimal degrees.
func haversineKm(lat1, lon1, lat2, lon2 float64) float64 {
	const rad = math.Pi / 180
	φ1, φ2 := lat1*rad, lat2*rad
	dφ, dλ := (lat2-lat1)*rad, (lon2-lon1)*rad
	s1, s2 := math.Sin(dφ/2), math.Sin(dλ/2)
	a := s1*s1 + math.Cos(φ1)*math.Cos(φ2)*s2*s2
	return 2 * earthRadiusKm * math.Asin(math.Min(1, math.Sqrt(a)))
}

func (s *geo) Update(servers []registry.Instance) {
	type server struct {
		key  string
		dist float64
	}
	clientKnown := s.lat != 0 || s.lon != 0
	list := make([]server, 0, len(servers))
	for i := range servers {
		in := &servers[i]
		if !usable(in) {
			continue
		}
		d := 0.0
		switch {
		case !clientKnown:
		case in.Latitude == 0 && in.Longitude == 0:
			d = math.Inf(1)
		default:
			d = haversineKm(s.lat, s.lon, in.Latitude, in.Longitude)
		}
		list = append(list, server{in.Key(), d})
	}
	slices.SortFunc(list, func(a, b server) int {
		if c := cmp.Compare(a.dist, b.dist); c != 0 {
			return c
		}
		return cmp.Compare(a.key, b.key)
	})
	list = slices.CompactFunc(list, func(a, b server) bool { return a.key == b.key })
	sn := &geoSnapshot{
		keys: make([]string, len(list)),
		end:  make([]int, len(list)),
		dist: make([]float64, len(list)),
	}
	j := 0
	for i, sv := range list {
		sn.keys[i], sn.dist[i] = sv.key, sv.dist
		j = max(j, i+1)
		for j < len(list) && list[j].dist <= sv.dist+s.near {
			j++
		}
		sn.end[i] = j
	}
	s.snap.Store(sn)
}

func (s *geo) Select(p *Pick) string {
	sn := s.snap.Load()
	if sn == nil || len(sn.keys) == 0 {
		return ""
	}
	ex := excludeOf(p)
	if ex == nil {
		return sn.keys[rand.N(sn.end[0])]
	}
	for i, k := range sn.keys {
		if ex(k) {
			continue
		}
		// k is the nearest allowed; choose among the allowed near it.
		chosen, seen := k, 1
		for _, k2 := range sn.keys[i+1 : sn.end[i]] {
			if ex(k2) {
				continue
			}
			seen++
			if rand.N(seen) == 0 {
				chosen = k2
			}
		}
		return chosen
	}
	return ""
}
