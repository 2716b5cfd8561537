package cli

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"testing"

	"github.com/tiered/tiered/localtier/record"
)

// FuzzInspectSegment: any bytes inspect without panicking, in text and JSON,
// and never claim more valid batches than a verifying iterator finds.
func FuzzInspectSegment(f *testing.F) {
	for _, p := range []string{
		kraftDir + "/foo-0/" + firstSeg,
		fixtures + "/kafka-go/v1c-v1-v1c.records.bin",
		fixtures + "/rskafka/snappy_java.batch.bin",
	} {
		data, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 2})
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, asJSON := range []bool{false, true} {
			w := bufio.NewWriter(io.Discard)
			ins := &segInspector{w: w, path: "fuzz.log", json: asJSON, records: true}
			err := ins.run(bytes.NewReader(data), int64(len(data)))
			it := record.NewIter(data)
			it.Verify = true
			n := 0
			for {
				if _, ok := it.Next(); !ok {
					break
				}
				n++
			}
			if ins.batches > n {
				t.Fatalf("inspect printed %d batches, the iterator finds %d valid", ins.batches, n)
			}
			if err == nil && (it.Err() != nil || it.Truncated()) {
				t.Fatalf("inspect passed bytes the iterator refuses: %v", it.Err())
			}
		}
	})
}
