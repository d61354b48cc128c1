//go:build !race

package analyze

// raceSlowdown scales the time bounds of tests: 1 without the race
// detector.
const raceSlowdown = 1
