package groups

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/remotetier/objstore"
)

func TestKeyRoundTrip(t *testing.T) {
	for _, g := range []string{"billing", "", ".", "..", "a/b", "a%2Fb", "ü n i", strings.Repeat("x", 300)} {
		k := Key(g)
		if err := objstore.ValidateKey(k); err != nil {
			t.Errorf("Key(%q) = %q: %v", g, k, err)
		}
		got, err := GroupOfKey(k)
		if err != nil || got != g {
			t.Errorf("GroupOfKey(%q) = %q, %v; want %q", k, got, err, g)
		}
	}
	for _, k := range []string{"groups/zz/x.json", "groups/00000000/x.json", "groups/x.json", "manifests/a", Key("x") + "x"} {
		if g, err := GroupOfKey(k); err == nil {
			t.Errorf("GroupOfKey(%q) = %q, want an error", k, g)
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	key := Key("g")
	good := `{"format":1,"group":"g","generation":1,"state":"Empty","updated_ms":1,"offsets":[{"topic":"t","partition":0,"offset":5,"leader_epoch":-1,"metadata":"","commit_ms":1}]}`
	if _, err := Decode(key, []byte(good)); err != nil {
		t.Fatalf("good object: %v", err)
	}
	for name, tc := range map[string]struct{ data, want string }{
		"syntax":    {`{"format":1,}`, "corrupt at byte 13"},
		"format":    {strings.Replace(good, `"format":1`, `"format":3`, 1), "format 3"},
		"idInV1":    {strings.Replace(good, `"commit_ms":1}`, `"commit_ms":1,"topic_id":"o3Bx6y0QQxyxS2FrDcDiOw"}`, 1), "topic_id"},
		"badID":     {strings.Replace(strings.Replace(good, `"commit_ms":1}`, `"commit_ms":1,"topic_id":"orders"}`, 1), `"format":1`, `"format":2`, 1), `topic_id "orders"`},
		"group":     {strings.Replace(good, `"group":"g"`, `"group":"h"`, 1), `names group "h"`},
		"state":     {strings.Replace(good, `"Empty"`, `"Weird"`, 1), `state "Weird"`},
		"unknown":   {strings.Replace(good, `"format":1`, `"format":1,"x":2`, 1), "unknown field"},
		"offset":    {strings.Replace(good, `"offset":5`, `"offset":-7`, 1), "not a committed offset"},
		"repeated":  {strings.Replace(good, `"offsets":[`, `"offsets":[{"topic":"t","partition":0,"offset":5,"leader_epoch":-1,"metadata":"","commit_ms":1},`, 1), "out of order"},
		"typeError": {strings.Replace(good, `"generation":1`, `"generation":"1"`, 1), "corrupt at byte"},
	} {
		_, err := Decode(key, []byte(tc.data))
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Key != key || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a CorruptError naming %s and %q", name, err, key, tc.want)
		}
	}
}

func commitOne(topic string, part int32, off int64) func(*Object) error {
	return func(o *Object) error {
		o.set(Offset{Topic: topic, Partition: part, Offset: off, LeaderEpoch: -1})
		return nil
	}
}

// TestStoreConditionalWrites: two stores (two coordinators) over one
// bucket never overwrite each other: the one whose cached version is stale
// loses its PUT, re-reads and applies its change on top.
func TestStoreConditionalWrites(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMemory()
	a, c := NewStore(b, StoreOptions{}), NewStore(b, StoreOptions{})
	if _, err := a.Update(ctx, "g", commitOne("t", 0, 10)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Update(ctx, "g", commitOne("t", 1, 20)); err != nil {
		t.Fatal(err)
	}
	// a's cache holds the version before c's write: its PUT loses, it
	// re-reads and keeps c's offset.
	got, err := a.Update(ctx, "g", commitOne("t", 0, 11))
	if err != nil {
		t.Fatal(err)
	}
	if o, ok := got.Lookup("t", 1); !ok || o.Offset != 20 {
		t.Fatalf("a's write lost c's commit: %+v", got.Offsets)
	}
	fresh, err := NewStore(b, StoreOptions{}).Load(ctx, "g")
	if err != nil {
		t.Fatal(err)
	}
	if o0, _ := fresh.Lookup("t", 0); o0.Offset != 11 || len(fresh.Offsets) != 2 {
		t.Fatalf("bucket holds %+v, want t-0 at 11 and t-1 at 20", fresh.Offsets)
	}
	// Two first writers of a new group: IfAbsent lets exactly one create it.
	if _, err := a.Update(ctx, "new", commitOne("t", 0, 1)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewStore(b, StoreOptions{}).Update(ctx, "new", commitOne("t", 1, 2)); err != nil {
		t.Fatal(err)
	}
	n, _ := NewStore(b, StoreOptions{}).Load(ctx, "new")
	if len(n.Offsets) != 2 {
		t.Fatalf("second creator overwrote the first: %+v", n.Offsets)
	}
}

// TestStoreConflictBound: a writer that loses every race gives up with
// ErrConflict after MaxUpdateAttempts PUTs instead of overwriting.
func TestStoreConflictBound(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMemory()
	s := NewStore(b, StoreOptions{})
	other := NewStore(b, StoreOptions{})
	n := 0
	_, err := s.Update(ctx, "g", func(o *Object) error {
		n++
		// Another coordinator writes between our read and our PUT.
		if _, err := other.Update(ctx, "g", commitOne("t", int32(n), 1)); err != nil {
			t.Fatal(err)
		}
		o.set(Offset{Topic: "t", Partition: 0, Offset: 99})
		return nil
	})
	if !errors.Is(err, ErrConflict) || n != MaxUpdateAttempts {
		t.Fatalf("err %v after %d attempts, want ErrConflict after %d", err, n, MaxUpdateAttempts)
	}
	o, _ := NewStore(b, StoreOptions{}).Load(ctx, "g")
	if _, ok := o.Lookup("t", 0); ok {
		t.Fatal("the losing write landed")
	}
}

func TestStoreReadOnly(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(1000, 0)
	mem := objstore.NewMemory()
	ro, err := objstore.OpenReadOnly(ctx, "mem://ro-"+t.Name())
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	m := NewMetrics(nil)
	s := NewStore(ro, StoreOptions{Now: func() time.Time { return now }, ReadOnlyRecheck: time.Minute, Metrics: m})
	if !s.Writable() {
		t.Fatal("not yet refused: writable")
	}
	if _, err := s.Update(ctx, "g", commitOne("t", 0, 1)); !errors.Is(err, ErrUnavailable) || !errors.Is(err, objstore.ErrReadOnly) {
		t.Fatalf("update on a read-only bucket: %v", err)
	}
	if s.Writable() {
		t.Fatal("writable after a refused PUT")
	}
	if _, err := s.Update(ctx, "g", commitOne("t", 0, 1)); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("second update: %v", err)
	}
	if err := s.Probe(ctx); !errors.Is(err, ErrUnavailable) || s.Writable() {
		t.Fatalf("probe of a read-only bucket: %v, writable %v", err, s.Writable())
	}
	if s := NewStore(mem, StoreOptions{ReadOnly: true}); s.Writable() {
		t.Fatal("ReadOnly store writable")
	}
	// A probe of a writable bucket writes nothing and makes it available.
	w := NewStore(mem, StoreOptions{})
	w.refused = now
	if err := w.Probe(ctx); err != nil || !w.Writable() {
		t.Fatalf("probe of a writable bucket: %v, writable %v", err, w.Writable())
	}
	if err := mem.List(ctx, "", func(o objstore.ObjectInfo) error { return fmt.Errorf("the probe wrote %s", o.Key) }); err != nil {
		t.Fatal(err)
	}
	if got := testutilCount(m.puts.WithLabelValues(PutRefused)); got != 1 {
		t.Fatalf("refused PUTs %v, want 1 (the second update sent nothing; probes are not group writes)", got)
	}
}

func TestStoreDeadIsAbsent(t *testing.T) {
	ctx := context.Background()
	s := NewStore(objstore.NewMemory(), StoreOptions{})
	if _, err := s.Update(ctx, "g", func(o *Object) error { o.Generation = 7; o.set(Offset{Topic: "t", Offset: 3}); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "g", func(o *Object) error { o.State, o.Offsets = StateDead, nil; return nil }); err != nil {
		t.Fatal(err)
	}
	if o, err := s.Reload(ctx, "g"); o != nil || err != nil {
		t.Fatalf("dead group loads as %+v, %v", o, err)
	}
	o, err := s.Update(ctx, "g", commitOne("t", 0, 1))
	if err != nil || o.Generation != 7 || len(o.Offsets) != 1 {
		t.Fatalf("re-created group %+v, %v: want generation 7 kept and only the new offset", o, err)
	}
}

// TestStoreDeleteOffsets: the offsets del selects go in one write, the others stay; a
// check that refuses, or a selection of nothing, writes nothing.
func TestStoreDeleteOffsets(t *testing.T) {
	ctx := context.Background()
	b := &putCounting{Bucket: objstore.NewMemory()}
	s := NewStore(b, StoreOptions{})
	for _, c := range []func(*Object) error{commitOne("a", 1, 5), commitOne("a", 0, 4), commitOne("b", 0, 7)} {
		if _, err := s.Update(ctx, "g", c); err != nil {
			t.Fatal(err)
		}
	}
	topic := func(name string) func(Offset) bool { return func(o Offset) bool { return o.Topic == name } }
	refuse := errors.New("refused")
	for _, tc := range []struct {
		name    string
		del     func(Offset) bool
		check   func(*Object) error
		want    []string // removed, topic-partition
		wantErr error
		puts    int64
		left    int
	}{
		{"refused by check", topic("a"), func(*Object) error { return refuse }, nil, refuse, 0, 3},
		{"nothing selected", topic("c"), nil, nil, nil, 0, 3},
		{"one topic", topic("a"), func(o *Object) error { return nil }, []string{"a-0", "a-1"}, nil, 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			before := b.puts.Load()
			removed, err := s.DeleteOffsets(ctx, "g", tc.del, tc.check)
			var got []string
			for _, o := range removed {
				got = append(got, fmt.Sprintf("%s-%d", o.Topic, o.Partition))
			}
			if !errors.Is(err, tc.wantErr) || !slices.Equal(got, tc.want) || b.puts.Load()-before != tc.puts {
				t.Fatalf("removed %v, err %v, %d PUTs; want %v, %v, %d", got, err, b.puts.Load()-before, tc.want, tc.wantErr, tc.puts)
			}
			o, err := NewStore(b.Bucket, StoreOptions{}).Load(ctx, "g")
			if err != nil || o == nil || len(o.Offsets) != tc.left {
				t.Fatalf("left %+v, %v; want %d offsets", o, err, tc.left)
			}
		})
	}
	if removed, err := s.DeleteOffsets(ctx, "none", topic("a"), nil); err != nil || removed != nil {
		t.Fatalf("a group with no object: %v, %v", removed, err)
	}
}
