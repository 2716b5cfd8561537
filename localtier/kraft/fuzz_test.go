package kraft_test

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/tiered/tiered/internal/testkit/kraftlog"
	"github.com/tiered/tiered/localtier/kraft"
)

// FuzzDecodeRecord: any bytes decode or fail with a *DecodeError, never panic; what
// decodes as a known type encodes back to bytes that decode to the same record.
func FuzzDecodeRecord(f *testing.F) {
	v := kraftlog.Value
	for _, r := range []kraft.Record{
		kraftlog.Topic("orders", tid(1)),
		kraftlog.Partition(tid(1), 3, 2, 5, 1, 2, 3),
		kraftlog.LeaderChange(tid(1), 0, 4),
		{APIKey: kraft.KeyPartitionChange, PartitionChange: &kraft.PartitionChangeRecord{TopicID: tid(2), Leader: kraft.NoLeaderChange, ISR: []int32{1}, Replicas: []int32{1, 2}}},
		kraftlog.TopicConfig("orders", "retention.ms", v("1000")),
		kraftlog.BrokerConfig("", "log.retention.hours", nil),
		kraftlog.RemoveTopic(tid(3)),
		kraftlog.RegisterBroker(7, 99),
	} {
		b, err := kraftlog.Encode(r)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1, 12, 0})
	f.Add([]byte{0})
	f.Fuzz(func(t *testing.T, b []byte) {
		r, err := kraft.DecodeRecord(b)
		if err != nil {
			if _, ok := err.(*kraft.DecodeError); !ok {
				t.Fatalf("error %T %v, want *DecodeError", err, err)
			}
			return
		}
		if r.Topic == nil && r.Partition == nil && r.PartitionChange == nil && r.Config == nil && r.RemoveTopic == nil && r.RegisterBroker == nil {
			return // a type this package skips
		}
		again, err := kraftlog.Encode(r)
		if err != nil {
			t.Fatal(err)
		}
		r2, err := kraft.DecodeRecord(again)
		if err != nil {
			t.Fatalf("re-encoded record does not decode: %v", err)
		}
		if !reflect.DeepEqual(r, r2) {
			t.Fatalf("round trip:\n%+v\n%+v", r, r2)
		}
	})
}

// FuzzApplyBatches: any bytes as a metadata log segment or snapshot apply or fail with a
// *CorruptError naming the file, never panic.
func FuzzApplyBatches(f *testing.F) {
	dir := f.TempDir()
	l, err := kraftlog.Create(dir)
	if err != nil {
		f.Fatal(err)
	}
	if _, err := l.AppendControl(); err != nil {
		f.Fatal(err)
	}
	if _, err := l.Append(kraftlog.Topic("a", tid(1)), kraftlog.Partition(tid(1), 0, 1, 0, 1), kraftlog.RemoveTopic(tid(1))); err != nil {
		f.Fatal(err)
	}
	seg, err := os.ReadFile(filepath.Join(l.Dir, "00000000000000000000.log"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seg, int64(0), true)
	f.Add(seg, kraft.Snapshot, false)
	f.Fuzz(func(t *testing.T, data []byte, from int64, last bool) {
		im := kraft.NewImage()
		err := im.ApplyBatches("seg.log", data, from, last)
		var ce *kraft.CorruptError
		if err != nil && (!errors.As(err, &ce) || ce.File != "seg.log") {
			t.Fatalf("error %v (%T), want a *CorruptError in seg.log", err, err)
		}
	})
}
