// Package testnet picks loopback addresses for tests that start a tiered
// process on flags rather than binding listeners themselves.
package testnet

import (
	"fmt"
	"net"
	"testing"
)

// LoopbackAddrs returns n distinct loopback addresses nothing listened on a
// moment ago. The n listeners are held open together before they are
// closed, so the kernel cannot hand the same port out twice (picking and
// closing one at a time can: the second pick may return the first port).
// Another process may still take a port before the caller binds it.
func LoopbackAddrs(t testing.TB, n int) []string {
	t.Helper()
	addrs, err := Pick(n)
	if err != nil {
		t.Fatal(err)
	}
	return addrs
}

// Pick is LoopbackAddrs for callers without a testing.TB.
func Pick(n int) ([]string, error) {
	addrs := make([]string, 0, n)
	lns := make([]net.Listener, 0, n)
	defer func() {
		for _, ln := range lns {
			_ = ln.Close()
		}
	}()
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("pick loopback address: %w", err)
		}
		lns = append(lns, ln)
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs, nil
}

// LoopbackAddr returns one loopback address nothing listened on a moment ago.
func LoopbackAddr(t testing.TB) string {
	t.Helper()
	return LoopbackAddrs(t, 1)[0]
}
