package groups

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/tiered/tiered/remotetier/objstore"
)

// switchRing names this replica the coordinator while self is true.
type switchRing struct{ self *bool }

func (r switchRing) Coordinator(string) (Node, bool, error) {
	return Node{ID: 7, Host: "10.0.0.7", Port: 9092}, *r.self, nil
}

// TestReleaseAfterTakeover: a group moves away (the fleet calls Release), another
// coordinator commits over the same bucket, and the group comes back: this coordinator
// serves the other's commit, not its old cache, and its old members are gone.
func TestReleaseAfterTakeover(t *testing.T) {
	self := true
	h := newHarness(t, nil, func(o *Options) { o.Ring = switchRing{&self} })
	other := newHarness(t, h.b, nil) // the replica that takes the group over
	const g = "billing"
	a, ja := h.newMember(g)
	ra := recv(t, ja)
	wantCode(t, "join", ra.ErrorCode, 0)
	wantCode(t, "sync", h.sync(g, a, ra.Generation, map[string]string{a: "A"}).ErrorCode, 0)
	wantCode(t, "commit here", h.commit(g, a, ra.Generation, nil, 5), 0)

	self = false
	h.c.Release(g)
	// The new coordinator: its member commits 9.
	b, jb := other.newMember(g)
	rb := recv(t, jb)
	wantCode(t, "join there", rb.ErrorCode, 0)
	if rb.Generation <= ra.Generation {
		t.Fatalf("the new coordinator's generation %d is not above %d", rb.Generation, ra.Generation)
	}
	wantCode(t, "sync there", other.sync(g, b, rb.Generation, map[string]string{b: "B"}).ErrorCode, 0)
	wantCode(t, "commit there", other.commit(g, b, rb.Generation, nil, 9), 0)

	// Back here: the old member is unknown and the committed offset is the other's.
	self = true
	wantCode(t, "old member's heartbeat", h.heartbeat(g, a, ra.Generation, nil), kerr.UnknownMemberID.Code)
	o, code := h.c.Committed(context.Background(), g)
	wantCode(t, "offset fetch", code, 0)
	if o == nil || len(o.Offsets) != 1 || o.Offsets[0].Offset != 9 {
		t.Fatalf("committed after the group came back: %+v, want the other coordinator's 9", o)
	}
}

// TestListSkipsFleetLeases: the fleet's leases under groups/.fleet/ are neither listed as
// groups nor logged as foreign keys.
func TestListSkipsFleetLeases(t *testing.T) {
	ctx := context.Background()
	b := objstore.NewMemory()
	var logs bytes.Buffer
	s := NewStore(b, StoreOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if _, err := b.Put(ctx, FleetPrefix+"lease-127.0.0.1:9092.json", strings.NewReader("{}"), 2, objstore.Condition{}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(ctx, "billing", func(*Object) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var got []string
	if err := s.List(ctx, func(l Listed) error { got = append(got, l.Group); return nil }); err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != "billing" || strings.Contains(logs.String(), "foreign key") {
		t.Fatalf("listed %v, logs %q", got, logs.String())
	}
}
