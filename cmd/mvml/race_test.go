//go:build race

package main

// raceEnabled says that the test binary runs with the race detector.
const raceEnabled = true
