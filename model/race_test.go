//go:build race

package model

// raceEnabled says that the test binary runs with the race detector,
// under which sync.Pool drops what it holds at random (the BLAS's
// packing buffers are then allocated again).
const raceEnabled = true
