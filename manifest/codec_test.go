package manifest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata golden files")

// goldenManifest builds the manifest of testdata/root-v1.json: one sealed
// sub-manifest of two segments, two inline, one of them compacted with a
// transaction index and a gap before it.
func goldenManifest(t testing.TB) (*Manifest, *memStore) {
	t.Helper()
	s0 := testSeg(t, 100, 199, 1_700_000_000_100)
	s0.LeaderEpochs = []EpochEntry{{Epoch: 3, StartOffset: 100}, {Epoch: 4, StartOffset: 150}}
	s1 := testSeg(t, 200, 299, 1_700_000_000_200)
	s1.RecordCount = UnknownCount
	s2 := testSeg(t, 300, 399, 1_700_000_000_300)
	s3 := testSeg(t, 420, 499, 1_700_000_000_400)
	s3.Compacted = true
	s3.RecordCount = 17
	keys, _ := DataKeys(testPrefix, testTopic, testPart, 420, s3.AttemptID)
	s3.TxnIndex = &Object{Key: keys.TxnIndex, Size: 34, Checksum: "sha256:" + Checksum(strings.Repeat("0f", 32))}
	s3.Log.Checksum = "sha256:" + Checksum(strings.Repeat("a1", 32))
	st := newMemStore()
	m := newTestManifest(t, 120)
	c, err := Append(m, Policy{InlineMax: 2, SubSegments: 2}, s0, s1, s2, s3)
	if err != nil {
		t.Fatal(err)
	}
	st.apply(t, c)
	return c.Root, st
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoding differs from %s (run with -update if intended):\n%s", path, got)
	}
}

func noIdx(m *Manifest) Manifest { c := *m; c.idx = nil; return c }

func TestGolden(t *testing.T) {
	m, st := goldenManifest(t)
	if len(m.Sealed) != 1 || len(m.Segments) != 2 || m.Generation != 1 {
		t.Fatalf("golden manifest shape: %d sealed, %d inline, generation %d", len(m.Sealed), len(m.Segments), m.Generation)
	}
	root, err := EncodeRoot(m)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "root-v1.json", root)
	golden(t, "sub-v1.json", st.objs[m.Sealed[0].Key])
	if !json.Valid(root) {
		t.Fatal("root is not valid JSON")
	}

	dec, err := DecodeRoot(m.Key(), root)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(noIdx(dec), noIdx(m)) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", noIdx(dec), noIdx(m))
	}
	again, err := EncodeRoot(dec)
	if err != nil || !bytes.Equal(again, root) {
		t.Fatalf("re-encoding differs: %v", err)
	}
	sub, err := dec.LoadSub(context.Background(), st, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(sub.Segments) != 2 || sub.Segments[0].BaseOffset != 100 || sub.Segments[1].RecordCount != UnknownCount {
		t.Fatalf("sub-manifest: %+v", sub.Segments)
	}
}

// encodeUnchecked encodes m like EncodeRoot without validating it, to feed
// DecodeRoot invalid manifests.
func encodeUnchecked(t *testing.T, m *Manifest) []byte {
	t.Helper()
	b, err := json.Marshal(wireRoot[Segment]{Version: Version, Kind: KindPartition, Topic: m.Topic, Partition: m.Partition,
		Generation: m.Generation, LogStartOffset: m.LogStartOffset, Sealed: m.Sealed, Segments: m.Segments})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestValidationFailures(t *testing.T) {
	good, _ := goldenManifest(t)
	goodBytes, err := EncodeRoot(good)
	if err != nil {
		t.Fatal(err)
	}
	key := good.Key()
	otherPart := func(s *Segment) {
		k, _ := DataKeys(testPrefix, testTopic, testPart+1, s.BaseOffset, s.AttemptID)
		s.Log.Key, s.Index.Key, s.TimeIndex.Key = k.Log, k.Index, k.TimeIndex
	}
	cases := []struct {
		name   string
		mutate func(m *Manifest)
		reason string
	}{
		{"bad_topic", func(m *Manifest) { m.Topic = "a b" }, "topic name"},
		{"negative_partition", func(m *Manifest) { m.Partition = -1 }, "negative partition"},
		{"negative_generation", func(m *Manifest) { m.Generation = -1 }, "negative generation"},
		{"negative_log_start", func(m *Manifest) { m.LogStartOffset = -1 }, "negative log start"},
		{"log_start_above_first_segment", func(m *Manifest) { m.LogStartOffset = 300 }, "above the first segment"},
		{"sealed_key_other_partition", func(m *Manifest) {
			m.Sealed[0].Key = strings.Replace(m.Sealed[0].Key, PartitionHash(testTopic, testPart)+"/orders.v1-3",
				PartitionHash(testTopic, 9)+"/orders.v1-9", 1)
		}, "not under this partition"},
		{"sealed_key_is_data_key", func(m *Manifest) { m.Sealed[0].Key = m.Segments[0].Log.Key }, "not a sub-manifest key"},
		{"sealed_key_foreign", func(m *Manifest) { m.Sealed[0].Key = "elsewhere/x.json" }, "not a key of the tiered bucket layout"},
		{"sealed_range_not_key_range", func(m *Manifest) { m.Sealed[0].LastOffset = 250 }, "does not match range"},
		{"sealed_checksum_crc", func(m *Manifest) { m.Sealed[0].Checksum = "crc32c:00000000" }, "is not sha256"},
		{"sealed_checksum_malformed", func(m *Manifest) { m.Sealed[0].Checksum = "sha256:xyz" }, "lowercase hex"},
		{"sealed_checksum_not_key", func(m *Manifest) { m.Sealed[0].Checksum = Checksum("sha256:" + strings.Repeat("e", 64)) }, "does not match checksum"},
		{"sealed_size_zero", func(m *Manifest) { m.Sealed[0].Size = 0 }, "size 0"},
		{"sealed_size_huge", func(m *Manifest) { m.Sealed[0].Size = MaxEncodedBytes + 1 }, "size"},
		{"sealed_no_segments", func(m *Manifest) { m.Sealed[0].Segments = 0 }, "segment count 0"},
		{"sealed_too_many_segments", func(m *Manifest) { m.Sealed[0].Segments = 201 }, "segment count 201"},
		{"sealed_log_bytes", func(m *Manifest) { m.Sealed[0].LogBytes = 1 }, "log bytes"},
		{"sealed_timestamps", func(m *Manifest) { m.Sealed[0].MinTimestamp = m.Sealed[0].MaxTimestamp + 1 }, "timestamps"},
		{"sealed_overlap", func(m *Manifest) { m.Sealed = append(m.Sealed, m.Sealed[0]) }, "overlaps or precedes"},
		{"inline_inside_sealed", func(m *Manifest) { m.Segments[0] = testSeg(t, 250, 260, 5000) }, "overlaps or precedes"},
		{"inline_out_of_order", func(m *Manifest) { m.Segments[0], m.Segments[1] = m.Segments[1], m.Segments[0] }, "overlaps or precedes"},
		{"inline_overlap", func(m *Manifest) { m.Segments[1] = testSeg(t, 399, 450, 5000) }, "overlaps or precedes"},
		{"negative_base", func(m *Manifest) { m.Segments[0].BaseOffset = -1 }, "negative base offset"},
		{"last_below_base", func(m *Manifest) { m.Segments[0].LastOffset = 299 }, "below base offset"},
		{"last_max_int64", func(m *Manifest) { m.Segments[1].LastOffset = math.MaxInt64 }, "no next offset"},
		{"last_absurd", func(m *Manifest) { m.Segments[1].LastOffset = math.MaxInt64 - 1 }, "more than a segment can hold"},
		{"last_past_relative_offsets", func(m *Manifest) {
			m.Segments[1].LastOffset = m.Segments[1].BaseOffset + math.MaxInt32 + 1
		}, "more than a segment can hold"},
		{"record_count_too_big", func(m *Manifest) { m.Segments[0].RecordCount = 101 }, "record count 101 exceeds"},
		{"record_count_negative", func(m *Manifest) { m.Segments[0].RecordCount = -2 }, "record count -2"},
		{"timestamp_below_minus_one", func(m *Manifest) { m.Segments[0].MinTimestamp = -2 }, "below -1"},
		{"timestamps_inverted", func(m *Manifest) { m.Segments[0].MinTimestamp = m.Segments[0].MaxTimestamp + 1 }, "above max timestamp"},
		{"upload_time_negative", func(m *Manifest) { m.Segments[0].UploadTimeMs = -5 }, "negative upload time"},
		{"uploader_too_long", func(m *Manifest) { m.Segments[0].Uploader = strings.Repeat("u", 257) }, "uploader id"},
		{"uploader_not_utf8", func(m *Manifest) { m.Segments[0].Uploader = "\xff" }, "uploader id"},
		{"attempt_id_bad", func(m *Manifest) { m.Segments[0].AttemptID = "UPPER-CASE" }, "attempt id"},
		{"attempt_id_not_key", func(m *Manifest) { m.Segments[0].AttemptID = "0000000000000000" }, "does not name"},
		{"epoch_negative", func(m *Manifest) { m.Segments[0].LeaderEpochs[0].Epoch = -1 }, "negative leader epoch"},
		{"epoch_outside", func(m *Manifest) { m.Segments[0].LeaderEpochs[0].StartOffset = 299 }, "outside the segment"},
		{"epochs_not_increasing", func(m *Manifest) {
			m.Segments[0].LeaderEpochs = []EpochEntry{{Epoch: 5, StartOffset: 300}, {Epoch: 5, StartOffset: 310}}
		}, "not strictly increasing"},
		{"log_size_zero", func(m *Manifest) { m.Segments[0].Log.Size = 0 }, "log object size 0"},
		{"index_size_negative", func(m *Manifest) { m.Segments[0].Index.Size = -1 }, "index object size -1"},
		{"checksum_malformed", func(m *Manifest) { m.Segments[0].TimeIndex.Checksum = "crc32c:123" }, "timeindex object: checksum"},
		{"checksum_unknown_alg", func(m *Manifest) { m.Segments[0].Log.Checksum = "md5:00000000" }, "unknown algorithm"},
		{"key_wrong_file", func(m *Manifest) { m.Segments[0].Index.Key = m.Segments[0].Log.Key }, "does not name the index"},
		{"key_other_base", func(m *Manifest) { m.Segments[0].Log.Key = m.Segments[1].Log.Key }, "does not name the log"},
		{"key_foreign", func(m *Manifest) { m.Segments[0].Log.Key = "x/y.log" }, "not a key of the tiered bucket layout"},
		{"keys_other_partition", func(m *Manifest) { otherPart(&m.Segments[0]) }, "not under this partition"},
		{"keys_other_prefix", func(m *Manifest) {
			s := &m.Segments[0]
			for _, o := range []*Object{&s.Log, &s.Index, &s.TimeIndex} {
				o.Key = "other/" + o.Key
			}
		}, "not under this partition"},
		{"txn_key_other_partition", func(m *Manifest) {
			s := &m.Segments[1]
			k, _ := DataKeys(testPrefix, testTopic, 0, s.BaseOffset, s.AttemptID)
			s.TxnIndex.Key = k.TxnIndex
		}, "not in the log object's partition"},
		{"txn_key_is_log", func(m *Manifest) { m.Segments[1].TxnIndex.Key = m.Segments[1].Log.Key }, "does not name the txnindex"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			m, err := DecodeRoot(key, goodBytes)
			if err != nil {
				t.Fatal(err)
			}
			tc.mutate(m)
			var ce *CorruptManifestError
			err = m.Validate()
			if !errors.As(err, &ce) || ce.Key != "" || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("Validate() = %v, want a CorruptManifestError containing %q", err, tc.reason)
			}
			if _, err := EncodeRoot(m); !errors.As(err, &ce) {
				t.Fatalf("EncodeRoot accepted an invalid manifest: %v", err)
			}
			if tc.name == "uploader_not_utf8" {
				return // JSON encoding replaces invalid UTF-8
			}
			_, err = DecodeRoot(key, encodeUnchecked(t, m))
			if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(ce.Reason, tc.reason) {
				if tc.name == "bad_topic" || tc.name == "negative_partition" {
					// The content names another partition than the key.
					if errors.As(err, &ce) && strings.Contains(ce.Reason, "not the partition its key names") {
						return
					}
				}
				t.Fatalf("DecodeRoot = %v, want a CorruptManifestError for %s containing %q", err, key, tc.reason)
			}
		})
	}
}

func TestDecodeFailures(t *testing.T) {
	good, st := goldenManifest(t)
	goodBytes, _ := EncodeRoot(good)
	key := good.Key()
	replace := func(old, new string) []byte {
		if !bytes.Contains(goodBytes, []byte(old)) {
			t.Fatalf("golden has no %q", old)
		}
		return bytes.Replace(goodBytes, []byte(old), []byte(new), 1)
	}
	otherKey, _ := ManifestKey(testPrefix, testTopic, testPart+1)
	cases := []struct {
		name   string
		key    string
		data   []byte
		reason string
	}{
		{"empty", key, nil, "not a JSON object"},
		{"not_json", key, []byte("manifest"), "not a JSON object"},
		{"array", key, []byte(`[1,2]`), "not a JSON object"},
		{"no_version", key, replace(`"version":1,`, ""), `no "version" field`},
		{"version_zero", key, replace(`"version":1,`, `"version":0,`), "unknown version 0"},
		{"version_string", key, replace(`"version":1,`, `"version":"1",`), "not an integer"},
		{"version_fraction", key, replace(`"version":1,`, `"version":1.5,`), "not an integer"},
		{"no_kind", key, replace(`"kind":"partition",`, ""), "kind is none"},
		{"kind_sub", key, replace(`"kind":"partition"`, `"kind":"segments"`), `kind is "segments"`},
		{"unknown_field", key, replace(`"generation":1,`, `"generation":1,"extra":true,`), "unknown field"},
		{"trailing_data", key, append(bytes.Clone(goodBytes), "{}"...), "data after the JSON object"},
		{"truncated", key, goodBytes[:len(goodBytes)/2], "not a JSON object"},
		{"offset_as_string", key, replace(`"base_offset":300`, `"base_offset":"300"`), "cannot unmarshal"},
		{"partition_overflow", key, replace(`"partition":3,`, `"partition":4294967299,`), "cannot unmarshal"},
		{"offset_float", key, replace(`"base_offset":300`, `"base_offset":3e2`), "cannot unmarshal"},
		{"key_other_partition", otherKey, goodBytes, "not the partition its key names"},
		{"key_is_sub_key", good.Sealed[0].Key, goodBytes, "not the partition its key names"},
		{"key_foreign", "x/manifest.json", goodBytes, "not the partition its key names"},
		{"too_large", key, append(bytes.Clone(goodBytes), bytes.Repeat([]byte(" "), MaxEncodedBytes)...), "byte limit"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRoot(tc.key, tc.data)
			var ce *CorruptManifestError
			if !errors.As(err, &ce) || ce.Key != tc.key || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("DecodeRoot = %v, want a CorruptManifestError containing %q", err, tc.reason)
			}
		})
	}

	t.Run("newer_version", func(t *testing.T) {
		// A future format may change anything after the version; it is
		// refused as such, not reported as corrupt.
		data := []byte(`{"version":3,"kind":"partition-tree","levels":[]}`)
		_, err := DecodeRoot(key, data)
		var ve *UnsupportedVersionError
		var ce *CorruptManifestError
		if !errors.As(err, &ve) || ve.Version != 3 || ve.Key != key || errors.As(err, &ce) {
			t.Fatalf("DecodeRoot = %v, want *UnsupportedVersionError", err)
		}
		if !strings.Contains(err.Error(), "upgrade") {
			t.Fatalf("message %q does not say what to do", err)
		}
	})

	subKey := good.Sealed[0].Key
	subBytes := st.objs[subKey]
	t.Run("sub_content_not_key", func(t *testing.T) {
		tampered := bytes.Replace(subBytes, []byte(`"uploader":"broker-1"`), []byte(`"uploader":"broker-2"`), 1)
		_, err := DecodeSub(subKey, tampered)
		var ce *CorruptManifestError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "does not match the hash in its key") {
			t.Fatalf("DecodeSub = %v", err)
		}
	})
	t.Run("sub_as_root", func(t *testing.T) {
		_, err := DecodeRoot(key, subBytes)
		var ce *CorruptManifestError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, `kind is "segments"`) {
			t.Fatalf("DecodeRoot(sub) = %v", err)
		}
	})
	t.Run("sub_empty", func(t *testing.T) {
		_, err := DecodeSub(subKey, []byte(`{"version":1,"kind":"segments","topic":"orders.v1","partition":3,"segments":[]}`))
		var ce *CorruptManifestError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "no segments") {
			t.Fatalf("DecodeSub = %v", err)
		}
	})
	t.Run("sub_range_not_key", func(t *testing.T) {
		_, err := DecodeSub(strings.Replace(subKey, offsetName(299), offsetName(298), 1), subBytes)
		var ce *CorruptManifestError
		if !errors.As(err, &ce) || !strings.Contains(ce.Reason, "the key names") {
			t.Fatalf("DecodeSub = %v", err)
		}
	})

	// LoadSub checks the bytes and summary against the root's reference.
	ctx := context.Background()
	loadCases := []struct {
		name   string
		mutate func(m *Manifest, st *memStore)
		reason string
	}{
		{"size", func(m *Manifest, st *memStore) { st.objs[subKey] = append(bytes.Clone(subBytes), ' ') }, "bytes, the manifest recorded"},
		{"checksum", func(m *Manifest, st *memStore) {
			b := bytes.Clone(subBytes)
			b[len(b)-2] = ' '
			st.objs[subKey] = b
		}, "checksum"},
		{"summary", func(m *Manifest, st *memStore) { m.Sealed[0].MaxTimestamp++ }, "does not match the manifest's reference"},
		{"below_log_start", func(m *Manifest, st *memStore) { m.LogStartOffset = 250 }, "below the log start offset"},
	}
	for _, tc := range loadCases {
		t.Run("load_"+tc.name, func(t *testing.T) {
			m, _ := DecodeRoot(key, goodBytes)
			st2 := newMemStore()
			st2.objs[subKey] = subBytes
			tc.mutate(m, st2)
			_, err := m.LoadSub(ctx, st2, 0)
			var ce *CorruptManifestError
			if !errors.As(err, &ce) || ce.Key != subKey || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("LoadSub = %v, want a CorruptManifestError containing %q", err, tc.reason)
			}
		})
	}
	t.Run("load_missing", func(t *testing.T) {
		m, _ := DecodeRoot(key, goodBytes)
		if _, err := m.LoadSub(ctx, newMemStore(), 0); err == nil || !strings.Contains(err.Error(), "not found") {
			t.Fatalf("LoadSub = %v", err)
		}
		if _, err := m.LoadSub(ctx, newMemStore(), 1); err == nil {
			t.Fatal("LoadSub(1) of 1 succeeded")
		}
	})
}

func TestReadLimited(t *testing.T) {
	b, err := ReadLimited("k", strings.NewReader("abc"))
	if err != nil || string(b) != "abc" {
		t.Fatalf("ReadLimited = %q, %v", b, err)
	}
	_, err = ReadLimited("k", io0{})
	var ce *CorruptManifestError
	if !errors.As(err, &ce) {
		t.Fatalf("ReadLimited(endless) = %v", err)
	}
}

// io0 is an endless reader of zeros.
type io0 struct{}

func (io0) Read(p []byte) (int, error) { clear(p); return len(p), nil }
