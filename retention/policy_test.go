package retention

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var now = time.UnixMilli(1_700_000_000_000)

const (
	hour = int64(time.Hour / time.Millisecond)
	day  = 24 * hour
)

// ago is a timestamp d milliseconds before now.
func ago(d int64) int64 { return now.UnixMilli() - d }

// seg describes a test segment: size and age of its largest timestamp.
type seg struct {
	size int64
	age  int64 // ms before now; -1 = no timestamp
	up   bool  // uploaded (Remote)
}

// build lays segments out contiguously, 100 offsets each; the last is active
// unless lastInactive.
func build(ss []seg, lastInactive bool) []Segment {
	out := make([]Segment, len(ss))
	for i, s := range ss {
		ts := int64(-1)
		if s.age >= 0 {
			ts = ago(s.age)
		}
		out[i] = Segment{BaseOffset: int64(i) * 100, LastOffset: int64(i)*100 + 99, Size: s.size, MaxTimestamp: ts,
			Active: i == len(ss)-1 && !lastInactive, Uploaded: s.up}
	}
	return out
}

func cfgOf(t testing.TB, overrides map[string]string) topicconfig.Config {
	t.Helper()
	c, err := topicconfig.Parse(overrides)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

type want struct {
	reasons []Reason // one per deleted segment, oldest first
	start   int64
	beat    []bool // SizeBeatTime per deletion; nil = all false
	held    string // substring of Decision.Held; "" = empty
}

func checkDecision(t *testing.T, d Decision, segs []Segment, w want) {
	t.Helper()
	if len(d.Delete) != len(w.reasons) {
		t.Fatalf("deleted %d segments %+v, want %d (%v)", len(d.Delete), d.Delete, len(w.reasons), w.reasons)
	}
	for i, del := range d.Delete {
		if del.Segment != segs[i] {
			t.Errorf("deletion %d is segment %+v, want %+v (not a prefix)", i, del.Segment, segs[i])
		}
		if del.Reason != w.reasons[i] {
			t.Errorf("deletion %d reason %q, want %q", i, del.Reason, w.reasons[i])
		}
		wb := w.beat != nil && w.beat[i]
		if del.SizeBeatTime != wb {
			t.Errorf("deletion %d SizeBeatTime = %v, want %v", i, del.SizeBeatTime, wb)
		}
	}
	if d.NewLogStartOffset != w.start {
		t.Errorf("NewLogStartOffset = %d, want %d", d.NewLogStartOffset, w.start)
	}
	anyBeat := false
	for _, b := range w.beat {
		anyBeat = anyBeat || b
	}
	if d.SizeBeatTime != anyBeat {
		t.Errorf("Decision.SizeBeatTime = %v, want %v", d.SizeBeatTime, anyBeat)
	}
	if (w.held == "") != (d.Held == "") || !strings.Contains(d.Held, w.held) {
		t.Errorf("Held = %q, want containing %q", d.Held, w.held)
	}
}

func TestLocal(t *testing.T) {
	old := 8 * day    // past the 7-day default
	young := 1 * hour // well within it
	ms, bytes := ReasonRetentionMs, ReasonRetentionBytes
	lms, lbytes := ReasonLocalRetentionMs, ReasonLocalRetentionBytes
	ls := ReasonLogStartOffset
	uploadedTo := func(h int64) RemoteState { return RemoteState{Consulted: true, HighestOffset: h} }
	tests := []struct {
		name     string
		cfg      map[string]string
		segs     []seg
		logStart int64
		remote   RemoteState
		want     want
	}{
		{name: "nothing old", segs: []seg{{100, young, false}, {100, young, false}}, want: want{start: 0}},
		{name: "retention.ms deletes expired segments, oldest first",
			segs: []seg{{100, old, false}, {100, old, false}, {100, young, false}, {10, young, false}},
			want: want{reasons: []Reason{ms, ms}, start: 200}},
		{name: "retention.ms uses the largest timestamp: a later expired segment behind a young one stays",
			segs: []seg{{100, old, false}, {100, young, false}, {100, old, false}, {10, young, false}},
			want: want{reasons: []Reason{ms}, start: 100}},
		{name: "retention.ms boundary is strict (now - max > retention.ms)",
			cfg:  map[string]string{"retention.ms": "1000"},
			segs: []seg{{100, 1000, false}, {100, 1001, false}, {10, 0, false}},
			want: want{start: 0}},
		{name: "retention.ms just past", cfg: map[string]string{"retention.ms": "1000"},
			segs: []seg{{100, 1001, false}, {100, 1000, false}, {10, 0, false}},
			want: want{reasons: []Reason{ms}, start: 100}},
		{name: "the active segment is never deleted, even expired",
			segs: []seg{{100, old, false}, {100, old, false}},
			want: want{reasons: []Reason{ms}, start: 100}},
		{name: "a lone active segment stays", segs: []seg{{100, old, false}}, want: want{start: 0}},
		{name: "retention.ms -1 is unlimited", cfg: map[string]string{"retention.ms": "-1"},
			segs: []seg{{100, 1000 * day, false}, {100, old, false}}, want: want{start: 0}},
		{name: "unknown timestamp is never expired", cfg: map[string]string{"retention.ms": "1"},
			segs: []seg{{0, -1, false}, {100, old, false}, {10, 0, false}}, want: want{start: 0}},
		{name: "retention.bytes trims while the rest is still at least the cap",
			cfg:  map[string]string{"retention.bytes": "250"},
			segs: []seg{{100, young, false}, {100, young, false}, {100, young, false}, {100, young, false}},
			want: want{reasons: []Reason{bytes}, start: 100, beat: []bool{true}}},
		{name: "retention.bytes exactly reached", cfg: map[string]string{"retention.bytes": "200"},
			segs: []seg{{100, young, false}, {100, young, false}, {100, young, false}, {100, young, false}},
			want: want{reasons: []Reason{bytes, bytes}, start: 200, beat: []bool{true, true}}},
		{name: "retention.bytes exactly at the cap still drops empty closed segments (Kafka runs the pass at size == cap)",
			cfg:  map[string]string{"retention.bytes": "200"},
			segs: []seg{{0, young, false}, {100, young, false}, {100, young, false}},
			want: want{reasons: []Reason{bytes}, start: 100, beat: []bool{true}}},
		{name: "retention.bytes under the cap deletes nothing", cfg: map[string]string{"retention.bytes": "401"},
			segs: []seg{{100, young, false}, {100, young, false}, {100, young, false}, {100, young, false}},
			want: want{start: 0}},
		{name: "retention.bytes stops at a segment that would take the log under the cap",
			cfg:  map[string]string{"retention.bytes": "250"},
			segs: []seg{{50, young, false}, {300, young, false}, {100, young, false}, {50, young, false}},
			want: want{reasons: []Reason{bytes}, start: 100, beat: []bool{true}}},
		{name: "retention.bytes -1 is unlimited", cfg: map[string]string{"retention.bytes": "-1"},
			segs: []seg{{1 << 40, young, false}, {1 << 40, young, false}}, want: want{start: 0}},
		{name: "retention.bytes 0 deletes every closed segment", cfg: map[string]string{"retention.bytes": "0"},
			segs: []seg{{100, young, false}, {100, young, false}, {100, young, false}},
			want: want{reasons: []Reason{bytes, bytes}, start: 200, beat: []bool{true, true}}},
		{name: "byte cap beats time: 1-hour-old data goes under a 7-day promise",
			cfg:  map[string]string{"retention.bytes": "1000", "retention.ms": fmt.Sprint(7 * day)},
			segs: []seg{{600, 3 * hour, false}, {600, 2 * hour, false}, {600, young, false}},
			want: want{reasons: []Reason{bytes}, start: 100, beat: []bool{true}}},
		{name: "size deletion of expired data is not flagged; time continues after size",
			cfg:  map[string]string{"retention.bytes": "350"},
			segs: []seg{{100, old, false}, {100, old, false}, {100, old, false}, {100, young, false}, {100, young, false}},
			want: want{reasons: []Reason{bytes, ms, ms}, start: 300, beat: []bool{false, false, false}}},
		{name: "size runs before time (Kafka order): size reason and flag on a young first segment",
			cfg:  map[string]string{"retention.bytes": "300"},
			segs: []seg{{100, young, false}, {100, old, false}, {100, young, false}, {100, young, false}, {10, young, false}},
			want: want{reasons: []Reason{bytes, ms}, start: 200, beat: []bool{true, false}}},
		{name: "size with unlimited time is not flagged", cfg: map[string]string{"retention.bytes": "100", "retention.ms": "-1"},
			segs: []seg{{100, young, false}, {100, young, false}},
			want: want{reasons: []Reason{bytes}, start: 100}},
		{name: "size never takes the active segment", cfg: map[string]string{"retention.bytes": "0"},
			segs: []seg{{100, young, false}, {1000, young, false}},
			want: want{reasons: []Reason{bytes}, start: 100, beat: []bool{true}}},
		{name: "compact deletes nothing by age or size",
			cfg:  map[string]string{"cleanup.policy": "compact", "retention.bytes": "0", "retention.ms": "1"},
			segs: []seg{{100, old, false}, {100, old, false}, {100, old, false}}, want: want{start: 0}},
		{name: "compact still drops segments below the log start offset",
			cfg:  map[string]string{"cleanup.policy": "compact", "retention.bytes": "0"},
			segs: []seg{{100, old, false}, {100, old, false}, {100, old, false}}, logStart: 150,
			want: want{reasons: []Reason{ls}, start: 150}},
		{name: "empty cleanup.policy deletes only below the log start offset",
			cfg:  map[string]string{"cleanup.policy": "", "retention.ms": "1"},
			segs: []seg{{100, old, false}, {100, old, false}, {100, old, false}}, logStart: 200,
			want: want{reasons: []Reason{ls, ls}, start: 200}},
		{name: "compact,delete applies time and size",
			cfg:  map[string]string{"cleanup.policy": "compact,delete", "retention.bytes": "250"},
			segs: []seg{{100, young, false}, {100, old, false}, {100, young, false}, {100, young, false}},
			want: want{reasons: []Reason{bytes, ms}, start: 200, beat: []bool{true, false}}},
		{name: "log start offset: wholly-below segments go first, the start never moves back",
			segs: []seg{{100, young, false}, {100, young, false}, {100, young, false}}, logStart: 150,
			want: want{reasons: []Reason{ls}, start: 150}},
		{name: "log start offset at a segment boundary", segs: []seg{{100, young, false}, {100, young, false}, {100, young, false}},
			logStart: 200, want: want{reasons: []Reason{ls, ls}, start: 200}},
		{name: "time deletion below a higher log start keeps the higher start",
			segs: []seg{{100, old, false}, {100, young, false}, {100, young, false}}, logStart: 150,
			want: want{reasons: []Reason{ls}, start: 150}},
		{name: "size is measured after the log-start pass", cfg: map[string]string{"retention.bytes": "200"},
			segs: []seg{{100, young, false}, {100, young, false}, {100, young, false}, {100, young, false}}, logStart: 100,
			want: want{reasons: []Reason{ls, bytes}, start: 200, beat: []bool{false, true}}},
		{name: "remote on without a remote tier: nothing local goes, not even below the log start",
			cfg:  map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1000"},
			segs: []seg{{100, old, false}, {100, old, false}, {100, young, false}}, logStart: 100,
			want: want{start: 100, held: "no remote tier was consulted"}},
		{name: "remote on: local.retention.ms deletes uploaded segments, stops at the first not uploaded",
			cfg:    map[string]string{"remote.storage.enable": "true", "local.retention.ms": fmt.Sprint(hour)},
			segs:   []seg{{100, 3 * hour, false}, {100, 3 * hour, false}, {100, 3 * hour, false}, {100, 0, false}},
			remote: uploadedTo(199),
			want:   want{reasons: []Reason{lms, lms}, start: 200, held: "segment 200..299 (local.retention.ms) is not yet in the remote tier, which holds offsets up to 199"}},
		{name: "remote on: a segment partly uploaded stays", cfg: map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1"},
			segs: []seg{{100, old, false}, {100, old, false}}, remote: uploadedTo(98),
			want: want{start: 0, held: "segment 0..99"}},
		{name: "remote on: nothing uploaded yet", cfg: map[string]string{"remote.storage.enable": "true", "local.retention.ms": "1"},
			segs: []seg{{100, old, false}, {100, old, false}}, remote: uploadedTo(-1),
			want: want{start: 0, held: "holds offsets up to -1"}},
		{name: "remote on: local.retention.ms -2 follows retention.ms",
			cfg:    map[string]string{"remote.storage.enable": "true", "retention.ms": fmt.Sprint(2 * hour)},
			segs:   []seg{{100, 3 * hour, false}, {100, hour, false}, {100, 0, false}},
			remote: uploadedTo(1 << 40), want: want{reasons: []Reason{lms}, start: 100}},
		{name: "remote on: local.retention.bytes -2 follows retention.bytes",
			cfg:    map[string]string{"remote.storage.enable": "true", "retention.bytes": "200", "retention.ms": "-1"},
			segs:   []seg{{100, young, false}, {100, young, false}, {100, young, false}},
			remote: uploadedTo(1 << 40), want: want{reasons: []Reason{lbytes}, start: 100}},
		{name: "remote on: local byte cap beats local time, flagged against local.retention.ms",
			cfg: map[string]string{"remote.storage.enable": "true", "retention.bytes": "10000", "local.retention.bytes": "100",
				"local.retention.ms": fmt.Sprint(day)},
			segs:   []seg{{100, young, false}, {100, young, false}, {100, young, false}},
			remote: uploadedTo(1 << 40), want: want{reasons: []Reason{lbytes, lbytes}, start: 200, beat: []bool{true, true}}},
		{name: "remote on: retention.ms does not apply locally, local.retention.ms does",
			cfg:    map[string]string{"remote.storage.enable": "true", "retention.ms": fmt.Sprint(day), "local.retention.ms": fmt.Sprint(hour)},
			segs:   []seg{{100, 2 * hour, false}, {100, 2 * hour, false}, {100, 0, false}},
			remote: uploadedTo(1 << 40), want: want{reasons: []Reason{lms, lms}, start: 200}},
		{name: "remote on: log start breach of an uploaded segment",
			cfg:  map[string]string{"remote.storage.enable": "true"},
			segs: []seg{{100, young, false}, {100, young, false}, {100, young, false}}, logStart: 100,
			remote: uploadedTo(99), want: want{reasons: []Reason{ls}, start: 100}},
		{name: "remote off: a remote state is ignored", cfg: map[string]string{"retention.ms": "1"},
			segs: []seg{{100, old, false}, {100, old, false}}, remote: RemoteState{},
			want: want{reasons: []Reason{ms}, start: 100}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs := build(tt.segs, false)
			d := Local(segs, cfgOf(t, tt.cfg), tt.logStart, now, tt.remote)
			checkDecision(t, d, segs, tt.want)
		})
	}
}

// The last segment is the active one even when the caller forgot to mark it.
func TestLocalLastSegmentIsActive(t *testing.T) {
	segs := build([]seg{{100, 8 * day, false}, {100, 8 * day, false}}, true)
	d := Local(segs, cfgOf(t, map[string]string{"retention.bytes": "0"}), 1000, now, RemoteState{})
	if len(d.Delete) != 1 || d.Delete[0].Segment.BaseOffset != 0 {
		t.Fatalf("deleted %+v, want only the first segment", d.Delete)
	}
}

func TestRemote(t *testing.T) {
	ms, bytes, ls := ReasonRetentionMs, ReasonRetentionBytes, ReasonLogStartOffset
	tests := []struct {
		name     string
		cfg      map[string]string
		segs     []seg
		logStart int64
		want     want
	}{
		{name: "retention.ms over uploaded segments; local-only data stops it",
			segs: []seg{{100, 8 * day, true}, {100, 8 * day, true}, {100, 8 * day, false}, {100, 0, false}},
			want: want{reasons: []Reason{ms, ms}, start: 200}},
		{name: "remote time boundary is inclusive (max <= now - retention.ms)", cfg: map[string]string{"retention.ms": "1000"},
			segs: []seg{{100, 1000, true}, {100, 999, true}, {10, 0, false}},
			want: want{reasons: []Reason{ms}, start: 100}},
		{name: "a young segment stops time deletion", segs: []seg{{100, 8 * day, true}, {100, hour, true}, {100, 8 * day, true}, {1, 0, false}},
			want: want{reasons: []Reason{ms}, start: 100}},
		{name: "retention.bytes counts the whole log, local data included",
			cfg:  map[string]string{"retention.bytes": "200"},
			segs: []seg{{100, hour, true}, {100, hour, true}, {100, hour, true}, {100, hour, false}, {50, 0, false}},
			want: want{reasons: []Reason{bytes, bytes}, start: 200, beat: []bool{true, true}}},
		{name: "byte excess exactly zero deletes nothing", cfg: map[string]string{"retention.bytes": "300"},
			segs: []seg{{100, hour, true}, {100, hour, true}, {100, 0, false}}, want: want{start: 0}},
		{name: "a time deletion pays down the byte excess, not below zero",
			cfg:  map[string]string{"retention.bytes": "150", "retention.ms": fmt.Sprint(day)},
			segs: []seg{{200, 2 * day, true}, {100, hour, true}, {100, hour, true}, {100, 0, false}},
			want: want{reasons: []Reason{ms, bytes}, start: 200, beat: []bool{false, true}}},
		{name: "time excess below zero clamps: later young segments stay",
			cfg:  map[string]string{"retention.bytes": "350", "retention.ms": fmt.Sprint(day)},
			segs: []seg{{300, 2 * day, true}, {100, hour, true}, {100, hour, true}},
			want: want{reasons: []Reason{ms}, start: 100}},
		{name: "size with unlimited time is not flagged", cfg: map[string]string{"retention.bytes": "100", "retention.ms": "-1"},
			segs: []seg{{100, hour, true}, {100, 0, false}}, want: want{reasons: []Reason{bytes}, start: 100}},
		{name: "below the log start offset", segs: []seg{{100, hour, true}, {100, hour, true}, {100, hour, true}, {1, 0, false}},
			logStart: 150, want: want{reasons: []Reason{ls}, start: 150}},
		{name: "segments below the log start pay down the byte excess", cfg: map[string]string{"retention.bytes": "200"},
			segs: []seg{{100, hour, true}, {100, hour, true}, {100, hour, true}, {100, 0, false}}, logStart: 100,
			want: want{reasons: []Reason{ls, bytes}, start: 200, beat: []bool{false, true}}},
		{name: "log start at a boundary", segs: []seg{{100, hour, true}, {100, hour, true}, {1, 0, false}},
			logStart: 200, want: want{reasons: []Reason{ls, ls}, start: 200}},
		{name: "first segment not uploaded: nothing", cfg: map[string]string{"retention.ms": "1"},
			segs: []seg{{100, 8 * day, false}, {100, 8 * day, true}}, want: want{start: 0}},
		{name: "unlimited: nothing", cfg: map[string]string{"retention.ms": "-1", "retention.bytes": "-1"},
			segs: []seg{{100, 1000 * day, true}, {1 << 40, 1000 * day, true}, {1, 0, false}}, want: want{start: 0}},
		{name: "compact: only the log start offset", cfg: map[string]string{"cleanup.policy": "compact", "retention.ms": "1"},
			segs: []seg{{100, 8 * day, true}, {100, 8 * day, true}, {1, 0, false}}, logStart: 100,
			want: want{reasons: []Reason{ls}, start: 100}},
		{name: "never the active segment, even uploaded", cfg: map[string]string{"retention.ms": "1"},
			segs: []seg{{100, 8 * day, true}, {100, 8 * day, true}}, want: want{reasons: []Reason{ms}, start: 100}},
		{name: "unknown timestamp is never expired", cfg: map[string]string{"retention.ms": "1"},
			segs: []seg{{100, -1, true}, {100, 8 * day, true}, {1, 0, false}}, want: want{start: 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			segs := build(tt.segs, false)
			d := Remote(segs, cfgOf(t, tt.cfg), tt.logStart, now)
			checkDecision(t, d, segs, tt.want)
		})
	}
}

// Local vs Remote on the same log: local retention trims to local.retention.*
// once uploaded; remote retention trims the whole log by retention.*.
func TestLocalVersusRemote(t *testing.T) {
	cfg := cfgOf(t, map[string]string{"remote.storage.enable": "true", "retention.ms": fmt.Sprint(3 * day), "local.retention.ms": fmt.Sprint(hour)})
	ages := []int64{4 * day, 2 * day, 3 * hour, 30 * 60 * 1000, 0}
	var local, whole []Segment
	for i, a := range ages {
		s := Segment{BaseOffset: int64(i) * 10, LastOffset: int64(i)*10 + 9, Size: 10, MaxTimestamp: ago(a)}
		local = append(local, s)
		s.Uploaded = i < 4
		whole = append(whole, s)
	}
	local[len(local)-1].Active, whole[len(whole)-1].Active = true, true
	ld := Local(local, cfg, 0, now, RemoteState{Consulted: true, HighestOffset: 39})
	if got := reasonsOf(ld); got != "local.retention.ms,local.retention.ms,local.retention.ms" || ld.NewLogStartOffset != 30 {
		t.Errorf("local: %s, start %d", got, ld.NewLogStartOffset)
	}
	rd := Remote(whole, cfg, 0, now)
	if got := reasonsOf(rd); got != "retention.ms" || rd.NewLogStartOffset != 10 {
		t.Errorf("remote: %s, start %d", got, rd.NewLogStartOffset)
	}
	// After remote retention moved the log start to 10, the local copy of
	// segment 0 is below it: deletable for log-start-offset even though the
	// local passes would also take it.
	ld = Local(local, cfg, rd.NewLogStartOffset, now, RemoteState{Consulted: true, HighestOffset: 39})
	if got := reasonsOf(ld); got != "log-start-offset,local.retention.ms,local.retention.ms" {
		t.Errorf("local after remote: %s", got)
	}
}

func reasonsOf(d Decision) string {
	var rs []string
	for _, del := range d.Delete {
		rs = append(rs, string(del.Reason))
	}
	return strings.Join(rs, ",")
}

func TestDecisionHelpers(t *testing.T) {
	var d Decision
	if d.UpTo() != -1 || d.Bytes() != 0 {
		t.Fatalf("empty decision: UpTo %d Bytes %d", d.UpTo(), d.Bytes())
	}
	d.Delete = []Deletion{{Segment: Segment{BaseOffset: 0, LastOffset: 9, Size: 5}}, {Segment: Segment{BaseOffset: 10, LastOffset: 19, Size: 7}}}
	if d.UpTo() != 20 || d.Bytes() != 12 {
		t.Fatalf("UpTo %d Bytes %d", d.UpTo(), d.Bytes())
	}
	got := FromLog([]localtier.SegmentInfo{{BaseOffset: 5, NextOffset: 5, Size: 0, MaxTimestamp: -1, Active: true}})
	if got[0] != (Segment{BaseOffset: 5, LastOffset: 4, MaxTimestamp: -1, Active: true}) {
		t.Fatalf("FromLog = %+v", got)
	}
	if len(Reasons()) != 5 {
		t.Fatal("Reasons")
	}
}

// randomConfig returns a valid topic config drawn from the interesting values.
func randomConfig(rng *rand.Rand) topicconfig.Config {
	c := topicconfig.Defaults()
	pick := func(vs ...int64) int64 { return vs[rng.Intn(len(vs))] }
	c.RetentionMs = pick(-1, 0, 1, 1000, hour, day, 7*day)
	c.RetentionBytes = pick(-1, 0, 50, 200, 1000, 5000)
	switch rng.Intn(4) {
	case 0:
		c.CleanupPolicy = topicconfig.Policy{Compact: true}
	case 1:
		c.CleanupPolicy = topicconfig.Policy{Compact: true, Delete: true}
	case 2:
		c.CleanupPolicy = topicconfig.Policy{}
	}
	if !c.CleanupPolicy.Compact && rng.Intn(2) == 0 {
		c.RemoteStorageEnable = true
		c.LocalRetentionMs = -2
		if c.RetentionMs >= 0 && rng.Intn(2) == 0 {
			c.LocalRetentionMs = rng.Int63n(c.RetentionMs + 1)
		} else if c.RetentionMs < 0 {
			c.LocalRetentionMs = pick(-2, -1, 0, hour)
		}
		c.LocalRetentionBytes = -2
		if c.RetentionBytes >= 0 && rng.Intn(2) == 0 {
			c.LocalRetentionBytes = rng.Int63n(c.RetentionBytes + 1)
		} else if c.RetentionBytes < 0 {
			c.LocalRetentionBytes = pick(-2, -1, 0, 300)
		}
	}
	return c
}

// randomLog returns 1..12 contiguous segments (sizes 0..400, offsets in
// runs of 0..50, timestamps across two weeks, some unknown), last active.
func randomLog(rng *rand.Rand) []Segment {
	n := 1 + rng.Intn(12)
	segs := make([]Segment, n)
	next := rng.Int63n(1000)
	for i := range segs {
		count := rng.Int63n(51)
		ts := ago(rng.Int63n(14 * day))
		if rng.Intn(10) == 0 {
			ts = -1
		}
		segs[i] = Segment{BaseOffset: next, LastOffset: next + count - 1, Size: rng.Int63n(401), MaxTimestamp: ts}
		next += count
	}
	segs[n-1].Active = true
	return segs
}

// TestPolicyProperties checks, for random logs and configs, that Local and
// Remote return a prefix, never the active segment, never a segment the remote
// tier does not hold when remote storage is on, never move the log start
// back, give every deletion a reason that holds, and stop only where no rule
// applies or the next segment may not go.
func TestPolicyProperties(t *testing.T) {
	rng := rand.New(rand.NewSource(4))
	for c := 0; c < 2000; c++ {
		cfg := randomConfig(rng)
		segs := randomLog(rng)
		end := segs[len(segs)-1].NextOffset()
		logStart := segs[0].BaseOffset + rng.Int63n(end-segs[0].BaseOffset+1)
		remote := RemoteState{Consulted: rng.Intn(4) != 0, HighestOffset: segs[0].BaseOffset - 1 + rng.Int63n(end-segs[0].BaseOffset+2)}
		if err := cfg.Validate(); err != nil {
			t.Fatalf("case %d: generated an invalid config: %v", c, err)
		}
		desc := fmt.Sprintf("case %d: cfg policy=%v ms=%d bytes=%d remote=%v lms=%d lbytes=%d logStart=%d remote=%+v segs=%+v",
			c, cfg.CleanupPolicy, cfg.RetentionMs, cfg.RetentionBytes, cfg.RemoteStorageEnable, cfg.LocalRetentionMs, cfg.LocalRetentionBytes, logStart, remote, segs)

		d := Local(segs, cfg, logStart, now, remote)
		checkCommon(t, desc+" Local", d, segs, logStart)
		msLimit, bytesLimit := cfg.RetentionMs, cfg.RetentionBytes
		if cfg.RemoteStorageEnable {
			msLimit, bytesLimit = cfg.EffectiveLocalRetentionMs(), cfg.EffectiveLocalRetentionBytes()
		}
		if !cfg.CleanupPolicy.Delete {
			msLimit, bytesLimit = -1, -1
		}
		mayGo := func(s Segment) bool { return !cfg.RemoteStorageEnable || remote.Holds(s) }
		for i, del := range d.Delete {
			s := del.Segment
			if !mayGo(s) {
				t.Fatalf("%s: deleted %+v which the remote tier does not hold", desc, s)
			}
			var rest int64
			for _, r := range segs[i+1:] {
				rest += r.Size
			}
			switch del.Reason {
			case ReasonLogStartOffset:
				if segs[i+1].BaseOffset > logStart {
					t.Fatalf("%s: %+v deleted for log start %d", desc, s, logStart)
				}
			case ReasonRetentionMs, ReasonLocalRetentionMs:
				if !expiredLocal(s, msLimit, now.UnixMilli()) {
					t.Fatalf("%s: %+v deleted by time but not expired", desc, s)
				}
			case ReasonRetentionBytes, ReasonLocalRetentionBytes:
				if bytesLimit < 0 || rest < bytesLimit {
					t.Fatalf("%s: %+v deleted by size but the rest (%d) is under the cap %d", desc, s, rest, bytesLimit)
				}
			}
			if (del.Reason == ReasonLocalRetentionMs || del.Reason == ReasonLocalRetentionBytes) != cfg.RemoteStorageEnable && del.Reason != ReasonLogStartOffset {
				t.Fatalf("%s: reason %s with remote.storage.enable=%v", desc, del.Reason, cfg.RemoteStorageEnable)
			}
		}
		// Maximality: the first kept segment is active, may not go, or meets no rule.
		k := len(d.Delete)
		if s := segs[k]; k < len(segs)-1 && mayGo(s) {
			var rest int64
			for _, r := range segs[k+1:] {
				rest += r.Size
			}
			if segs[k+1].BaseOffset <= logStart || expiredLocal(s, msLimit, now.UnixMilli()) || (bytesLimit >= 0 && rest >= bytesLimit) {
				t.Fatalf("%s: kept %+v although a rule applies (deleted %d)", desc, s, k)
			}
		}
		// Held is set exactly when a rule wanted a segment that may not go.
		if d.Held != "" && (k == len(segs)-1 || mayGo(segs[k])) {
			t.Fatalf("%s: Held %q but segment %d may go", desc, d.Held, k)
		}
		if k < len(segs)-1 && !mayGo(segs[k]) && d.Held == "" &&
			(segs[k+1].BaseOffset <= logStart || expiredLocal(segs[k], msLimit, now.UnixMilli())) {
			t.Fatalf("%s: segment %d kept for the remote tier without Held", desc, k)
		}

		// Remote over the same offsets, with an uploaded prefix.
		up := rng.Intn(len(segs) + 1)
		whole := append([]Segment(nil), segs...)
		for i := range whole {
			whole[i].Uploaded = i < up && !whole[i].Active
		}
		rd := Remote(whole, cfg, logStart, now)
		checkCommon(t, desc+" Remote", rd, whole, logStart)
		for _, del := range rd.Delete {
			if !del.Segment.Uploaded {
				t.Fatalf("%s: Remote deleted a segment not in the remote tier: %+v", desc, del.Segment)
			}
			if !cfg.CleanupPolicy.Delete && del.Reason != ReasonLogStartOffset {
				t.Fatalf("%s: Remote deleted by %s without the delete policy", desc, del.Reason)
			}
		}
	}
}

func checkCommon(t *testing.T, desc string, d Decision, segs []Segment, logStart int64) {
	t.Helper()
	if len(d.Delete) >= len(segs) {
		t.Fatalf("%s: deleted every segment", desc)
	}
	for i, del := range d.Delete {
		if del.Segment != segs[i] {
			t.Fatalf("%s: deletion %d is %+v, not the prefix segment %+v", desc, i, del.Segment, segs[i])
		}
		if del.Segment.Active {
			t.Fatalf("%s: deleted the active segment", desc)
		}
	}
	if d.NewLogStartOffset < logStart {
		t.Fatalf("%s: log start moved back %d -> %d", desc, logStart, d.NewLogStartOffset)
	}
	if k := len(d.Delete); k > 0 {
		// The remaining log is a contiguous suffix starting at or after the
		// new log start's segment.
		if d.NewLogStartOffset < d.Delete[k-1].Segment.NextOffset() {
			t.Fatalf("%s: new log start %d inside deleted segment %+v", desc, d.NewLogStartOffset, d.Delete[k-1].Segment)
		}
		if d.NewLogStartOffset > segs[len(segs)-1].NextOffset() {
			t.Fatalf("%s: new log start %d past the log end", desc, d.NewLogStartOffset)
		}
	} else if d.NewLogStartOffset != logStart {
		t.Fatalf("%s: nothing deleted but log start %d -> %d", desc, logStart, d.NewLogStartOffset)
	}
	for i := len(d.Delete) + 1; i < len(segs); i++ {
		if segs[i].BaseOffset != segs[i-1].NextOffset() {
			t.Fatalf("%s: remaining log not contiguous", desc)
		}
	}
}

// TestRemotePlanKept: Kept is sound. Whenever it calls the next segment
// kept from bounds its fields meet, offering that segment ends the set,
// after any prefix of offers, under random rules (including segments
// without timestamps, retention.ms and retention.bytes of -1, a clock
// before every timestamp).
func TestRemotePlanKept(t *testing.T) {
	rnd := rand.New(rand.NewSource(7))
	kept := 0
	for c := 0; c < 20000; c++ {
		cfg := topicconfig.Defaults()
		cfg.RetentionMs, cfg.RetentionBytes = -1, -1
		if rnd.Intn(4) != 0 {
			cfg.RetentionMs = rnd.Int63n(10 * hour)
		}
		if rnd.Intn(2) == 0 {
			cfg.RetentionBytes = rnd.Int63n(5000)
		}
		clock := now
		if rnd.Intn(10) == 0 {
			clock = time.UnixMilli(rnd.Int63n(hour))
		}
		n := 1 + rnd.Intn(8)
		segs := make([]Segment, n)
		var total int64
		for i := range segs {
			ts := int64(-1)
			if rnd.Intn(5) != 0 {
				ts = ago(rnd.Int63n(12 * hour))
			}
			segs[i] = Segment{BaseOffset: int64(100 * i), LastOffset: int64(100*i + 99), Size: 1 + rnd.Int63n(1000), MaxTimestamp: ts, Uploaded: true}
			total += segs[i].Size
		}
		logStart := rnd.Int63n(int64(100 * n))
		p := NewRemotePlan(cfg, logStart, clock, total+rnd.Int63n(1000))
		k := rnd.Intn(n)
		for _, s := range segs[:k] {
			p.Offer(s)
		}
		s := segs[k]
		tsBound := s.MaxTimestamp - rnd.Int63n(hour)
		if rnd.Intn(3) == 0 {
			tsBound = -1
		}
		if tsBound < -1 {
			tsBound = -1
		}
		if !p.Kept(s.LastOffset-rnd.Int63n(200), tsBound, 1+rnd.Int63n(s.Size)) {
			continue
		}
		kept++
		if p.Offer(s) {
			t.Fatalf("case %d: Kept called segment %+v kept, Offer took it (%+v)", c, s, p.Decision().Delete)
		}
	}
	if kept < 2000 {
		t.Fatalf("only %d cases where Kept holds", kept)
	}
}
