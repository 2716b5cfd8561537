package replay

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/internal/testkit/testrecs"
	"github.com/tiered/tiered/internal/x/recordjson"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

var legacyMessage = testrecs.LegacyMessage

// legacyPartition is a log of magic 1 gzip wrappers, five messages each
// (inner offsets relative, the wrapper's offset the last absolute one), as
// an old broker's log dir holds them: offsets 0-14, record i stamped
// 1000+10*i.
type legacyPartition struct {
	wrappers [][]byte
	ts       []int64
}

func newLegacyPartition(t *testing.T) *legacyPartition {
	t.Helper()
	p := &legacyPartition{}
	for w := 0; w < 3; w++ {
		var inner []byte
		var maxTS int64
		for i := 0; i < 5; i++ {
			off := int64(w*5 + i)
			ts := 1000 + 10*off
			p.ts = append(p.ts, ts)
			maxTS = ts
			inner = append(inner, legacyMessage(int64(i), 0, ts, []byte(fmt.Sprint("k", off)), []byte(fmt.Sprint("v", off)))...)
		}
		z, err := codec.Compress(codec.Gzip, nil, inner)
		if err != nil {
			t.Fatal(err)
		}
		p.wrappers = append(p.wrappers, legacyMessage(int64(w*5+4), int8(codec.Gzip), maxTS, nil, z))
	}
	return p
}

func (p *legacyPartition) Offsets(context.Context) (fetchcache.Offsets, error) {
	return fetchcache.Offsets{LogStart: 0, LogEnd: 15, LastStable: 15}, nil
}

func (p *legacyPartition) Read(_ context.Context, offset int64, _ int) ([]byte, error) {
	if offset < 0 || offset > 15 {
		return nil, &fetchcache.OffsetOutOfRangeError{Offset: offset, LogStart: 0, LogEnd: 15}
	}
	var out []byte
	for w, b := range p.wrappers {
		if int64(w*5+4) >= offset {
			out = append(out, b...)
		}
	}
	return out, nil
}

func (p *legacyPartition) OffsetForTimestamp(_ context.Context, ts int64) (int64, int64, bool, error) {
	for off, t := range p.ts {
		if t >= ts {
			return int64(off), t, true, nil
		}
	}
	return 0, 0, false, nil
}

func (p *legacyPartition) AbortedTxns(context.Context, int64, int64) ([]fetchcache.AbortedTxn, error) {
	return nil, nil
}

// TestReplayLegacyWrapperAtRangeEnd: a compressed magic 0/1 wrapper's
// offset field is its last inner offset, not its first; a wrapper holding
// the range's last records and more after them is still delivered. Before,
// replay took its offset for where it begins, judged it past the range end
// and stopped, leaving out the range's last records (here 10 and 11).
func TestReplayLegacyWrapperAtRangeEnd(t *testing.T) {
	p := newLegacyPartition(t)
	for name, src := range bothSources(t, oneCatalog{p}) {
		// [1030, 1120): offsets 3 to 11, ending inside the third wrapper.
		var out bytes.Buffer
		cp, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: "t", Partition: 0, From: 1030, To: 1120, Stdout: &out})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var want []byte
		for off := int64(3); off < 12; off++ {
			rec := record.Record{Offset: off, Timestamp: p.ts[off], Key: []byte(fmt.Sprint("k", off)), Value: []byte(fmt.Sprint("v", off))}
			want = recordjson.AppendLine(want, 0, &rec)
		}
		if out.String() != string(want) || cp.Records != 9 {
			t.Errorf("%s: %d records:\n%s\nwant offsets 3 to 11:\n%s", name, cp.Records, out.String(), want)
		}
		var raw bytes.Buffer
		cp, err = Replay(context.Background(), ReplayOptions{Source: src, Topic: "t", Partition: 0, From: 1030, To: 1120, Stdout: &raw, Format: ReplayRaw})
		if err != nil {
			t.Fatalf("%s raw: %v", name, err)
		}
		if cp.Records != 15 { // the records of the wrappers written
			t.Errorf("%s raw: %d records counted, want the wrappers' 15", name, cp.Records)
		}
		if !bytes.Equal(raw.Bytes(), bytes.Join(p.wrappers, nil)) {
			t.Errorf("%s raw: %d bytes, want the three wrappers (%d bytes)", name, raw.Len(), len(bytes.Join(p.wrappers, nil)))
		}
		// [1030, 1050): offsets 3 and 4; the second wrapper (5-9) begins
		// at the range end and is not delivered.
		raw.Reset()
		if _, err := Replay(context.Background(), ReplayOptions{Source: src, Topic: "t", Partition: 0, From: 1030, To: 1050, Stdout: &raw, Format: ReplayRaw}); err != nil {
			t.Fatalf("%s raw: %v", name, err)
		}
		if !bytes.Equal(raw.Bytes(), p.wrappers[0]) {
			t.Errorf("%s raw [3, 5): %d bytes, want the first wrapper (%d bytes)", name, raw.Len(), len(p.wrappers[0]))
		}
	}
}
