//go:build race

package transport

// raceEnabled reports a build with the race detector.
const raceEnabled = true
