//go:build race

package examples_test

// raceEnabled makes TestPrograms build the programs with -race too.
const raceEnabled = true
