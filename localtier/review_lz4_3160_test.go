package localtier

import (
	"errors"
	"testing"
	"time"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/localtier/vfs"
)

// An lz4 v2 batch whose frame header checksum is KAFKA-3160's broken one
// (xxhash over the magic number too). Kafka reads such frames only in
// magic 0 messages (KafkaLZ4BlockInputStream's ignoreFlagDescriptorChecksum
// is magic == 0): its LogValidator refuses the batch ("Stream frame
// descriptor corrupted"), and a Java consumer could not read it if it were
// stored.
func TestReviewAppendRefusesKafka3160LZ4InV2Batch(t *testing.T) {
	const now = 1_700_000_000_000
	clock := &fakeClock{t: time.UnixMilli(now)}
	l, _ := openTestLog(t, vfs.Default, t.TempDir(), testConfig(t, nil), clock, 0)
	defer l.Close()
	b := batchOf(t, 3, 20, now, codec.LZ4)
	payload := b[record.HeaderSize:]
	good := payload[6] // magic(4) FLG BD HC: no content size in Kafka's frames
	alt := -1
	for v := 0; v < 256; v++ {
		payload[6] = byte(v)
		if _, err := codec.Decompress(codec.LZ4, nil, payload, 1<<20); err == nil && byte(v) != good {
			alt = v
		}
	}
	if alt < 0 {
		t.Fatal("no KAFKA-3160 header checksum accepted by the codec")
	}
	payload[6] = byte(alt)
	record.Batch(b).UpdateCRC()
	_, err := l.Append(b)
	var ie *InvalidRecordError
	if !errors.As(err, &ie) || ie.Code != "CORRUPT_MESSAGE" {
		t.Fatalf("append of a v2 lz4 batch with a KAFKA-3160 frame header: err = %v, want CORRUPT_MESSAGE", err)
	}
}
