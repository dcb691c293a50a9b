//go:build race

package dlocktest_test

const raceEnabled = true
