//go:build race

package analyze

// raceSlowdown scales the time bounds of tests: the race detector makes
// replays about ten times slower.
const raceSlowdown = 10
