package manifest

import (
	"bytes"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"
	"testing"
)

const (
	idA = "o3Bx6y0QQxyxS2FrDcDiOw" // a real Kafka topic ID form
	idB = "Vtqh-_aLSpGn3jK4dGnv8A"
)

// idSeg is testSeg in the lineage of topicID.
func idSeg(t testing.TB, topicID string, base, last int64) Segment {
	t.Helper()
	s := testSeg(t, base, last, 1000+base)
	keys, err := DataKeysID(testPrefix, testTopic, topicID, testPart, base, s.AttemptID)
	if err != nil {
		t.Fatal(err)
	}
	sum := func(s string) Checksum { return CRC32CChecksum(crc32.Checksum([]byte(s), castagnoli)) }
	s.Log.Key, s.Log.Checksum = keys.Log, sum(keys.Log)
	s.Index.Key, s.Index.Checksum = keys.Index, sum(keys.Index)
	s.TimeIndex.Key, s.TimeIndex.Checksum = keys.TimeIndex, sum(keys.TimeIndex)
	return s
}

func TestLineageKeys(t *testing.T) {
	for _, tc := range []struct {
		name, id, wantDir string
	}{
		{"name-only", "", "orders.v1-3"},
		{"id", idA, "orders.v1-3~" + idA},
		{"id with dash", idB, "orders.v1-3~" + idB},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dk, err := DataKeysID(testPrefix, testTopic, tc.id, testPart, 42, "0123456789abcdef")
			if err != nil {
				t.Fatal(err)
			}
			want := testPrefix + "/data/" + PartitionHash(testTopic, testPart) + "/" + tc.wantDir + "/00000000000000000042-0123456789abcdef.log"
			if dk.Log != want {
				t.Fatalf("data key %q, want %q", dk.Log, want)
			}
			k, err := ParseDataKey(dk.Log)
			if err != nil || k.TopicID != tc.id || k.Topic != testTopic || k.Partition != testPart || k.BaseOffset != 42 {
				t.Fatalf("parse %q: %+v, %v", dk.Log, k, err)
			}
			mk, err := ManifestKeyID(testPrefix, testTopic, tc.id, testPart)
			if err != nil {
				t.Fatal(err)
			}
			k, err = ParseKey(mk)
			if err != nil || k.Type != KeyRoot || k.TopicID != tc.id {
				t.Fatalf("parse %q: %+v, %v", mk, k, err)
			}
		})
	}
	for _, bad := range []string{"short", "AAAAAAAAAAAAAAAAAAAAAA", "o3Bx6y0QQxyxS2FrDcDiO!", "o3Bx6y0QQxyxS2FrDcDiOx"} {
		if _, err := ManifestKeyID(testPrefix, testTopic, bad, testPart); err == nil {
			t.Errorf("topic id %q accepted", bad)
		}
		key := testPrefix + "/manifests/" + PartitionHash(testTopic, testPart) + "/" + testTopic + "-3~" + bad + "/manifest.json"
		if _, err := ParseKey(key); err == nil {
			t.Errorf("key with topic id %q parsed", bad)
		}
	}
}

// A manifest records its lineage, refuses segments of another lineage
// (the old topic's data never mixes into the new one) and round-trips.
func TestManifestTopicID(t *testing.T) {
	m, err := NewID(testPrefix, testTopic, idA, testPart, 0)
	if err != nil {
		t.Fatal(err)
	}
	c, err := Append(m, DefaultPolicy(), idSeg(t, idA, 0, 9), idSeg(t, idA, 10, 19))
	if err != nil {
		t.Fatal(err)
	}
	enc, err := EncodeRoot(c.Root)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(enc, []byte(`"topic_id":"`+idA+`"`)) {
		t.Fatalf("encoding has no topic_id: %s", enc)
	}
	got, err := DecodeRoot(c.Root.Key(), enc)
	if err != nil || got.TopicID != idA || len(got.Segments) != 2 {
		t.Fatalf("decode: %+v, %v", got, err)
	}
	for _, tc := range []struct {
		name string
		seg  Segment
	}{
		{"name-only segment", idSeg(t, "", 20, 29)},
		{"other lineage", idSeg(t, idB, 20, 29)},
	} {
		if _, err := Append(c.Root, DefaultPolicy(), tc.seg); err == nil {
			t.Errorf("%s: appended to lineage %s", tc.name, idA)
		}
	}
	// The same bytes under another lineage's key are refused.
	otherKey, _ := ManifestKeyID(testPrefix, testTopic, idB, testPart)
	var ce *CorruptManifestError
	if _, err := DecodeRoot(otherKey, enc); !errors.As(err, &ce) {
		t.Fatalf("decode under lineage %s: %v, want a CorruptManifestError", idB, err)
	}
	nameKey, _ := ManifestKey(testPrefix, testTopic, testPart)
	if _, err := DecodeRoot(nameKey, enc); !errors.As(err, &ce) {
		t.Fatalf("decode under the name-only key: %v, want a CorruptManifestError", err)
	}
	// A name-only manifest encodes exactly as before topic IDs.
	n := newTestManifest(t, 0)
	nenc, err := EncodeRoot(n)
	if err != nil || bytes.Contains(nenc, []byte("topic_id")) {
		t.Fatalf("name-only encoding %s, %v", nenc, err)
	}
}

// Sealed sub-manifests carry the lineage too.
func TestSubManifestTopicID(t *testing.T) {
	st := newMemStore()
	m, err := NewID(testPrefix, testTopic, idA, testPart, 0)
	if err != nil {
		t.Fatal(err)
	}
	p := Policy{InlineMax: 4, SubSegments: 2}
	for i := int64(0); i < 10; i++ {
		c, err := Append(m, p, idSeg(t, idA, i*10, i*10+9))
		if err != nil {
			t.Fatal(err)
		}
		st.apply(t, c)
		m = c.Root
	}
	if len(m.Sealed) == 0 {
		t.Fatal("nothing sealed")
	}
	k, err := ParseKey(m.Sealed[0].Key)
	if err != nil || k.TopicID != idA {
		t.Fatalf("sub key %q: %+v, %v", m.Sealed[0].Key, k, err)
	}
	sub, err := m.LoadSub(t.Context(), st, 0)
	if err != nil || sub.TopicID != idA {
		t.Fatalf("load sub: %+v, %v", sub, err)
	}
}

func testState(t *testing.T) *TopicState {
	t.Helper()
	s, _, write, err := ObserveTopic(testPrefix, testTopic, nil, Observation{TopicID: idA, Partitions: 3,
		Configs: map[string]string{"cleanup.policy": "delete"}, NowMs: 1000})
	if err != nil || !write {
		t.Fatalf("observe: %v, write %v", err, write)
	}
	return s
}

func TestTopicObjectCodec(t *testing.T) {
	s := testState(t)
	s, _, _, err := ObserveTopic(testPrefix, testTopic, s, Observation{TopicID: idB, Partitions: 2, NowMs: 2000})
	if err != nil {
		t.Fatal(err)
	}
	key, err := TopicKey(testPrefix, testTopic)
	if err != nil || key != testPrefix+"/topics/"+testTopic+".json" {
		t.Fatalf("topic key %q, %v", key, err)
	}
	enc, err := EncodeTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeTopic(key, enc)
	if err != nil {
		t.Fatal(err)
	}
	enc2, _ := EncodeTopic(got)
	if !bytes.Equal(enc, enc2) {
		t.Fatalf("not stable:\n%s\n%s", enc, enc2)
	}
	if got.Current.TopicID != idB || len(got.Superseded) != 1 || got.Superseded[0].TopicID != idA || got.Superseded[0].Reason != ReasonRecreated {
		t.Fatalf("decoded %+v", got)
	}
	valid := string(enc)
	for _, tc := range []struct{ name, data string }{
		{"other topic", strings.Replace(valid, `"topic":"orders.v1"`, `"topic":"orders.v2"`, 1)},
		{"unknown field", strings.Replace(valid, `"kind"`, `"extra":1,"kind"`, 1)},
		{"wrong kind", strings.Replace(valid, `"kind":"topic"`, `"kind":"partition"`, 1)},
		{"bad id", strings.Replace(valid, idB, "AAAAAAAAAAAAAAAAAAAAAA", 1)},
		{"current among superseded", strings.Replace(valid, idB, idA, 1)},
		{"no current, no deletion", strings.Replace(valid, `"current":{"topic_id":"`+idB+`","partitions":2}`, `"current":null`, 1)},
		{"bad reason", strings.Replace(valid, `"recreated"`, `"moved"`, 1)},
		{"trailing data", valid + "{}"},
		{"not json", "nope"},
	} {
		if tc.data == valid {
			t.Fatalf("%s: the case changes nothing", tc.name)
		}
		var ce *CorruptManifestError
		if _, err := DecodeTopic(key, []byte(tc.data)); !errors.As(err, &ce) {
			t.Errorf("%s: %v, want a CorruptManifestError", tc.name, err)
		}
	}
	var uve *UnsupportedVersionError
	if _, err := DecodeTopic(key, []byte(strings.Replace(valid, `"version":1`, `"version":2`, 1))); !errors.As(err, &uve) {
		t.Errorf("version 2: %v, want an UnsupportedVersionError", err)
	}
}

func TestObserveTopic(t *testing.T) {
	s := testState(t)
	if k, _, ok := s.Serving(); !ok || k != idA {
		t.Fatalf("serving %q %v", k, ok)
	}
	for _, tc := range []struct {
		name      string
		o         Observation
		wantKey   string
		wantWrite bool
		wantErr   error
	}{
		{"same id, same count", Observation{TopicID: idA, Partitions: 2, Configs: map[string]string{"cleanup.policy": "delete"}, NowMs: 5}, idA, false, nil},
		{"same id, more partitions", Observation{TopicID: idA, Partitions: 6, NowMs: 5}, idA, true, nil},
		{"same id, configs changed", Observation{TopicID: idA, Partitions: 1, Configs: map[string]string{"cleanup.policy": "compact"}, NowMs: 5}, idA, true, nil},
		{"no id under an id", Observation{Partitions: 1, NowMs: 5}, "", false, ErrNoTopicID},
		{"re-created", Observation{TopicID: idB, Partitions: 1, NowMs: 5}, idB, true, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n, key, write, err := ObserveTopic(testPrefix, testTopic, s, tc.o)
			if !errors.Is(err, tc.wantErr) || key != tc.wantKey || write != tc.wantWrite {
				t.Fatalf("key %q write %v err %v, want %q %v %v", key, write, err, tc.wantKey, tc.wantWrite, tc.wantErr)
			}
			if err == nil && n.Validate() != nil {
				t.Fatalf("invalid result: %v", n.Validate())
			}
		})
	}
	// After the re-creation the old ID is superseded: a stale log dir of
	// it is refused, never written to.
	re, _, _, err := ObserveTopic(testPrefix, testTopic, s, Observation{TopicID: idB, Partitions: 1, NowMs: 5000})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := ObserveTopic(testPrefix, testTopic, re, Observation{TopicID: idA, Partitions: 1, NowMs: 6000}); !errors.Is(err, ErrSupersededLineage) {
		t.Fatalf("old id after re-creation: %v", err)
	}
	// Expiry: 0 at once, -1 never, else after the retention.
	for _, tc := range []struct {
		ret, now int64
		want     int
	}{{0, 5000, 1}, {-1, 1 << 60, 0}, {1000, 5999, 0}, {1000, 6000, 1}} {
		if got := len(re.Expired(tc.ret, tc.now)); got != tc.want {
			t.Errorf("Expired(%d, %d) = %d lineages, want %d", tc.ret, tc.now, got, tc.want)
		}
	}
	gone, ok := re.MarkRemoved(idA, 7000)
	if !ok || len(gone.Superseded) != 1 || gone.Superseded[0].Partitions != 0 || re.Superseded[0].Partitions == 0 {
		t.Fatalf("MarkRemoved: %v %+v (original %+v)", ok, gone.Superseded, re.Superseded)
	}
	if len(gone.Expired(0, 8000)) != 0 {
		t.Fatalf("a removed lineage is listed expired again: %+v", gone.Superseded)
	}
	// Deletion: not served; a later ID re-creates it.
	del, write := re.MarkDeleted(8000)
	if !write {
		t.Fatal("MarkDeleted wrote nothing")
	}
	if _, _, ok := del.Serving(); ok {
		t.Fatal("a deleted topic is served")
	}
	if err := del.Validate(); err != nil {
		t.Fatal(err)
	}
	if _, again := del.MarkDeleted(9000); again {
		t.Fatal("deleted twice")
	}
	back, key, _, err := ObserveTopic(testPrefix, testTopic, del, Observation{TopicID: "AQIDBAUGBwgJCgsMDQ4PEA", Partitions: 1, NowMs: 9000})
	if err != nil || key != "AQIDBAUGBwgJCgsMDQ4PEA" || back.DeletedMs != 0 || len(back.Superseded) != 2 {
		t.Fatalf("re-create after delete: %+v %q %v", back, key, err)
	}
}

// Upgrade: the first ID seen adopts a name-only lineage; without an ID and
// without an object nothing changes (brokers before 2.8).
func TestObserveTopicUpgrade(t *testing.T) {
	n, key, write, err := ObserveTopic(testPrefix, testTopic, nil, Observation{Partitions: 1})
	if n != nil || key != "" || write || err != nil {
		t.Fatalf("no id: %+v %q %v %v", n, key, write, err)
	}
	n, key, write, err = ObserveTopic(testPrefix, testTopic, nil, Observation{TopicID: idA, Partitions: 1, NameOnlyExists: true, NowMs: 1})
	if err != nil || !write || key != "" || !n.Current.NameOnlyKeys || n.Current.TopicID != idA {
		t.Fatalf("adopt: %+v %q %v %v", n, key, write, err)
	}
	// The adopted lineage, superseded, keeps naming the name-only
	// directories for its removal; the new ID gets its own.
	r, key, _, err := ObserveTopic(testPrefix, testTopic, n, Observation{TopicID: idB, Partitions: 1, NowMs: 2})
	if err != nil || key != idB || r.Superseded[0].KeyID() != "" {
		t.Fatalf("re-create after adoption: %+v %q %v", r, key, err)
	}
	// A name-only lineage holding offsets the partition never reached is
	// another incarnation: superseded, not adopted.
	f, key, _, err := ObserveTopic(testPrefix, testTopic, nil, Observation{TopicID: idA, Partitions: 2, NameOnlyExists: true, NameOnlyForeign: true, NowMs: 3})
	if err != nil || key != idA || f.Current.NameOnlyKeys || len(f.Superseded) != 1 || f.Superseded[0].KeyID() != "" || f.Superseded[0].Partitions != 2 {
		t.Fatalf("foreign name-only lineage: %+v %q %v", f, key, err)
	}
}

// FuzzDecodeTopic: DecodeTopic never panics; what it accepts is valid and
// encodes stably.
func FuzzDecodeTopic(f *testing.F) {
	key, _ := TopicKey(testPrefix, testTopic)
	s, _, _, _ := ObserveTopic(testPrefix, testTopic, nil, Observation{TopicID: idA, Partitions: 3, Configs: map[string]string{"cleanup.policy": "compact"}, NowMs: 1})
	s, _, _, _ = ObserveTopic(testPrefix, testTopic, s, Observation{TopicID: idB, Partitions: 3, NowMs: 2})
	enc, err := EncodeTopic(s)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc)
	d, _ := s.MarkDeleted(3)
	enc, _ = EncodeTopic(d)
	f.Add(enc)
	f.Add([]byte(`{"version":1,"kind":"topic","topic":"orders.v1","current":null}`))
	f.Add([]byte(fmt.Sprintf(`{"version":1,"kind":"topic","topic":%q,"current":{"topic_id":%q,"partitions":-1}}`, testTopic, idA)))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeTopic(key, data)
		if err != nil {
			return
		}
		if err := s.Validate(); err != nil {
			t.Fatalf("decoded topic object is invalid: %v", err)
		}
		enc, err := EncodeTopic(s)
		if err != nil {
			t.Fatalf("decoded topic object does not encode: %v", err)
		}
		s2, err := DecodeTopic(key, enc)
		if err != nil {
			t.Fatalf("re-encoded topic object does not decode: %v", err)
		}
		if enc2, _ := EncodeTopic(s2); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
		_, _, _ = s.Serving()
		_ = s.Expired(0, 1<<62)
	})
}

// FuzzDecodeRootLineage: DecodeRoot under a lineage's key never panics,
// and what it accepts is that lineage's, valid, and encodes stably.
func FuzzDecodeRootLineage(f *testing.F) {
	key, err := ManifestKeyID(testPrefix, testTopic, idA, testPart)
	if err != nil {
		f.Fatal(err)
	}
	m, err := NewID(testPrefix, testTopic, idA, testPart, 0)
	if err != nil {
		f.Fatal(err)
	}
	c, err := Append(m, DefaultPolicy(), idSeg(f, idA, 0, 9), idSeg(f, idA, 10, 19))
	if err != nil {
		f.Fatal(err)
	}
	enc, err := EncodeRoot(c.Root)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(enc)
	f.Add(bytes.Replace(enc, []byte(idA), []byte(idB), 1))
	f.Add(bytes.Replace(enc, []byte(`"topic_id":"`+idA+`",`), nil, 1))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := DecodeRoot(key, data)
		if err != nil {
			return
		}
		if m.TopicID != idA || m.Validate() != nil {
			t.Fatalf("accepted topic id %q under lineage %s (valid: %v)", m.TopicID, idA, m.Validate())
		}
		enc, err := EncodeRoot(m)
		if err != nil {
			t.Fatalf("decoded manifest does not encode: %v", err)
		}
		m2, err := DecodeRoot(key, enc)
		if err != nil {
			t.Fatalf("re-encoded manifest does not decode: %v", err)
		}
		if enc2, _ := EncodeRoot(m2); !bytes.Equal(enc, enc2) {
			t.Fatal("encoding is not stable")
		}
	})
}
