package kafkasrv

import (
	"testing"

	"github.com/tiered/tiered/internal/testkit/groupkit"
)

// TestReviewGroupStaticRestartAfterRebalance: a franz-go static member of
// a group that has been through several generations restarts without a
// rebalance. Its last JoinGroup's subscription metadata named the
// generation it held and the partitions it owned; the restarted client's
// names neither, and the coordinator rebalanced on any change of metadata,
// so every static restart after the group's first generation rebalanced
// the group (KIP-345 lost).
func TestReviewGroupStaticRestartAfterRebalance(t *testing.T) {
	addr, _, end := groupEnv(t, 4, 50)
	groupkit.StaticRestartStaggered(t, addr, "static2", "orders", end)
}
