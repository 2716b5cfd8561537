package kraft_test

import (
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
