package producer

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/x/kafkaerr"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
)

// TestProduceTimestampCheckedBeforeWriting: a record timestamp outside the
// topic's message.timestamp.*.max.ms fails the whole input before anything
// is written, naming its line, even when the good records would go to
// other partitions (separate appends).
func TestProduceTimestampCheckedBeforeWriting(t *testing.T) {
	now := time.UnixMilli(1_700_000_000_000)
	clock := func() time.Time { return now }
	d, _, err := localtier.OpenLogDir(vfs.Default, t.TempDir(), localtier.LogDirOptions{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if _, err := d.CreateTopic("ts", 3, map[string]string{"message.timestamp.before.max.ms": "60000"}); err != nil {
		t.Fatal(err)
	}
	in, err := ReadLines(strings.NewReader(
		`{"key":"a","value":"1"}`+"\n"+`{"key":"b","value":"2"}`+"\n"+
			`{"key":"c","value":"3","timestamp":1699999000000}`+"\n"), now.UnixMilli(), "test")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Produce(d, "ts", in, Options{Partition: -1, Now: clock})
	var ie *InputError
	if !errors.As(err, &ie) || ie.Line != 3 || !errors.Is(err, kafkaerr.ErrInvalidTimestamp) {
		t.Fatalf("got %v, want an INVALID_TIMESTAMP InputError on line 3", err)
	}
	tp, _ := d.Topic("ts")
	for p, l := range tp.Partitions {
		if l.LogEndOffset() != 0 {
			t.Fatalf("partition %d got %d records", p, l.LogEndOffset())
		}
	}
	// Within the bound (one minute old), everything is appended.
	in[2].Record.Timestamp = now.UnixMilli() - 60000
	if _, err := Produce(d, "ts", in, Options{Partition: -1, Now: clock}); err != nil {
		t.Fatal(err)
	}
}
