package manifest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// Tests of the version-2 layout: a segment's indexes as sections of one
// indexes object (FileIndexes).

// sectionsSeg returns testSeg(base, last, ts) with its indexes laid back to
// back in one indexes object: sizes are the offset index's, the time
// index's and, when given, the transaction index's.
func sectionsSeg(t testing.TB, base, last, ts int64, sizes ...int64) Segment {
	t.Helper()
	if len(sizes) != 2 && len(sizes) != 3 {
		t.Fatalf("sectionsSeg: %d sizes", len(sizes))
	}
	s := testSeg(t, base, last, ts)
	keys, err := DataKeys(testPrefix, testTopic, testPart, base, s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	var at int64
	section := func(i int) Object {
		o := Object{Key: keys.Indexes, Offset: at, Size: sizes[i],
			Checksum: CRC32CChecksum(crc32.Checksum([]byte{byte(i), byte(base)}, castagnoli))}
		at += sizes[i]
		return o
	}
	s.Index, s.TimeIndex = section(0), section(1)
	s.TxnIndex = nil
	if len(sizes) == 3 {
		txn := section(2)
		s.TxnIndex = &txn
	}
	return s
}

func TestSectionsValidate(t *testing.T) {
	const base, last, ts = 500, 599, 1_700_000_000_500
	v1 := func(t *testing.T) Segment {
		s := testSeg(t, base, last, ts)
		keys, _ := DataKeys(testPrefix, testTopic, testPart, base, s.AttemptID)
		s.TxnIndex = &Object{Key: keys.TxnIndex, Size: 24, Checksum: s.Index.Checksum}
		return s
	}
	v2 := func(t *testing.T) Segment { return sectionsSeg(t, base, last, ts, 80, 120, 34) }
	v2NoTxn := func(t *testing.T) Segment { return sectionsSeg(t, base, last, ts, 80, 120) }
	other := func(t *testing.T, base int64, attempt string) SegmentKeys {
		k, err := DataKeys(testPrefix, testTopic, testPart, base, attempt)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	const otherAttempt = "00000000000000000000000000000abc"

	valid := []struct {
		name string
		seg  func(t *testing.T) Segment
	}{
		{"v1_layout", v1},
		{"v1_layout_no_txn", func(t *testing.T) Segment { return testSeg(t, base, last, ts) }},
		{"sections", v2NoTxn},
		{"sections_txn", v2},
		// An empty offset index: the time index starts at 0 too.
		{"empty_offset_index", func(t *testing.T) Segment { return sectionsSeg(t, base, last, ts, 0, 120) }},
		{"empty_offset_index_txn", func(t *testing.T) Segment { return sectionsSeg(t, base, last, ts, 0, 120, 34) }},
		{"all_empty", func(t *testing.T) Segment { return sectionsSeg(t, base, last, ts, 0, 0) }},
		// The sections may reach exactly MaxInt64: no overflow yet.
		{"end_at_max_int64", func(t *testing.T) Segment { return sectionsSeg(t, base, last, ts, math.MaxInt64-7, 7) }},
	}
	for _, tc := range valid {
		t.Run("valid_"+tc.name, func(t *testing.T) {
			s := tc.seg(t)
			if err := s.Validate(); err != nil {
				t.Fatalf("Validate() = %v", err)
			}
			// And in a manifest: Append validates the whole root.
			if _, err := Append(newTestManifest(t, base), DefaultPolicy(), s); err != nil {
				t.Fatalf("Append: %v", err)
			}
		})
	}

	invalid := []struct {
		name   string
		seg    func(t *testing.T) Segment
		mutate func(t *testing.T, s *Segment)
		reason string
	}{
		// Mixed layouts.
		{"time_index_whole_after_section", v2, func(t *testing.T, s *Segment) {
			s.TimeIndex = Object{Key: other(t, base, s.AttemptID).TimeIndex, Size: 120, Checksum: s.TimeIndex.Checksum}
		}, "does not name the indexes"},
		{"time_index_section_after_whole", v1, func(t *testing.T, s *Segment) {
			s.TimeIndex = Object{Key: other(t, base, s.AttemptID).Indexes, Offset: 0, Size: 120, Checksum: s.TimeIndex.Checksum}
		}, "does not name the timeindex"},
		{"txn_whole_after_sections", v2, func(t *testing.T, s *Segment) {
			s.TxnIndex = &Object{Key: other(t, base, s.AttemptID).TxnIndex, Size: 34, Checksum: s.TxnIndex.Checksum}
		}, "does not name the indexes"},
		{"txn_section_after_wholes", v1, func(t *testing.T, s *Segment) {
			s.TxnIndex = &Object{Key: other(t, base, s.AttemptID).Indexes, Offset: 0, Size: 34, Checksum: s.TxnIndex.Checksum}
		}, "does not name the txnindex"},
		{"offset_index_whole_rest_sections", v2, func(t *testing.T, s *Segment) {
			s.Index = Object{Key: other(t, base, s.AttemptID).Index, Size: 80, Checksum: s.Index.Checksum}
		}, "does not name the timeindex"},
		{"log_is_indexes_object", v2, func(t *testing.T, s *Segment) { s.Log.Key = s.Index.Key }, "does not name the log"},

		// Order, gaps and overlaps.
		{"wrong_order", v2NoTxn, func(t *testing.T, s *Segment) {
			s.TimeIndex.Offset, s.Index.Offset = 0, s.TimeIndex.Size
		}, "index section at offset 120"},
		{"not_from_zero", v2NoTxn, func(t *testing.T, s *Segment) {
			s.Index.Offset += 8
			s.TimeIndex.Offset += 8
		}, "want 0"},
		{"negative_offset", v2NoTxn, func(t *testing.T, s *Segment) { s.Index.Offset = -8 }, "want 0"},
		{"gap", v2NoTxn, func(t *testing.T, s *Segment) { s.TimeIndex.Offset += 4 }, "want 80"},
		{"overlap", v2NoTxn, func(t *testing.T, s *Segment) { s.TimeIndex.Offset -= 4 }, "want 80"},
		{"txn_gap", v2, func(t *testing.T, s *Segment) { s.TxnIndex.Offset++ }, "want 200"},
		{"txn_overlap", v2, func(t *testing.T, s *Segment) { s.TxnIndex.Offset = 0 }, "want 200"},
		{"empty_offset_index_time_not_at_zero", func(t *testing.T) Segment { return sectionsSeg(t, base, last, ts, 0, 120) },
			func(t *testing.T, s *Segment) { s.TimeIndex.Offset = 1 }, "want 0"},

		// Keys of another object.
		{"time_section_other_attempt", v2, func(t *testing.T, s *Segment) {
			s.TimeIndex.Key = other(t, base, otherAttempt).Indexes
		}, "does not name the indexes of base offset 500"},
		{"all_sections_other_attempt", v2, func(t *testing.T, s *Segment) {
			k := other(t, base, otherAttempt).Indexes
			s.Index.Key, s.TimeIndex.Key, s.TxnIndex.Key = k, k, k
		}, "does not name the indexes of base offset 500"},
		{"txn_section_other_base", v2, func(t *testing.T, s *Segment) {
			s.TxnIndex.Key = other(t, base+1, s.AttemptID).Indexes
		}, "does not name the indexes of base offset 500"},
		{"time_section_other_prefix", v2, func(t *testing.T, s *Segment) {
			// Same base and attempt, so only the key comparison catches it.
			k, err := DataKeys("elsewhere", testTopic, testPart, base, s.AttemptID)
			if err != nil {
				t.Fatal(err)
			}
			s.TimeIndex.Key = k.Indexes
		}, "is not the indexes object"},

		// Offsets where there may be none.
		{"v1_index_offset", v1, func(t *testing.T, s *Segment) { s.Index.Offset = 8 }, "index object has offset 8"},
		{"v1_time_index_offset", v1, func(t *testing.T, s *Segment) { s.TimeIndex.Offset = 12 }, "timeindex object has offset 12"},
		{"v1_txn_offset", v1, func(t *testing.T, s *Segment) { s.TxnIndex.Offset = 1 }, "txnindex object has offset 1"},
		{"v1_log_offset", v1, func(t *testing.T, s *Segment) { s.Log.Offset = 5 }, "log object has offset 5"},
		{"v2_log_offset", v2, func(t *testing.T, s *Segment) { s.Log.Offset = 5 }, "log object has offset 5"},

		// Sizes.
		{"section_negative_size", v2, func(t *testing.T, s *Segment) { s.TimeIndex.Size = -1 }, "timeindex object size -1"},
		{"overflow_time", v2NoTxn, func(t *testing.T, s *Segment) {
			s.Index.Size = math.MaxInt64 - 10
			s.TimeIndex.Offset, s.TimeIndex.Size = s.Index.Size, 11
		}, "overflows"},
		{"overflow_txn", v2, func(t *testing.T, s *Segment) {
			s.Index.Size = 0
			s.TimeIndex.Offset, s.TimeIndex.Size = 0, math.MaxInt64-5
			s.TxnIndex.Offset, s.TxnIndex.Size = math.MaxInt64-5, 6
		}, "overflows"},
		{"overflow_max_sizes", v2NoTxn, func(t *testing.T, s *Segment) {
			s.Index.Size = math.MaxInt64
			s.TimeIndex.Offset, s.TimeIndex.Size = math.MaxInt64, math.MaxInt64
		}, "overflows"},
	}
	for _, tc := range invalid {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.seg(t)
			if err := s.Validate(); err != nil {
				t.Fatalf("unmodified segment invalid: %v", err)
			}
			tc.mutate(t, &s)
			err := s.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Fatalf("Validate() = %v, want an error containing %q", err, tc.reason)
			}
			// The manifest refuses it too, as corrupt.
			m := newTestManifest(t, base)
			m.Segments = []Segment{s}
			var ce *CorruptManifestError
			if err := m.Validate(); !errors.As(err, &ce) || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("Manifest.Validate() = %v, want a CorruptManifestError containing %q", err, tc.reason)
			}
			if _, err := EncodeRoot(m); err == nil {
				t.Fatal("EncodeRoot accepted the segment")
			}
		})
	}
}

func TestSectionsKeys(t *testing.T) {
	s := sectionsSeg(t, 700, 799, 1_700_000_000_700, 80, 120, 34)
	keys, _ := DataKeys(testPrefix, testTopic, testPart, 700, s.AttemptID)
	if got, want := s.Keys(), []string{keys.Log, keys.Indexes}; !slices.Equal(got, want) {
		t.Fatalf("Keys() = %v, want %v", got, want)
	}
	if got := len(s.Objects()); got != 4 {
		t.Fatalf("Objects() has %d entries, want the 4 (log and 3 sections)", got)
	}
	key, size, ok := s.IndexesObject()
	if !ok || key != keys.Indexes || size != 80+120+34 {
		t.Fatalf("IndexesObject() = %q, %d, %v; want %q, %d, true", key, size, ok, keys.Indexes, 80+120+34)
	}
	for i, o := range s.Objects() {
		if o.Section() != (i > 0) {
			t.Fatalf("object %d (%s): Section() = %v, want %v", i, o.Key, o.Section(), i > 0)
		}
	}

	noTxn := sectionsSeg(t, 800, 899, 1_700_000_000_800, 0, 36)
	if got := noTxn.Keys(); len(got) != 2 || !strings.HasSuffix(got[1], ".indexes") {
		t.Fatalf("Keys() without txn index = %v, want the log and an .indexes object", got)
	}
	if _, size, ok := noTxn.IndexesObject(); !ok || size != 36 {
		t.Fatalf("IndexesObject() without txn index: size %d, %v; want 36, true", size, ok)
	}

	whole := testSeg(t, 900, 999, 1_700_000_000_900)
	wk, _ := DataKeys(testPrefix, testTopic, testPart, 900, whole.AttemptID)
	if got, want := whole.Keys(), []string{wk.Log, wk.Index, wk.TimeIndex}; !slices.Equal(got, want) {
		t.Fatalf("version-1 Keys() = %v, want %v", got, want)
	}
	if _, _, ok := whole.IndexesObject(); ok {
		t.Fatal("a version-1 segment has an indexes object")
	}

	// The manifest's live set names the indexes object once.
	st := newMemStore()
	m := build(t, st, DefaultPolicy(), []Segment{s, noTxn, whole}, 3)
	refs, err := m.ReferencedKeys(context.Background(), st)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{keys.Log, keys.Indexes, noTxn.Log.Key, noTxn.Index.Key, wk.Log, wk.Index, wk.TimeIndex}
	slices.Sort(want)
	if !slices.Equal(refs, want) {
		t.Fatalf("ReferencedKeys() = %v, want %v", refs, want)
	}
}

// sectionsManifest is the golden manifest's shape with sections: a sealed
// sub-manifest holding a sections segment and a version-1 one, and two
// inline segments, the second of them (when inlineSections) with sections
// and a transaction index.
func sectionsManifest(t *testing.T, inlineSections bool) (*Manifest, *memStore) {
	t.Helper()
	s0 := sectionsSeg(t, 100, 199, 1_700_000_000_100, 96, 144)
	s1 := testSeg(t, 200, 299, 1_700_000_000_200)
	s2 := testSeg(t, 300, 399, 1_700_000_000_300)
	s3 := testSeg(t, 420, 499, 1_700_000_000_400)
	if inlineSections {
		s3 = sectionsSeg(t, 420, 499, 1_700_000_000_400, 0, 60, 34)
	}
	st := newMemStore()
	m := build(t, st, Policy{InlineMax: 2, SubSegments: 2}, []Segment{s0, s1, s2, s3}, 4)
	if len(m.Sealed) != 1 || len(m.Segments) != 2 {
		t.Fatalf("manifest shape: %d sealed, %d inline; want 1 and 2", len(m.Sealed), len(m.Segments))
	}
	return m, st
}

// versionPrefix is how an encoded manifest of version v starts.
func versionPrefix(v int) string { return fmt.Sprintf(`{"version":%d,`, v) }

// relabel returns data, a manifest encoded as version from, with its
// version rewritten to to (the rest unchanged).
func relabel(t *testing.T, data []byte, from, to int) []byte {
	t.Helper()
	p := versionPrefix(from)
	if !bytes.HasPrefix(data, []byte(p)) {
		t.Fatalf("encoding starts %.20q, want %s", data, p)
	}
	return append([]byte(versionPrefix(to)), data[len(p):]...)
}

func mustEncodeRoot(t *testing.T, m *Manifest) []byte {
	t.Helper()
	root, err := EncodeRoot(m)
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func TestSectionsCodec(t *testing.T) {
	t.Run("version_1_without_sections", func(t *testing.T) {
		st := newMemStore()
		m := build(t, st, Policy{InlineMax: 2, SubSegments: 2}, []Segment{
			testSeg(t, 0, 9, 1000), testSeg(t, 10, 19, 2000), testSeg(t, 20, 29, 3000), testSeg(t, 30, 39, 4000)}, 4)
		root, err := EncodeRoot(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(root, []byte(versionPrefix(1))) || bytes.Contains(root, []byte(`"offset"`)) {
			t.Fatalf("root without sections, want version 1 and no \"offset\":\n%s", root)
		}
		sub := st.objs[m.Sealed[0].Key]
		if !bytes.HasPrefix(sub, []byte(versionPrefix(1))) {
			t.Fatalf("sub-manifest without sections, want version 1:\n%s", sub)
		}
		if VersionOf(m.Segments) != 1 || VersionOf(nil) != 1 {
			t.Fatal("VersionOf of version-1 segments is not 1")
		}
	})

	t.Run("sections_root_and_sub", func(t *testing.T) {
		m, st := sectionsManifest(t, true)
		root, err := EncodeRoot(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(root, []byte(versionPrefix(2))) {
			t.Fatalf("root with sections, want version 2:\n%s", root)
		}
		// The time index of the inline sections segment is at 0 (its
		// offset index is empty), the transaction index at 60.
		if !bytes.Contains(root, []byte(`"offset":60`)) {
			t.Fatalf("root does not record the txn section's offset:\n%s", root)
		}
		dec, err := DecodeRoot(m.Key(), root)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(noIdx(dec), noIdx(m)) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", noIdx(dec), noIdx(m))
		}
		if again, err := EncodeRoot(dec); err != nil || !bytes.Equal(again, root) {
			t.Fatalf("re-encoding differs: %v", err)
		}

		subKey := m.Sealed[0].Key
		subData := st.objs[subKey]
		if !bytes.HasPrefix(subData, []byte(versionPrefix(2))) {
			t.Fatalf("sub-manifest with sections, want version 2:\n%s", subData)
		}
		sub, err := dec.LoadSub(context.Background(), st, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := flatten(t, m, st)[:2]
		if !reflect.DeepEqual(sub.Segments, want) {
			t.Fatalf("sub-manifest round trip:\n got %+v\nwant %+v", sub.Segments, want)
		}
		if _, _, ok := sub.Segments[0].IndexesObject(); !ok {
			t.Fatal("the sealed sections segment lost its sections")
		}
		if again, err := EncodeSub(sub); err != nil || !bytes.Equal(again, subData) {
			t.Fatalf("sub-manifest re-encoding differs: %v", err)
		}
	})

	t.Run("version_of_each_object", func(t *testing.T) {
		// Sections only in the sealed sub-manifest: the root, whose inline
		// segments do not need version 2, stays version 1.
		m, st := sectionsManifest(t, false)
		root, err := EncodeRoot(m)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.HasPrefix(root, []byte(versionPrefix(1))) {
			t.Fatalf("root without inline sections, want version 1:\n%s", root)
		}
		if sub := st.objs[m.Sealed[0].Key]; !bytes.HasPrefix(sub, []byte(versionPrefix(2))) {
			t.Fatalf("sub-manifest with sections, want version 2:\n%s", sub)
		}
		dec, err := DecodeRoot(m.Key(), root)
		if err != nil {
			t.Fatal(err)
		}
		segs := flatten(t, dec, st)
		if len(segs) != 4 {
			t.Fatalf("%d segments read back, want 4: %+v", len(segs), segs)
		}
		if _, _, ok := segs[0].IndexesObject(); !ok {
			t.Fatalf("segment %d read back without its indexes object: %+v", segs[0].BaseOffset, segs[0])
		}
	})

	t.Run("version_1_listing_sections", func(t *testing.T) {
		m, st := sectionsManifest(t, true)
		_, err := DecodeRoot(m.Key(), relabel(t, mustEncodeRoot(t, m), 2, 1))
		var ce *CorruptManifestError
		if !errors.As(err, &ce) || ce.Key != m.Key() || !strings.Contains(ce.Reason, "indexes object") {
			t.Fatalf("DecodeRoot(version 1 with sections) = %v, want a CorruptManifestError naming the indexes object", err)
		}
		subKey := m.Sealed[0].Key
		_, err = DecodeSub(subKey, relabel(t, st.objs[subKey], 2, 1))
		if !errors.As(err, &ce) || ce.Key != subKey || !strings.Contains(ce.Reason, "indexes object") {
			t.Fatalf("DecodeSub(version 1 with sections) = %v, want a CorruptManifestError naming the indexes object", err)
		}
	})

	t.Run("version_2_without_sections", func(t *testing.T) {
		// Version 2 is a superset: a version-2 manifest of whole objects
		// is read, and written back as version 1.
		m, _ := sectionsManifest(t, false)
		root := mustEncodeRoot(t, m)
		dec, err := DecodeRoot(m.Key(), relabel(t, root, 1, 2))
		if err != nil {
			t.Fatal(err)
		}
		if again, err := EncodeRoot(dec); err != nil || !bytes.Equal(again, root) {
			t.Fatalf("re-encoded:\n%s\n%v\nwant the version-1 encoding:\n%s", again, err, root)
		}
	})

	t.Run("version_3", func(t *testing.T) {
		m, _ := sectionsManifest(t, true)
		_, err := DecodeRoot(m.Key(), relabel(t, mustEncodeRoot(t, m), 2, 3))
		var ve *UnsupportedVersionError
		if !errors.As(err, &ve) || ve.Version != 3 {
			t.Fatalf("DecodeRoot(version 3) = %v, want *UnsupportedVersionError", err)
		}
	})
}

// TestSectionsOffsetField: an "offset" is only valid on an index section
// of a version-2 manifest, and only when it is not 0 (writers leave a 0
// out): decoding refuses it anywhere else rather than ignoring it.
func TestSectionsOffsetField(t *testing.T) {
	v1, _ := sectionsManifest(t, false)
	v2, _ := sectionsManifest(t, true)
	for _, tc := range []struct {
		name      string
		m         *Manifest
		from, to  string
		wantError string // "" decodes
	}{
		{"v1_index_explicit_zero", v1, `"index":{"key":`, `"index":{"offset":0,"key":`, `index has an "offset" (a section of an indexes object), which version 1`},
		{"v1_log_explicit_zero", v1, `"log":{"key":`, `"log":{"offset":0,"key":`, `log has an "offset"`},
		{"v1_time_index_offset", v1, `"time_index":{"key":`, `"time_index":{"offset":8,"key":`, "which version 1 does not have"},
		{"v2_log_offset", v2, `"log":{"key":`, `"log":{"offset":0,"key":`, `log has an "offset"; only index sections have one`},
		{"v2_section_explicit_zero", v2, `"index":{"key":`, `"index":{"offset":0,"key":`, `index has "offset": 0`},
		{"v2_unchanged", v2, "", "", ""},
		{"v1_unchanged", v1, "", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root, err := EncodeRoot(tc.m)
			if err != nil {
				t.Fatal(err)
			}
			// The last inline segment: the one with sections in v2.
			i := bytes.LastIndex(root, []byte(tc.from))
			if i < 0 {
				t.Fatalf("%q not in the encoding", tc.from)
			}
			data := append(append(slices.Clone(root[:i]), tc.to...), root[i+len(tc.from):]...)
			got, err := DecodeRoot(tc.m.Key(), data)
			if tc.wantError == "" {
				if err != nil || !reflect.DeepEqual(got.Segments, tc.m.Segments) {
					t.Fatalf("DecodeRoot = %v, want the encoded segments back", err)
				}
				return
			}
			var ce *CorruptManifestError
			if !errors.As(err, &ce) || !strings.Contains(ce.Reason, tc.wantError) {
				t.Fatalf("DecodeRoot = %v, want a CorruptManifestError with %q", err, tc.wantError)
			}
		})
	}
}
