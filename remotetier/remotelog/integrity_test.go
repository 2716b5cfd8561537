package remotelog

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tiered/tiered/internal/testkit/remotekit"
	"github.com/tiered/tiered/localtier/record"
	"github.com/tiered/tiered/manifest"
	"github.com/tiered/tiered/remotetier/objstore"
)

// setBase rewrites the base offset field of the batch at b (outside the
// CRC).
func setBase(b []byte, f func(int64) int64) {
	binary.BigEndian.PutUint64(b, uint64(f(int64(binary.BigEndian.Uint64(b)))))
}

// TestReadChecksOffsets corrupts one batch of a segment object behind the
// reader's back — a flipped bit in its base offset, which the CRC does not
// cover, or a checksummed byte — and reads from every batch with several
// limits: no read serves a batch that differs from the one uploaded, the
// reads reaching the bad batch fail with a *record.CorruptError naming the
// object and the position of the bad batch (or of the one after it, when
// the two do not follow one another), and the batches before it are served.
func TestReadChecksOffsets(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 11, 3, 20, false)
	files := local.Files(t)
	tests := []struct {
		name string
		pick func(r *remotekit.Remote) int // index into r.Batches
		flip func(b []byte)
		// framing: the flip moves the next batch, so a read passing over
		// the batch fails where the wrong length lands it, at or after it
		// in its segment (never serving what is there).
		framing bool
	}{
		{"base offset lowest bit down", middle, func(b []byte) { setBase(b, func(o int64) int64 { return o & (o - 1) }) }, false},
		{"base offset lowest clear bit up", middle, func(b []byte) { setBase(b, func(o int64) int64 { return o | (o + 1) }) }, false},
		{"base offset bit 40 up", middle, func(b []byte) { b[2] ^= 0x01 }, false},
		{"base offset sign bit", middle, func(b []byte) { b[0] ^= 0x80 }, false},
		{"first batch of a segment", func(r *remotekit.Remote) int {
			for i, ba := range r.Batches {
				if ba.Seg == 1 {
					return i
				}
			}
			return -1
		}, func(b []byte) { setBase(b, func(o int64) int64 { return o - 1 }) }, false},
		{"last batch of the log", func(r *remotekit.Remote) int { return len(r.Batches) - 1 }, func(b []byte) { setBase(b, func(o int64) int64 { return o & (o - 1) }) }, false},
		{"checksummed byte", middle, func(b []byte) { b[len(b)-1] ^= 0xff }, false},
		// Outside the CRC too: reads passing over it must not serve what
		// its wrong length points at.
		{"batch length", middle, func(b []byte) { b[10] ^= 0x01 }, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := remotekit.NewRemote(t, objstore.NewMemory(), "", 0, manifest.DefaultPolicy())
			r.Commit(files...)
			k := tc.pick(r)
			bad := r.Batches[k]
			seg := r.Segs[bad.Seg]
			data := slices.Clone(r.Logs[bad.Seg])
			tc.flip(data[bad.Pos : bad.Pos+int64(bad.B.Size())])
			remotekit.Put(t, r.Bucket, seg.Log.Key, data)
			l := openTestLog(t, r.Bucket, "")

			want := map[int64][]byte{}
			for _, ba := range r.Batches {
				want[ba.B.BaseOffset()] = ba.B
			}
			servedBefore := false
			for i, ba := range r.Batches {
				from := ba.B.BaseOffset()
				for _, maxBytes := range []int{1, 3000, 1 << 20} {
					v, err := l.ReadView(ctx, from, maxBytes)
					if err != nil {
						var ce *record.CorruptError
						if !errors.As(err, &ce) {
							t.Fatalf("read %d max %d: %v, want a *record.CorruptError", from, maxBytes, err)
						}
						near := ce.Pos == bad.Pos || (k+1 < len(r.Batches) && r.Batches[k+1].Seg == bad.Seg && ce.Pos == r.Batches[k+1].Pos) ||
							(tc.framing && ce.Pos >= bad.Pos)
						if ce.File != seg.Log.Key || !near {
							t.Fatalf("read %d max %d: %v, want the object %s at %d", from, maxBytes, err, seg.Log.Key, bad.Pos)
						}
						continue
					}
					if i == k {
						t.Fatalf("read at the corrupt batch %d max %d served %d bytes", from, maxBytes, v.Len)
					}
					joined := joinParts(v.Parts, v.Len)
					it := record.NewIter(joined)
					next := int64(-1)
					for {
						got, ok := it.Next()
						if !ok {
							break
						}
						if !bytes.Equal(got, want[got.BaseOffset()]) {
							t.Fatalf("read %d max %d served a batch at offset %d that was not uploaded so", from, maxBytes, got.BaseOffset())
						}
						if k > 0 && got.BaseOffset() == r.Batches[k-1].B.BaseOffset() {
							servedBefore = true
						}
						next = got.NextOffset()
					}
					if it.Pos() != len(joined) || (v.Len > 0 && v.NextOffset != next) {
						t.Fatalf("read %d max %d: %d bytes, %d of whole batches, next %d want %d", from, maxBytes, v.Len, it.Pos(), v.NextOffset, next)
					}
				}
			}
			if k > 0 && r.Batches[k-1].Seg == bad.Seg && !servedBefore {
				t.Fatal("the batch before the corrupt one was never served")
			}
		})
	}
}

func middle(r *remotekit.Remote) int {
	for i, ba := range r.Batches {
		if ba.Seg == 1 && i+1 < len(r.Batches) && r.Batches[i+1].Seg == 1 && i > 0 && r.Batches[i-1].Seg == 1 {
			if ba.B.BaseOffset() > r.Segs[1].BaseOffset+20 {
				return i
			}
		}
	}
	return -1
}

// TestCheckEnd commits a final segment whose manifest entry claims a last
// offset past the segment's bytes (up to 2^31-1 past its base, the most
// manifest validation lets through; 2^63-2 is refused on decode): CheckEnd
// reports the object as corrupt instead of letting the claim become the
// high watermark. A true claim passes, once: the segment is not read again.
func TestCheckEnd(t *testing.T) {
	ctx := context.Background()
	local := remotekit.WriteLocal(t, t.TempDir(), 12, 3, 10, false)
	for _, tc := range []struct {
		name  string
		extra int64 // added to the final segment's last offset
		sub   bool  // the final segment in a sealed sub-manifest
	}{
		{"true", 0, false},
		{"true in a sub-manifest", 0, true},
		{"one past", 1, false},
		{"relative offset limit", -1, false},
		{"one past in a sub-manifest", 1, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			files := local.Files(t)
			last := &files[len(files)-1]
			if tc.extra < 0 {
				last.Last = last.Base + manifest.MaxSegmentSpan
			} else {
				last.Last += tc.extra
			}
			policy := manifest.DefaultPolicy()
			if tc.sub {
				policy = manifest.Policy{InlineMax: 1, SubSegments: 1}
			}
			mem := objstore.NewMemory()
			rb := &remotekit.RecordingBucket{Bucket: mem}
			r := remotekit.NewRemote(t, mem, "", 0, policy)
			r.Commit(files...)
			if tc.sub && len(r.M.Sealed) == 0 {
				t.Fatal("no sealed sub-manifest")
			}
			l := openTestLog(t, rb, "")
			_, err := l.CheckEnd(ctx)
			if tc.extra == 0 {
				if err != nil {
					t.Fatal(err)
				}
				gets := rb.RangeGets
				if _, err := l.CheckEnd(ctx); err != nil || rb.RangeGets != gets {
					t.Fatalf("second check: %v, %d more range GETs", err, rb.RangeGets-gets)
				}
				return
			}
			var co *CorruptObjectError
			if !errors.As(err, &co) || co.Key != r.Segs[len(r.Segs)-1].Log.Key || !strings.Contains(co.Reason, "the last batch ends at offset") {
				t.Fatalf("CheckEnd: %v, want a CorruptObjectError naming %s", err, r.Segs[len(r.Segs)-1].Log.Key)
			}
		})
	}
}

// TestCheckEndReadsTheTail: the end check of a final segment too large to
// walk whole reads its last 64 KiB (one range GET, no index) when they end
// with the batch the manifest claims; when they cannot confirm it — the
// last batch is longer than that, or a record's value ends with bytes that
// frame as a batch of other offsets, seen alone or beside the real one, or
// with more positions framing to the end than the scan checks the CRC of —
// the walk from the last index entry decides: a true claim still passes
// (a producer's bytes cannot fail it) and a false one is still refused.
func TestCheckEndReadsTheTail(t *testing.T) {
	ctx := context.Background()
	var enc record.Encoder
	batch := func(base int64, values ...[]byte) record.Batch {
		recs := make([]record.Record, len(values))
		for i, v := range values {
			recs[i] = record.Record{Offset: base + int64(i), Timestamp: 1_700_000_000_000, Value: v}
		}
		b, err := enc.AppendBatch(nil, record.NewBatchSpec(base, 0), recs)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	// nested is a value whose record ends with a whole batch of offsets
	// 7-9: a record ends with its header count, 0, as the inner batch's
	// last record does, so the value holds all but that byte.
	nested := func(pad int) []byte {
		inner := batch(7, []byte("a"), []byte("b"), []byte("c"))
		return append(bytes.Repeat([]byte{'x'}, pad), inner[:len(inner)-1]...)
	}
	// framing is a value of whose last bytes maxTailCandidates+1
	// positions frame as v2 batch headers to the end of the batch holding
	// it (its record ends with the value and a header count of 0), each
	// with a bad CRC: the real batch, which alone passes its CRC, is not
	// reached before the scan gives up.
	framing := func() []byte {
		v := bytes.Repeat([]byte{'f'}, 2000)
		for i := range maxTailCandidates + 1 {
			d := 200 * (i + 1) // bytes from the header to the batch's end
			h := v[len(v)+1-d:]
			clear(h[:record.HeaderSize])
			binary.BigEndian.PutUint32(h[8:], uint32(d-record.LogOverhead))
			h[16] = record.CurrentMagic
		}
		return v
	}
	for _, tc := range []struct {
		name     string
		last     []byte // the value of the final batch's one record
		oneGet   bool   // the tail alone confirms a true claim
		nestedAt bool
	}{
		{"tail confirms", bytes.Repeat([]byte{'v'}, 1000), true, false},
		{"last batch longer than the tail", bytes.Repeat([]byte{'v'}, 100<<10), false, false},
		{"a batch in a value, alone in the tail", nested(100 << 10), false, true},
		{"a batch in a value, beside the real one", nested(1000), false, true},
		{"more positions that frame than the scan checks", framing(), false, false},
	} {
		for _, extra := range []int64{0, 1} {
			t.Run(fmt.Sprintf("%s/claim+%d", tc.name, extra), func(t *testing.T) {
				var batches []record.Batch
				value := bytes.Repeat([]byte{'v'}, 16<<10)
				off := int64(0)
				for range 300 { // about 4.7 MiB: past a walk of the whole segment
					batches = append(batches, batch(off, value))
					off++
				}
				final := batch(off, tc.last)
				if tc.nestedAt {
					if p := bytes.LastIndex(final, nested(0)[:8]); p < 0 || int64(len(final)-p) != int64(record.Batch(final[p:]).Length())+record.LogOverhead {
						t.Fatal("the value's batch does not end the outer batch")
					}
				}
				batches = append(batches, final)
				log, idx, tidx := remotekit.BuildSegment(t, 0, batches, 4096)
				mem := objstore.NewMemory()
				r := remotekit.NewRemote(t, mem, "", 0, manifest.DefaultPolicy())
				r.Commit(remotekit.SegFiles{Base: 0, Last: off + extra, Log: log, Index: idx, TimeIndex: tidx})
				rb := &remotekit.RecordingBucket{Bucket: mem}
				l := openTestLog(t, rb, "")
				before := rb.RangeGets
				_, err := l.CheckEnd(ctx)
				if extra == 0 {
					if err != nil {
						t.Fatalf("a true claim: %v", err)
					}
					if gets := rb.RangeGets - before; tc.oneGet && (gets != 1 || rb.MaxRange != tailScanBytes) {
						t.Fatalf("%d range GETs (longest %d bytes), want one of the last %d bytes", gets, rb.MaxRange, tailScanBytes)
					} else if !tc.oneGet && gets < 2 {
						t.Fatalf("%d range GETs: the tail alone confirmed what it cannot", gets)
					}
					return
				}
				var co *CorruptObjectError
				if !errors.As(err, &co) || !strings.Contains(co.Reason, "the last batch ends at offset") {
					t.Fatalf("a claim one past the bytes: %v, want a CorruptObjectError", err)
				}
			})
		}
	}
}

// FuzzTailConfirms: over any bytes, tailConfirms neither panics nor
// answers differently when the store hands the tail back in pieces (a
// cache's shared chunks); when it confirms, the object ends with a
// CRC-valid batch whose last offset is the claimed one.
func FuzzTailConfirms(f *testing.F) {
	var enc record.Encoder
	good, _ := enc.AppendBatch(nil, record.NewBatchSpec(0, 0), []record.Record{{Offset: 0, Timestamp: 5, Value: []byte("v")}, {Offset: 1, Timestamp: 9}})
	good2, _ := enc.AppendBatch(nil, record.NewBatchSpec(2, 0), []record.Record{{Offset: 2, Timestamp: 7}})
	f.Add(append(slices.Clone(good), good2...), int64(2))
	f.Add(slices.Clone(good), int64(1))
	f.Add(good[5:], int64(1))
	f.Fuzz(func(t *testing.T, log []byte, last int64) {
		if len(log) == 0 || last < 0 {
			return
		}
		mem := objstore.NewMemory()
		keys, _ := manifest.DataKeys("", remotekit.TestTopic, remotekit.TestPartition, 0, "fuzzfuzzfuzz")
		remotekit.Put(t, mem, keys.Log, log)
		seg := manifest.Segment{BaseOffset: 0, LastOffset: last, Log: remotekit.Object(t, keys.Log, log)}
		ctx := context.Background()
		ok, err := (&RemoteLog{bucket: mem}).tailConfirms(ctx, seg)
		if err != nil {
			t.Fatal(err)
		}
		okSplit, err := (&RemoteLog{bucket: splitBucket{mem, 7}}).tailConfirms(ctx, seg)
		if err != nil || okSplit != ok {
			t.Fatalf("in 7-byte parts: %v, %v; whole: %v", okSplit, err, ok)
		}
		if !ok {
			return
		}
		for p := range log {
			b := record.Batch(log[p:])
			if len(b) >= record.HeaderSize && int(b.Length())+record.LogOverhead == len(b) && b.VerifyCRC() == nil && b.LastOffset() == last {
				return
			}
		}
		t.Fatalf("confirmed offset %d; the object ends with no valid batch holding it", last)
	})
}
