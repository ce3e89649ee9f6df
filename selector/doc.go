// Package selector chooses the server for each call of a service: the
// load-balancing half of Fleet's service governance.
//
// A [Selector] has two methods. Update receives the service's current
// instances (typically each list a registry.Discovery watch delivers) and
// builds an immutable snapshot that it swaps in atomically; Select reads the
// current snapshot and returns the chosen server's registry.Instance.Key,
// or "" when no server is available. Select never blocks on Update and
// allocates nothing, so it is safe on the hot path of every call; this is
// the picker design of grpc-go's balancer package ("Pick should not
// block").
//
// Every selector in this package
//
//   - skips instances whose State is registry.Draining, and instances whose
//     Key is empty;
//   - honours [Pick].Exclude, returning "" when every server is excluded;
//   - is safe for concurrent use: any number of goroutines may call Select,
//     Update and (for an [Observer]) Begin and End at the same time.
//
// The selectors:
//
//   - [NewRandom]: uniformly random, from math/rand/v2's lock-free
//     per-thread generator.
//   - [NewRoundRobin]: in turn, from one atomic counter.
//   - [NewWeightedRoundRobin]: nginx's smooth weighted round robin, in
//     proportion to registry.Instance.EffectiveWeight.
//   - [NewLeastLoaded]: the server with the fewest calls in flight from this
//     client (an [Observer]), then the fewest the server itself reports.
//   - [NewP2C] ([P2CConfig]): "power of two choices" over a peak-EWMA
//     latency score (an [Observer]), after Mitzenmacher and Finagle's and
//     linkerd's balancers.
//   - [NewConsistentHash] ([HashConfig]): a ring of virtual nodes keyed by
//     [Pick].Key, so one key keeps reaching one server while the set of
//     servers changes little.
//   - [NewGeo] ([GeoConfig]): the nearest server by great-circle distance
//     from the client's latitude and longitude.
//
// Each constructor takes only the settings that mean something to it; the
// zero value of each settings struct gives the documented defaults. [New]
// builds any of them by name ("random", "roundrobin", "weighted",
// "leastloaded", "p2c", "hash", "geo") from a [Config] that holds one part
// per configurable selector; it is what the command line uses. [Filtered]
// narrows a selector to the instances that pass some [Filter]s ([ByGroup],
// [ByVersion], [ByTags]), applied in Update so that Select stays free.
//
// The interfaces are public, so a user-written Selector works wherever one
// of these does. Selectors that learn from outcomes implement [Observer];
// the client finds it by type assertion and calls Begin when it sends a call
// and End when the call completes.
//
// # Owns and imports
//
// This package owns choosing a server and nothing else: it does not dial,
// retry or time calls (the client does). It imports only the root package
// and registry (for registry.Instance); it must not import client, server,
// protocol or any registry backend. The root package's TestPackageImports
// checks this.
package selector
