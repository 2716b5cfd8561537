// Package groupkit drives consumer groups against a Kafka listener in
// tests: a franz-go group whose members come and go (Churn), and a bucket
// wrapper that checks every group object written (Watch: committed
// offsets never go backwards).
package groupkit

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TP is a topic partition.
type TP struct {
	Topic     string
	Partition int32
}

// Watch wraps a bucket and checks every group object PUT through it: each
// committed offset is at least the one the previous write of that group
// held (a commit never moves backwards); it counts the group objects'
// writes and reads.
type Watch struct {
	objstore.Bucket
	mu     sync.Mutex
	last   map[string]map[TP]int64
	errs   []string
	writes int
	reads  int
}

// Get implements objstore.Bucket, counting reads of group objects.
func (w *Watch) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	if strings.HasPrefix(key, groups.KeyPrefix) {
		w.mu.Lock()
		w.reads++
		w.mu.Unlock()
	}
	return w.Bucket.Get(ctx, key)
}

// Counts is the group objects' PUTs and GETs so far.
func (w *Watch) Counts() (puts, gets int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.writes, w.reads
}

// NewWatch wraps b.
func NewWatch(b objstore.Bucket) *Watch {
	return &Watch{Bucket: b, last: map[string]map[TP]int64{}}
}

// Put implements objstore.Bucket.
func (w *Watch) Put(ctx context.Context, key string, r io.Reader, size int64, cond objstore.Condition) (objstore.Attrs, error) {
	if !strings.HasPrefix(key, groups.KeyPrefix) {
		return w.Bucket.Put(ctx, key, r, size, cond)
	}
	data, err := io.ReadAll(r)
	if err != nil {
		return objstore.Attrs{}, err
	}
	attrs, err := w.Bucket.Put(ctx, key, bytes.NewReader(data), size, cond)
	if err != nil {
		return attrs, err
	}
	o, derr := groups.Decode(key, data)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.writes++
	if derr != nil {
		w.errs = append(w.errs, derr.Error())
		return attrs, err
	}
	prev := w.last[o.Group]
	next := map[TP]int64{}
	for _, off := range o.Offsets {
		tp := TP{off.Topic, off.Partition}
		next[tp] = off.Offset
		if p, ok := prev[tp]; ok && off.Offset < p {
			w.errs = append(w.errs, fmt.Sprintf("group %s: %s-%d committed %d after %d", o.Group, tp.Topic, tp.Partition, off.Offset, p))
		}
	}
	if o.State != groups.StateDead {
		w.last[o.Group] = next
	}
	return attrs, err
}

// Check fails t for every backwards commit seen.
func (w *Watch) Check(t testing.TB) {
	t.Helper()
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, e := range w.errs {
		t.Error(e)
	}
}

// Committed is the last committed offsets written for group.
func (w *Watch) Committed(group string) map[TP]int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[TP]int64{}
	for k, v := range w.last[group] {
		out[k] = v
	}
	return out
}

// Delivered collects the records the members of a group consumed.
type Delivered struct {
	mu   sync.Mutex
	seen map[TP]map[int64]int // offset -> times delivered
}

// Add records one delivery.
func (d *Delivered) Add(tp TP, off int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.seen == nil {
		d.seen = map[TP]map[int64]int{}
	}
	if d.seen[tp] == nil {
		d.seen[tp] = map[int64]int{}
	}
	d.seen[tp][off]++
}

// Missing lists the offsets below end[tp] never delivered.
func (d *Delivered) Missing(end map[TP]int64) []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for tp, e := range end {
		for off := int64(0); off < e; off++ {
			if d.seen[tp][off] == 0 {
				out = append(out, fmt.Sprintf("%s-%d@%d", tp.Topic, tp.Partition, off))
				if len(out) > 20 {
					return out
				}
			}
		}
	}
	return out
}

// Count is the number of distinct offsets delivered.
func (d *Delivered) Count() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, m := range d.seen {
		n += len(m)
	}
	return n
}

// Member is one consumer of a group, polling in its own goroutine.
type Member struct {
	Client *kgo.Client
	cancel context.CancelFunc
	done   chan struct{}
}

// Fast are group timings for tests: short session, heartbeat and
// rebalance timeouts (the coordinator's minimum session must allow them).
func Fast() []kgo.Opt {
	return []kgo.Opt{
		kgo.SessionTimeout(6 * time.Second), kgo.HeartbeatInterval(150 * time.Millisecond),
		kgo.RebalanceTimeout(5 * time.Second), kgo.AutoCommitInterval(100 * time.Millisecond),
		kgo.FetchMaxWait(200 * time.Millisecond), kgo.RetryBackoffFn(func(int) time.Duration { return 50 * time.Millisecond }),
	}
}

// Start starts a member of group consuming topics from addr into d.
func Start(t testing.TB, addr, group string, d *Delivered, opts ...kgo.Opt) *Member {
	t.Helper()
	all := append([]kgo.Opt{kgo.SeedBrokers(addr), kgo.ConsumerGroup(group),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart())}, opts...)
	cl, err := kgo.NewClient(all...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	m := &Member{Client: cl, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(m.done)
		for ctx.Err() == nil {
			fs := cl.PollFetches(ctx)
			fs.EachRecord(func(r *kgo.Record) { d.Add(TP{r.Topic, r.Partition}, r.Offset) })
		}
	}()
	t.Cleanup(m.Stop)
	return m
}

// Stop commits what the member consumed, leaves the group and closes the
// client (idempotent).
func (m *Member) Stop() {
	select {
	case <-m.done:
		return
	default:
	}
	m.cancel()
	<-m.done
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = m.Client.CommitUncommittedOffsets(ctx)
	m.Client.Close()
}

// Eventually polls cond every 20ms until it holds or d passes.
func Eventually(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// StaticRestart runs the static-membership check against the listener at
// addr: two static members (group.instance.id "a" and "b") of group read
// every record of topic (end: each partition's end), then "b" restarts
// within its session timeout; both must stay in the same generation — no
// rebalance — and b must be back in the group.
func StaticRestart(t testing.TB, addr, group, topic string, end map[TP]int64) {
	t.Helper()
	staticRestart(t, addr, group, topic, end, false)
}

// StaticRestartStaggered is StaticRestart with "b" started once "a" holds
// a generation of its own: the group goes through several generations, so
// b's last JoinGroup metadata (franz-go's names the generation it held and
// the partitions it owned) differs from the restarted client's.
func StaticRestartStaggered(t testing.TB, addr, group, topic string, end map[TP]int64) {
	t.Helper()
	staticRestart(t, addr, group, topic, end, true)
}

func staticRestart(t testing.TB, addr, group, topic string, end map[TP]int64, stagger bool) {
	t.Helper()
	var d Delivered
	opts := append(Fast(), kgo.ConsumeTopics(topic))
	a := Start(t, addr, group, &d, append(opts, kgo.InstanceID("a"))...)
	if stagger {
		Eventually(t, 10*time.Second, "a alone in a generation", func() bool {
			_, g := a.Client.GroupMetadata()
			return g > 0
		})
	}
	b := Start(t, addr, group, &d, append(opts, kgo.InstanceID("b"))...)
	Eventually(t, 30*time.Second, "every record delivered", func() bool { return len(d.Missing(end)) == 0 })
	// A cooperative-sticky group that moves partitions forms a second
	// generation right after the first: wait until the generation holds.
	Eventually(t, 10*time.Second, "both in one generation, settled", func() bool {
		_, ga := a.Client.GroupMetadata()
		_, gb := b.Client.GroupMetadata()
		if ga != gb || ga <= 0 {
			return false
		}
		time.Sleep(300 * time.Millisecond)
		_, again := a.Client.GroupMetadata()
		return again == ga
	})
	_, gen := a.Client.GroupMetadata()
	b.Stop() // a static member does not leave on close (KIP-345)
	b = Start(t, addr, group, &d, append(opts, kgo.InstanceID("b"))...)
	Eventually(t, 10*time.Second, "the restarted member back in the group", func() bool {
		_, g := b.Client.GroupMetadata()
		return g > 0
	})
	time.Sleep(500 * time.Millisecond) // several heartbeats of a
	if _, g := a.Client.GroupMetadata(); g != gen {
		t.Fatalf("generation %d after the static restart, want %d (no rebalance)", g, gen)
	}
	if _, g := b.Client.GroupMetadata(); g != gen {
		t.Fatalf("restarted member in generation %d, want %d", g, gen)
	}
	a.Stop()
	b.Stop()
}
