//go:build race

package memory

// raceOn reports that the race detector is on: the long randomized tests
// then run shorter.
const raceOn = true
