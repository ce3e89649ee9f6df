//go:build race

package compress_test

// raceEnabled: under the race detector sync.Pool drops a quarter of what
// is put back, at random, so pooled decoders are rebuilt more often.
const raceEnabled = true
