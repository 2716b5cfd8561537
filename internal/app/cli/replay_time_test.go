package cli

import "testing"

// TestParseReplayTimeSubMillisecond: record timestamps are whole
// milliseconds, so the range [--from, --to) holds a record at ts exactly when
// ceil(from) <= ts < ceil(to): a time between two milliseconds is rounded up,
// never truncated (which would include a record before --from and leave out
// one before --to).
func TestParseReplayTimeSubMillisecond(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
	}{
		{"1970-01-01T00:00:01Z", 1000},
		{"1970-01-01T00:00:01.000Z", 1000},
		{"1970-01-01T00:00:01.0005Z", 1001},
		{"1970-01-01T00:00:01.999999999Z", 2000},
		{"2024-05-01T00:00:00.123456Z", 1714521600124},
		{"1714521600123", 1714521600123},
	} {
		got, err := parseReplayTime("from", tc.in)
		if err != nil || got != tc.want {
			t.Errorf("%s: got %d (%v), want %d", tc.in, got, err, tc.want)
		}
	}
}
