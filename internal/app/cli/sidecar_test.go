package cli

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
)

// TestSidecarLeaders: with --bootstrap-server the sidecar uploads only the
// partitions its broker (node.id from meta.properties) leads, asked on every
// pass from a (fake) Kafka cluster.
func TestSidecarLeaders(t *testing.T) {
	ctx := context.Background()
	logDir := filepath.Join(t.TempDir(), "kafka")
	copyTree(t, filepath.Join(fixtures, "kafka-tester/e856b9acfbc9c4aa601502057e350051d1304c9f/kraft-combined-logs"), logDir)
	id, err := brokerID(logDir)
	if err != nil || id != 1 {
		t.Fatalf("broker id %d, %v; want 1 (node.id)", id, err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "foo"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	leads, closeLeads, err := leaderLookup(ctx, c.ListenAddrs()[0], id)
	if err != nil {
		t.Fatal(err)
	}
	defer closeLeads()
	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	src := remotetier.NewBrokerSource(view, nil)
	src.Leads = leads
	for _, leader := range []int32{1, 0, 1} {
		if err := c.MoveTopicPartition("foo", 0, leader); err != nil {
			t.Fatal(err)
		}
		parts, err := src.Partitions(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if got := len(parts) == 1 && parts[0].Topic == "foo"; got != (leader == id) {
			t.Fatalf("leader %d: partitions %+v", leader, parts)
		}
	}
}
