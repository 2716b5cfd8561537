package remotetier

import (
	"bytes"
	"errors"
	"io"
	"os"
	"testing"
	"testing/iotest"

	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/localtier/record"
)

// upSegmentBytes writes a segment with the engine and returns its log bytes
// and the positions and base offsets of its batches.
func upSegmentBytes(t testing.TB) (data []byte, pos []int, bases []int64) {
	t.Helper()
	d := upOpenDir(t, t.TempDir())
	upTopic(t, d, "s", 1)
	l := upPartition(t, d, "s", 0)
	upSegments(t, l, 1, 12, 5, 200)
	seg := l.Segments()[0]
	data, err := os.ReadFile(seg.Path)
	if err != nil {
		t.Fatal(err)
	}
	it := record.NewIter(data)
	for {
		b, ok := it.Next()
		if !ok {
			break
		}
		pos = append(pos, it.Pos()-b.Size())
		bases = append(bases, b.BaseOffset())
	}
	return data, pos, bases
}

// upEncodedBatches encodes n batches of 3 records with consecutive offsets.
func upEncodedBatches(t testing.TB, n int) (data []byte, pos []int) {
	t.Helper()
	var e record.Encoder
	for i := 0; i < n; i++ {
		recs := make([]record.Record, 3)
		for j := range recs {
			recs[j] = record.Record{Offset: int64(i*3 + j), Timestamp: int64(1000 + i), Key: []byte{byte(j)}, Value: []byte("value")}
		}
		pos = append(pos, len(data))
		var err error
		if data, err = e.AppendBatch(data, record.NewBatchSpec(int64(i*3), codec.None), recs); err != nil {
			t.Fatal(err)
		}
	}
	return data, pos
}

func TestLogStream(t *testing.T) {
	data, pos, bases := upSegmentBytes(t)
	readers := map[string]func(io.Reader) io.Reader{
		"whole":    func(r io.Reader) io.Reader { return r },
		"one_byte": iotest.OneByteReader,
		"half":     iotest.HalfReader,
	}
	for name, wrap := range readers {
		t.Run(name, func(t *testing.T) {
			s := newLogStream(wrap(bytes.NewReader(data)), "seg", 0, 0, -1)
			got, err := io.ReadAll(s)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("passthrough: %d bytes, %v", len(got), err)
			}
			if s.stats.Batches != len(pos) || s.stats.FirstOffset != 0 || s.stats.LastOffset != bases[len(bases)-1]+4 || s.stats.Records != int64(5*len(pos)) {
				t.Fatalf("stats %+v", s.stats)
			}
			// Cut at the third batch: the output starts exactly there.
			s = newLogStream(wrap(bytes.NewReader(data)), "seg", 0, bases[2], 0)
			got, err = io.ReadAll(s)
			if err != nil || !bytes.Equal(got, data[pos[2]:]) {
				t.Fatalf("cut: %d bytes (want %d), %v", len(got), len(data)-pos[2], err)
			}
			if s.stats.FirstOffset != bases[2] || s.stats.Batches != len(pos)-2 {
				t.Fatalf("cut stats %+v", s.stats)
			}
		})
	}

	bad := func(mut func([]byte) []byte) error {
		b := mut(append([]byte(nil), data...))
		_, err := io.ReadAll(newLogStream(bytes.NewReader(b), "seg", 0, 0, -1))
		return err
	}
	var ce *record.CorruptError
	for name, mut := range map[string]func([]byte) []byte{
		"bad_checksum": func(b []byte) []byte { b[pos[3]+record.HeaderSize+2] ^= 1; return b },
		"torn_tail":    func(b []byte) []byte { return b[:len(b)-7] },
		"torn_header":  func(b []byte) []byte { return b[:pos[4]+20] },
		"huge_length":  func(b []byte) []byte { b[pos[1]+8], b[pos[1]+9] = 0x7f, 0xff; return b },
		"bad_magic":    func(b []byte) []byte { b[pos[2]+16] = 9; return b },
		"backwards":    func(b []byte) []byte { copy(b[pos[5]:pos[5]+8], b[pos[1]:pos[1]+8]); return b },
		"below_base":   func(b []byte) []byte { b[pos[0]] = 0xff; return b },
		"short_length": func(b []byte) []byte { b[pos[1]+8], b[pos[1]+9], b[pos[1]+10], b[pos[1]+11] = 0, 0, 0, 3; return b },
	} {
		if err := bad(mut); !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a *record.CorruptError", name, err)
		}
	}

	var cut *CutError
	_, err := io.ReadAll(newLogStream(bytes.NewReader(data), "seg", 0, bases[2]+1, -1))
	if !errors.As(err, &cut) {
		t.Errorf("cut inside a batch: %v, want *CutError", err)
	}
	_, err = io.ReadAll(newLogStream(bytes.NewReader(data), "seg", 0, 1<<40, -1))
	if !errors.As(err, &cut) {
		t.Errorf("cut past the end: %v, want *CutError", err)
	}
}

// FuzzLogStream: any input is either passed through unchanged or refused
// with an error; never a panic, and memory never follows a length field.
func FuzzLogStream(f *testing.F) {
	data, pos := upEncodedBatches(f, 6)
	f.Add(data[:pos[3]], int64(0))
	f.Add(data[:pos[2]+30], int64(0))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 0, 0x7f, 0xff, 0xff, 0xff, 0, 0, 0, 0, 2}, int64(0))
	f.Fuzz(func(t *testing.T, in []byte, cut int64) {
		s := newLogStream(iotest.HalfReader(bytes.NewReader(in)), "fuzz", 0, cut, 4096)
		out, err := io.ReadAll(s)
		if err == nil && cut <= 0 && !bytes.Equal(out, in) {
			t.Fatalf("accepted input changed: %d in, %d out", len(in), len(out))
		}
		if err == nil && len(out) > len(in) {
			t.Fatal("output longer than input")
		}
		if err == nil {
			if _, _, ierr := s.indexes(); ierr != nil {
				t.Fatalf("indexes of an accepted segment: %v", ierr)
			}
		}
	})
}

func TestEncodedBatchesSeed(t *testing.T) {
	data, pos := upEncodedBatches(t, 6)
	s := newLogStream(bytes.NewReader(data), "seed", 0, 0, -1)
	if out, err := io.ReadAll(s); err != nil || !bytes.Equal(out, data) || s.stats.Batches != len(pos) || s.stats.LastOffset != 17 {
		t.Fatalf("seed segment: %v, stats %+v", err, s.stats)
	}
}
