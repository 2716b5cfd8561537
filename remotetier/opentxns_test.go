package remotetier

import (
	"context"
	"slices"
	"testing"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestApplyTxns: a segment's transaction effects compose onto the
// transactions open before it.
func TestApplyTxns(t *testing.T) {
	open := func(kv ...int64) []manifest.OpenTxn {
		var out []manifest.OpenTxn
		for i := 0; i < len(kv); i += 2 {
			out = append(out, manifest.OpenTxn{ProducerID: kv[i], FirstOffset: kv[i+1]})
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		before []manifest.OpenTxn
		fx     map[int64]txnEffect
		want   []manifest.OpenTxn
	}{
		{"none", open(7, 5), nil, open(7, 5)},
		{"opens", nil, map[int64]txnEffect{7: {Open: 5}}, open(7, 5)},
		{"goes on", open(7, 5), map[int64]txnEffect{7: {Open: 12}}, open(7, 5)},
		{"closes", open(7, 5), map[int64]txnEffect{7: {Closed: true, Open: -1}}, nil},
		{"closes and reopens", open(7, 5), map[int64]txnEffect{7: {Closed: true, Open: 20}}, open(7, 20)},
		{"marker of one not open", nil, map[int64]txnEffect{7: {Closed: true, Open: -1}}, nil},
		{"others untouched, first offset order", open(8, 3, 7, 5), map[int64]txnEffect{9: {Open: 1}, 7: {Closed: true, Open: -1}},
			open(9, 1, 8, 3)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := applyTxns(tc.before, tc.fx); !slices.Equal(got, tc.want) && len(got)+len(tc.want) > 0 {
				t.Fatalf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestUploadOpenTransactions: a transaction whose records are uploaded
// while its marker is not (in a later segment, still active) is recorded
// open at the manifest's end, so the remote log's last stable offset stops
// before its first offset; it stays so across uploader restarts and
// commits, and moves on once the marker's segment is committed.
func TestUploadOpenTransactions(t *testing.T) {
	ctx := context.Background()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "tx", 1)
	l := upPartition(t, d, "tx", 0)
	var enc record.Encoder
	var seq7, seq8 int32
	recs := func(n int) []record.Record {
		out := make([]record.Record, n)
		for i := range out {
			out[i] = record.Record{Offset: int64(i), Timestamp: upNow.UnixMilli(), Key: []byte("k"), Value: []byte("v")}
		}
		return out
	}
	batch := func(pid int64, seq *int32) int64 {
		start := l.LogEndOffset()
		remotekit.AppendTestBatch(t, l, &enc, codec.None, recs(5), pid >= 0, pid, seq)
		return start
	}
	marker := func(pid int64, commit bool) {
		if _, err := l.AppendEndTxnMarker(pid, 0, commit, 0); err != nil {
			t.Fatal(err)
		}
	}
	roll := func() {
		if err := l.Roll(); err != nil {
			t.Fatal(err)
		}
	}
	mem := objstore.NewMemory()
	pass := func() *manifest.Manifest {
		t.Helper()
		// A new uploader each pass: what is open comes from the manifest.
		if _, err := upUploader(t, mem, NewLocalSource(d, nil), Options{}).RunOnce(ctx); err != nil {
			t.Fatal(err)
		}
		return upLoad(t, mem, "tx", 0)
	}

	batch(-1, nil)
	first7 := batch(7, &seq7) // [5, 10)
	roll()
	first8 := batch(8, &seq8) // [10, 15)
	roll()
	marker(7, false) // in the active segment
	batch(-1, nil)
	// The source's last stable offset is 10 (producer 8 open): the first
	// segment alone is uploaded, producer 7's records without its marker.
	m := pass()
	if m.NextOffset() != first8 || !slices.Equal(m.OpenTxns, []manifest.OpenTxn{{ProducerID: 7, FirstOffset: first7}}) {
		t.Fatalf("after the first segment: end %d, open %v; want end %d, producer 7 open from %d", m.NextOffset(), m.OpenTxns, first8, first7)
	}
	if got := m.LastStableOffset(); got != first7 {
		t.Fatalf("last stable offset %d, want %d", got, first7)
	}
	marker(8, true)
	m = pass() // the second segment: producer 8's records, its marker not yet
	want := []manifest.OpenTxn{{ProducerID: 7, FirstOffset: first7}, {ProducerID: 8, FirstOffset: first8}}
	if !slices.Equal(m.OpenTxns, want) || m.LastStableOffset() != first7 {
		t.Fatalf("after the second segment: open %v, last stable %d; want %v, %d", m.OpenTxns, m.LastStableOffset(), want, first7)
	}
	roll()
	batch(-1, nil)
	m = pass() // the markers' segment
	if len(m.OpenTxns) != 0 || m.LastStableOffset() != m.NextOffset() {
		t.Fatalf("after the markers' segment: open %v, last stable %d, end %d", m.OpenTxns, m.LastStableOffset(), m.NextOffset())
	}
}
