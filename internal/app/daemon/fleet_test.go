package daemon

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache/fleet"
	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/testkit/testnet"
	"github.com/tiered/tiered/remotetier/objstore"
)

// startFleetFetch runs `tiered fetch` on a memory bucket with fetch.peers; stop ends Run
// (SIGTERM) and returns its error, once.
func startFleetFetch(t *testing.T, bucket, httpAddr, kafkaAddr string, peers []string) (f *Fetch, stop func() error) {
	t.Helper()
	f = newFleetFetch(t, bucket, httpAddr, kafkaAddr, peers)
	return f, runFleetFetch(t, f)
}

// newFleetFetch is a `tiered fetch` on a memory bucket with fetch.peers, built (NewFetch)
// but not run.
func newFleetFetch(t *testing.T, bucket, httpAddr, kafkaAddr string, peers []string) *Fetch {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Process: config.ProcessFetch, Flags: map[string]string{
		"bucket": bucket, "http": httpAddr, "kafka": kafkaAddr, "advertised-addr": kafkaAddr,
		"fetch.peers": "[" + strings.Join(peers, ", ") + "]", "fetch.peer_lease": "600ms", "shutdown_timeout": "10s"}})
	if err != nil {
		t.Fatal(err)
	}
	f, err := NewFetch(context.Background(), FetchOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// runFleetFetch runs f; stop ends Run (SIGTERM) and returns its error, once.
func runFleetFetch(t *testing.T, f *Fetch) (stop func() error) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	var once sync.Once
	var runErr error
	stop = func() error {
		once.Do(func() {
			cancel()
			runErr = <-done
		})
		return runErr
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// TestFetchFleetLifecycle: two fetch daemons with fetch.peers write their leases, see each
// other, advertise node ids that are hashes of their addresses, agree on every group's
// coordinator; SIGTERM (the end of Run's context) deletes the lease and the other takes
// every group at its next poll.
func TestFetchFleetLifecycle(t *testing.T) {
	addrs := testnet.LoopbackAddrs(t, 4)
	peers := []string{addrs[1], addrs[3]}
	bucket := "mem://fleet-lifecycle-" + strings.ReplaceAll(t.Name(), "/", "-")
	a, stopA := startFleetFetch(t, bucket, addrs[0], peers[0], peers)
	b, _ := startFleetFetch(t, bucket, addrs[2], peers[1], peers)
	wait := func(f *Fetch, n int) {
		t.Helper()
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			if live, _ := f.fleet.Live(); len(live) == n {
				return
			}
			if time.Now().After(deadline) {
				live, _ := f.fleet.Live()
				t.Fatalf("%s sees %v, want %d replicas", f.fleet.Self().Addr, live, n)
			}
		}
	}
	wait(a, 2)
	wait(b, 2)
	if a.fleet.Self().NodeID != fleet.NodeID(peers[0]) || a.fleet.HTTPURL(peers[1]) != "http://"+addrs[2] {
		t.Fatalf("node id %d, peer HTTP %q", a.fleet.Self().NodeID, a.fleet.HTTPURL(peers[1]))
	}
	// A replica coordinates the groups it wins a peer_lease after its lease became visible
	// (no two coordinators while its peers have not read it yet).
	for _, g := range []string{"a", "billing", "orders-app"} {
		for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
			ma, oka := a.fleet.Owner(g)
			mb, okb := b.fleet.Owner(g)
			if oka && okb && ma.Addr == mb.Addr {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("group %s: %s (%v) on one replica, %s (%v) on the other", g, ma.Addr, oka, mb.Addr, okb)
			}
		}
	}
	if err := stopA(); err != nil {
		t.Fatalf("fetch A stopped with %v", err)
	}
	wait(b, 1)
	mem := objstore.OpenMemory(strings.TrimPrefix(bucket, "mem://"))
	if _, err := mem.Attributes(context.Background(), fleet.LeaseKey(peers[0])); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("A's lease after SIGTERM: %v, want it deleted", err)
	}
	if _, err := mem.Attributes(context.Background(), fleet.LeaseKey(peers[1])); err != nil {
		t.Fatalf("B's lease: %v", err)
	}
}

// TestFetchFleetLeaseWrittenWhenRunStarts: the first lease is written when Run starts, right
// before the loop that renews it, not by NewFetch. The CLI pretouches the process's memory
// (seconds) between the two: a lease written by NewFetch went unrenewed meanwhile, so with a
// short fetch.peer_lease the peers counted the replica, declared it dead and took its groups
// before it served anything, and it stopped counting itself, then took them back at its
// first renewal (TestGroupFleetTakeover saw the coordinator move after both replicas had
// agreed on it).
func TestFetchFleetLeaseWrittenWhenRunStarts(t *testing.T) {
	addrs := testnet.LoopbackAddrs(t, 4)
	peers := []string{addrs[1], addrs[3]}
	bucket := "mem://fleet-run-" + strings.ReplaceAll(t.Name(), "/", "-")
	b, _ := startFleetFetch(t, bucket, addrs[2], peers[1], peers)
	a := newFleetFetch(t, bucket, addrs[0], peers[0], peers)
	running := false
	t.Cleanup(func() {
		if !running {
			_ = a.Close()
		}
	})
	// B counts itself once its Run has written its own lease.
	for end := time.Now().Add(10 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if live, _ := b.fleet.Live(); len(live) > 0 {
			break
		}
		if time.Now().After(end) {
			t.Fatal("B never counted itself live")
		}
	}
	// The pause between NewFetch and Run (the pretouch), longer than the 600ms lease: the
	// peer never counts a replica that is not running.
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		live, _ := b.fleet.Live()
		for _, m := range live {
			if m.Addr == peers[0] {
				t.Fatalf("before A runs, B sees %v: A's lease was written before Run renews it", live)
			}
		}
	}
	mem := objstore.OpenMemory(strings.TrimPrefix(bucket, "mem://"))
	if _, err := mem.Attributes(context.Background(), fleet.LeaseKey(peers[0])); !errors.Is(err, objstore.ErrNotFound) {
		t.Fatalf("A's lease before Run: %v, want none", err)
	}
	running = true
	runFleetFetch(t, a)
	// From its first answer on, A counts itself and B, and goes on doing so: its lease is
	// renewed from the moment it is written.
	deadline := time.Now().Add(5 * time.Second)
	for {
		la, _ := a.fleet.Live()
		lb, _ := b.fleet.Live()
		if len(la) == 2 && len(lb) == 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("A sees %v, B sees %v, want both replicas", la, lb)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for end := time.Now().Add(1500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		la, _ := a.fleet.Live()
		lb, _ := b.fleet.Live()
		if len(la) != 2 || len(lb) != 2 {
			t.Fatalf("after A started: A sees %v, B sees %v, want both replicas throughout", la, lb)
		}
	}
}
