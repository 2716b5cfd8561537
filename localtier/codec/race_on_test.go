//go:build race

package codec

// raceEnabled: sync.Pool drops items at random under the race detector.
const raceEnabled = true
