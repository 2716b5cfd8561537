package groups

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/remotetier/objstore"
)

const (
	idOld = "o3Bx6y0QQxyxS2FrDcDiOw"
	idNew = "Vtqh-_aLSpGn3jK4dGnv8A"
)

// fakeIDs serves each topic under the ID it maps to ("": no IDs); a topic
// not in the map is not served.
type fakeIDs struct {
	ids   map[string]string
	err   error
	calls int
}

func (f *fakeIDs) CurrentTopicID(_ context.Context, topic string) (string, bool, error) {
	f.calls++
	if f.err != nil {
		return "", false, f.err
	}
	id, ok := f.ids[topic]
	return id, ok, nil
}

// TestObjectTopicIDs: an offset's topic ID survives an encode and decode
// (format 2); an object none of whose offsets names one is still written
// as format 1, and one written before topic IDs (format 1) is read with
// no IDs: its offsets are taken as the current incarnation's.
func TestObjectTopicIDs(t *testing.T) {
	key := Key("g")
	o := &Object{Group: "g", State: StateEmpty, Offsets: []Offset{
		{Topic: "t", Partition: 1, Offset: 7, LeaderEpoch: -1, TopicID: idOld},
		{Topic: "plain", Partition: 0, Offset: 3, LeaderEpoch: -1},
	}}
	data, err := o.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(data), `"format": 2`) || !strings.Contains(string(data), `"topic_id": "`+idOld+`"`) || strings.Count(string(data), "topic_id") != 1 {
		t.Fatalf("encoded:\n%s", data)
	}
	got, err := Decode(key, data)
	if err != nil {
		t.Fatal(err)
	}
	if off, ok := got.Lookup("t", 1); !ok || off.TopicID != idOld || off.Offset != 7 {
		t.Fatalf("t-1 decoded as %+v %v", off, ok)
	}
	if off, _ := got.Lookup("plain", 0); off.TopicID != "" {
		t.Fatalf("plain-0 decoded with topic id %q", off.TopicID)
	}

	o.Offsets[1].TopicID, o.Offsets[0].TopicID = "", ""
	if data, err = o.Encode(); err != nil || !strings.Contains(string(data), `"format": 1`) || strings.Contains(string(data), "topic_id") {
		t.Fatalf("object without ids encoded as %s (%v)", data, err)
	}

	old := `{"format":1,"group":"g","generation":3,"state":"Empty","updated_ms":1,"offsets":[{"topic":"t","partition":0,"offset":5,"leader_epoch":-1,"metadata":"","commit_ms":1}]}`
	got, err = Decode(key, []byte(old))
	if err != nil {
		t.Fatalf("format 1 object: %v", err)
	}
	lin := NewLineages(&fakeIDs{ids: map[string]string{"t": idNew}})
	if removed, err := lin.DropStale(context.Background(), got); err != nil || len(removed) != 0 || len(got.Offsets) != 1 {
		t.Fatalf("an offset without id was dropped: %v %v", removed, err)
	}
}

// TestLineagesStale: an offset naming a topic ID is stale once its topic
// is served under another ID or not served at all; one naming none never
// is; each topic is resolved once; an error removes nothing.
func TestLineagesStale(t *testing.T) {
	ctx := context.Background()
	ids := &fakeIDs{ids: map[string]string{"re": idNew, "same": idOld, "noids": ""}}
	o := &Object{Offsets: []Offset{
		{Topic: "gone", Partition: 0, TopicID: idOld},
		{Topic: "noids", Partition: 0},
		{Topic: "re", Partition: 0, TopicID: idOld},
		{Topic: "re", Partition: 1, TopicID: idNew},
		{Topic: "re", Partition: 2, TopicID: idOld},
		{Topic: "same", Partition: 0, TopicID: idOld},
	}}
	lin := NewLineages(ids)
	removed, err := lin.DropStale(ctx, o)
	if err != nil {
		t.Fatal(err)
	}
	var kept, gone []string
	for _, off := range o.Offsets {
		kept = append(kept, off.Topic)
	}
	for _, off := range removed {
		gone = append(gone, off.Topic)
	}
	if strings.Join(kept, ",") != "noids,re,same" || strings.Join(gone, ",") != "gone,re,re" {
		t.Fatalf("kept %v, removed %v", kept, gone)
	}
	if ids.calls != 3 {
		t.Fatalf("%d resolutions, want 3 (one per topic naming an id)", ids.calls)
	}
	bad := &Object{Offsets: []Offset{{Topic: "x", TopicID: idOld}}}
	if _, err := NewLineages(&fakeIDs{err: errors.New("bucket down")}).DropStale(ctx, bad); err == nil || len(bad.Offsets) != 1 {
		t.Fatalf("resolution error: %v, offsets %v", err, bad.Offsets)
	}
	var none *Lineages
	if removed, err := none.DropStale(ctx, bad); err != nil || removed != nil {
		t.Fatalf("nil lineages: %v %v", removed, err)
	}
}

// TestCommitRecordsTopicID: CommitIDs records the topic ID the topic is
// served under, and the next commit after the topic was re-created removes
// the old incarnation's offsets of every topic from the object, keeping
// those of topics untouched; a resolution error fails the commit
// retriably, writing nothing.
func TestCommitRecordsTopicID(t *testing.T) {
	h := newHarness(t, objstore.NewMemory(), nil)
	ctx := context.Background()
	ids := &fakeIDs{ids: map[string]string{"t": idOld, "u": idOld, "plain": ""}}
	commit := func(ids TopicIDs, topics ...string) int16 {
		q := kmsg.NewPtrOffsetCommitRequest()
		q.Version, q.Group, q.Generation = 9, "g", -1
		for _, tp := range topics {
			q.Topics = append(q.Topics, kmsg.OffsetCommitRequestTopic{Topic: tp, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 42, LeaderEpoch: -1}}})
		}
		return h.c.Commit(ctx, q, ids).Topics[0].Partitions[0].ErrorCode
	}
	wantCode(t, "first commit", commit(ids, "t", "u", "plain"), 0)
	o, err := h.store.Reload(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	for tp, want := range map[string]string{"t": idOld, "u": idOld, "plain": ""} {
		if off, ok := o.Lookup(tp, 0); !ok || off.TopicID != want {
			t.Fatalf("%s-0 committed as %+v, want topic id %q", tp, off, want)
		}
	}
	// u is deleted and re-created: a commit on t alone removes u's old offset.
	ids.ids["u"] = idNew
	wantCode(t, "commit after u was re-created", commit(ids, "t"), 0)
	if o, err = h.store.Reload(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Lookup("u", 0); ok || len(o.Offsets) != 2 {
		t.Fatalf("offsets after the re-creation of u: %+v", o.Offsets)
	}
	if off, _ := o.Lookup("t", 0); off.TopicID != idOld {
		t.Fatalf("t-0 after: %+v", off)
	}
	wantCode(t, "commit when ids cannot be resolved", commit(&fakeIDs{err: errors.New("bucket down")}, "t"), kerr.CoordinatorNotAvailable.Code)
	// A topic not served (deleted) is refused, as Kafka refuses a commit on a
	// topic it does not know: written without an ID, the offset would be
	// taken for a later incarnation's. The other topics are committed.
	delete(ids.ids, "u")
	q := kmsg.NewPtrOffsetCommitRequest()
	q.Version, q.Group, q.Generation = 9, "g", -1
	for _, tp := range []string{"u", "t"} {
		q.Topics = append(q.Topics, kmsg.OffsetCommitRequestTopic{Topic: tp, Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 50, LeaderEpoch: -1}}})
	}
	r := h.c.Commit(ctx, q, ids)
	wantCode(t, "commit on a deleted topic", r.Topics[0].Partitions[0].ErrorCode, kerr.UnknownTopicOrPartition.Code)
	wantCode(t, "commit on a served topic beside it", r.Topics[1].Partitions[0].ErrorCode, 0)
	if o, err = h.store.Reload(ctx, "g"); err != nil {
		t.Fatal(err)
	}
	if _, ok := o.Lookup("u", 0); ok {
		t.Fatalf("offset of a deleted topic committed: %+v", o.Offsets)
	}
	if off, _ := o.Lookup("t", 0); off.Offset != 50 {
		t.Fatalf("t-0 after: %+v", off)
	}
	wantCode(t, "commit on a deleted topic alone", commit(ids, "u"), kerr.UnknownTopicOrPartition.Code)
}
