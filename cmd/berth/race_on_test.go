//go:build race

package main

// raceEnabled: the test binary is built with -race, so the berth binary the
// subprocess tests build uses -race too and reuses the same compiled packages.
const raceEnabled = true
