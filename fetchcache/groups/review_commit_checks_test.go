package groups

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/remotetier/objstore"
)

// fakeParts is fakeIDs whose topics have the partitions parts gives them
// (TopicPartitions).
type fakeParts struct {
	fakeIDs
	parts map[string]int32 // partition count
	err   error
}

func (f *fakeParts) HasPartition(_ context.Context, topic string, partition int32) (bool, error) {
	if f.err != nil {
		return false, f.err
	}
	return partition < f.parts[topic], nil
}

// TestReviewCommitUnknownPartition: an OffsetCommit on a partition its
// topic does not have is refused UNKNOWN_TOPIC_OR_PARTITION for that
// partition, and nothing is stored for it, as Kafka answers; the request's
// other partitions are committed. A partition that cannot be resolved
// fails the commit retriably, writing nothing.
func TestReviewCommitUnknownPartition(t *testing.T) {
	ctx := context.Background()
	ids := &fakeParts{fakeIDs: fakeIDs{ids: map[string]string{"t": idOld, "u": ""}}, parts: map[string]int32{"t": 2, "u": 1}}
	for _, tc := range []struct {
		name  string
		parts map[string][]int32
		err   error
		want  map[string][]int16 // per topic, per partition
	}{
		{"beyond the count", map[string][]int32{"t": {0, 1, 2, 7}}, nil, map[string][]int16{"t": {0, 0, kerr.UnknownTopicOrPartition.Code, kerr.UnknownTopicOrPartition.Code}}},
		{"topic without ids", map[string][]int32{"u": {0, 1}}, nil, map[string][]int16{"u": {0, kerr.UnknownTopicOrPartition.Code}}},
		{"every partition unknown", map[string][]int32{"t": {5}}, nil, map[string][]int16{"t": {kerr.UnknownTopicOrPartition.Code}}},
		{"partitions unresolved", map[string][]int32{"t": {0}}, errors.New("bucket down"), map[string][]int16{"t": {kerr.CoordinatorNotAvailable.Code}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, objstore.NewMemory(), nil)
			ids.err = tc.err
			q := kmsg.NewPtrOffsetCommitRequest()
			q.Version, q.Group, q.Generation = 9, "g", -1
			for _, tp := range []string{"t", "u"} {
				if ps, ok := tc.parts[tp]; ok {
					rt := kmsg.OffsetCommitRequestTopic{Topic: tp}
					for _, p := range ps {
						rt.Partitions = append(rt.Partitions, kmsg.OffsetCommitRequestTopicPartition{Partition: p, Offset: 42, LeaderEpoch: -1})
					}
					q.Topics = append(q.Topics, rt)
				}
			}
			r := h.c.Commit(ctx, q, ids)
			o, err := h.store.Reload(ctx, "g")
			if err != nil {
				t.Fatal(err)
			}
			if o == nil {
				o = &Object{} // nothing written
			}
			stored := 0
			for _, rt := range r.Topics {
				for j, rp := range rt.Partitions {
					want := tc.want[rt.Topic][j]
					wantCode(t, fmt.Sprintf("commit on %s-%d", rt.Topic, rp.Partition), rp.ErrorCode, want)
					_, ok := o.Lookup(rt.Topic, rp.Partition)
					if ok != (want == 0) {
						t.Fatalf("%s-%d (code %s) stored %v", rt.Topic, rp.Partition, codeName(want), ok)
					}
					if ok {
						stored++
					}
				}
			}
			if len(o.Offsets) != stored {
				t.Fatalf("offsets stored: %+v", o.Offsets)
			}
		})
	}
}

// stallingIDs holds the first topic-ID resolution until released (a slow
// read of the topic objects), then serves every topic without IDs.
type stallingIDs struct {
	once     sync.Once
	reached  chan struct{}
	released chan struct{}
}

func (s *stallingIDs) CurrentTopicID(context.Context, string) (string, bool, error) {
	s.once.Do(func() {
		close(s.reached)
		<-s.released
	})
	return "", true, nil
}

// commitStalled sends member's commit of offset 7 of t-0 (in generation
// gen) from its own goroutine, with topic IDs that stall: it has passed
// the member and generation check when ids.reached is closed, and goes on
// once ids.released is.
func (h *harness) commitStalled(group, member string, gen int32) (*stallingIDs, <-chan int16) {
	ids := &stallingIDs{reached: make(chan struct{}), released: make(chan struct{})}
	done := make(chan int16, 1)
	go func() {
		q := kmsg.NewPtrOffsetCommitRequest()
		q.Version, q.Group, q.MemberID, q.Generation = 9, group, member, gen
		q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 7, LeaderEpoch: -1}}}}
		done <- h.c.Commit(context.Background(), q, ids).Topics[0].Partitions[0].ErrorCode
	}()
	recv(h.t, ids.reached)
	return ids, done
}

// TestReviewStalledCommitFencedAtWrite: a member's commit that passes the
// generation check and then stalls (here resolving topic IDs) while the
// group rebalances is refused when its write comes, as it would have been
// had it arrived then: ILLEGAL_GENERATION when the member rejoined into
// the next generation, UNKNOWN_MEMBER_ID when it was removed. It is not
// written after the next generation's commit, whose offset (20) stays.
func TestReviewStalledCommitFencedAtWrite(t *testing.T) {
	ctx := context.Background()
	for _, rejoined := range []bool{true, false} {
		t.Run(fmt.Sprintf("rejoined=%v", rejoined), func(t *testing.T) {
			h := newHarness(t, objstore.NewMemory(), nil)
			const g = "g"
			a, gen := h.soleMemberCommitted5(g)

			ids, done := h.commitStalled(g, a, gen) // checked, not written yet

			// A second member joins: the next generation forms, with a or
			// without it, and commits 20.
			b, jb := h.newMember(g)
			committer, want := b, kerr.UnknownMemberID.Code
			var r *kmsg.JoinGroupResponse
			if rejoined {
				ja := h.joinAsync(joinReq(g, a, nil))
				r = recv(t, ja)
				recv(t, jb)
				committer, want = a, kerr.IllegalGeneration.Code
			} else {
				h.clk.Add(session + time.Millisecond)
				h.c.Tick() // a, which does not rejoin, is removed
				r = recv(t, jb)
			}
			if r.Generation == gen {
				t.Fatalf("rejoined %v: no new generation (%d)", rejoined, r.Generation)
			}
			h.sync(g, r.LeaderID, r.Generation, map[string]string{a: "A", b: "B"})
			wantCode(t, "the next generation's commit", h.commit(g, committer, r.Generation, nil, 20), 0)

			close(ids.released)
			wantCode(t, fmt.Sprintf("rejoined %v: the stalled commit of generation %d", rejoined, gen), recv(t, done), want)
			o, err := NewStore(h.b, StoreOptions{}).Load(ctx, g)
			if err != nil {
				t.Fatal(err)
			}
			if off, _ := o.Lookup("t", 0); off.Offset != 20 {
				t.Fatalf("rejoined %v: committed offset %d, want the next generation's 20", rejoined, off.Offset)
			}
		})
	}
}

// TestReviewStalledCommitAfterMoveAndBack: a commit without a generation
// (an assign() consumer's) that stalls while the group moves to another
// replica, whose members commit, and comes back here is not written over
// the other replica's offset: NOT_COORDINATOR, as Kafka answers a commit
// whose append finds the coordinator moved, and the client retries it
// against the group as it is now.
func TestReviewStalledCommitAfterMoveAndBack(t *testing.T) {
	ctx := context.Background()
	var self atomic.Bool
	self.Store(true)
	h := newHarness(t, objstore.NewMemory(), func(o *Options) { o.Ring = atomicRing{&self} })
	const g = "g"
	wantCode(t, "commit 5", h.commit(g, "", -1, nil, 5), 0)

	ids, done := h.commitStalled(g, "", -1) // checked, not written yet
	self.Store(false)
	h.c.Release(g)
	if _, err := NewStore(h.b, StoreOptions{}).Update(ctx, g, commitOne("t", 0, 20)); err != nil {
		t.Fatal(err)
	}
	self.Store(true)
	close(ids.released)
	wantCode(t, "the commit stalled across the move", recv(t, done), kerr.NotCoordinator.Code)
	o, err := NewStore(h.b, StoreOptions{}).Load(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if off, _ := o.Lookup("t", 0); off.Offset != 20 {
		t.Fatalf("committed offset %d, want the other replica's 20", off.Offset)
	}
}

// TestReviewStalledCommitGroupForgotten: a commit without a generation on
// a group that has nothing yet (no object, no members), whose in-memory
// group Tick forgets while the commit waits, is still written: the group
// it was checked against did not change, only its memory went.
func TestReviewStalledCommitGroupForgotten(t *testing.T) {
	ctx := context.Background()
	h := newHarness(t, objstore.NewMemory(), nil)
	const g = "g"
	ids, done := h.commitStalled(g, "", -1) // checked, not written yet
	h.c.Tick()
	h.c.mu.Lock()
	_, held := h.c.groups[g]
	h.c.mu.Unlock()
	if held {
		t.Fatal("Tick kept a group with nothing")
	}
	close(ids.released)
	wantCode(t, "the commit", recv(t, done), 0)
	o, err := NewStore(h.b, StoreOptions{}).Load(ctx, g)
	if err != nil {
		t.Fatal(err)
	}
	if off, _ := o.Lookup("t", 0); off.Offset != 7 {
		t.Fatalf("committed offset %d, want 7", off.Offset)
	}
}
