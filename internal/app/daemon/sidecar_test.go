package daemon

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/testkit/brokerdir"
	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/vfs"
	"github.com/tiered/tiered/remotetier"
	"github.com/tiered/tiered/remotetier/brokermeta"
	"github.com/tiered/tiered/remotetier/objstore"
)

// TestSidecarLeaders: with --bootstrap-server the sidecar uploads only the
// partitions its broker (node.id from meta.properties) leads, asked on every
// pass from a (fake) Kafka cluster.
func TestSidecarLeaders(t *testing.T) {
	ctx := context.Background()
	logDir := brokerdir.Copy(t, filepath.Join(t.TempDir(), "kafka"))
	id, err := brokerID(logDir)
	if err != nil || id != 1 {
		t.Fatalf("broker id %d, %v; want 1 (node.id)", id, err)
	}
	c, err := kfake.NewCluster(kfake.NumBrokers(2), kfake.SeedTopics(1, "foo"))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	admin, err := brokermeta.DialAdmin(ctx, c.ListenAddrs()[0])
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close()
	meta := &sidecarMeta{src: admin, nodeID: id}
	view, err := localtier.OpenBrokerView(vfs.Default, logDir)
	if err != nil {
		t.Fatal(err)
	}
	src := remotetier.NewBrokerSource(view, nil)
	src.Leads = meta.leads
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

// TestSidecarReadiness runs the sidecar in-process: /readyz is 200 once a pass succeeded, 503 with the pass's error while passes fail (the broker's log dir gone), and 200
// again once they succeed; /healthz is 200 throughout; Run returns nil when ctx ends.
func TestSidecarReadiness(t *testing.T) {
	root := t.TempDir()
	logDir := brokerdir.Rolled(t, filepath.Join(root, "kafka"))
	// A mem:// bucket is process-wide: dropped after the test, so a
	// second run (-count) starts empty and has its segment to upload.
	t.Cleanup(func() { objstore.DropMemory("sidecar-readiness") })
	cfg, err := config.Load(config.LoadOptions{Process: config.ProcessSidecar, Flags: map[string]string{
		"kafka-log-dir": logDir, "bucket": "mem://sidecar-readiness", "http": "127.0.0.1:0", "interval": "20ms"}})
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewSidecar(context.Background(), SidecarOptions{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + s.HTTPAddr()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	waitReady := func(want int, body string) {
		t.Helper()
		var a answer
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if a = call(t, "GET", url+"/readyz", ""); a.status == want && strings.Contains(a.body, body) {
				return
			}
		}
		t.Fatalf("/readyz: %d %s, want %d with %q", a.status, a.body, want, body)
	}
	waitReady(http.StatusOK, `"status":"ready"`)
	if got := gathered(t, s, "tiered_uploader_uploaded_segments_total"); got != 1 {
		t.Errorf("uploaded segments %v, want 1", got)
	}
	if err := os.RemoveAll(logDir); err != nil {
		t.Fatal(err)
	}
	waitReady(http.StatusServiceUnavailable, "the last upload pass failed: list partitions")
	if a := call(t, "GET", url+"/healthz", ""); a.status != http.StatusOK {
		t.Errorf("/healthz while passes fail: %d %s, want 200", a.status, a.body)
	}
	brokerdir.Rolled(t, logDir)
	waitReady(http.StatusOK, `"status":"ready"`)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// gathered is the value of the one series of the named counter or gauge on s's registry.
func gathered(t *testing.T, s *Sidecar, name string) float64 {
	t.Helper()
	mfs, err := s.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		if m := mf.GetMetric()[0]; m.GetCounter() != nil {
			return m.GetCounter().GetValue()
		} else {
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("no single series %s", name)
	return 0
}

func TestPassHealth(t *testing.T) {
	var h passHealth
	if err := h.ready(context.Background()); err == nil || err.Error() != "no upload pass finished yet" {
		t.Errorf("before a pass: %v", err)
	}
	h.record(remotetier.Report{}, errors.Join(errors.New("a-0: put: timeout"), errors.New("b-1: put: timeout")))
	if err := h.ready(context.Background()); err == nil || err.Error() != "the last upload pass failed: a-0: put: timeout b-1: put: timeout" {
		t.Errorf("after a failed pass: %v", err)
	}
	h.record(remotetier.Report{UploadedSegments: 1}, nil)
	if err := h.ready(context.Background()); err != nil {
		t.Errorf("after a good pass: %v", err)
	}
}

// TestSidecarPolicy: the sidecar uploads only the topics sidecar.topics (here --topics)
// tiers; with no rules it tiers every non-internal topic and says so in a start-up WARN.
func TestSidecarPolicy(t *testing.T) {
	tests := []struct {
		name     string
		topics   string // --topics; "" = no rules
		uploaded float64
		wantWarn bool
	}{
		{name: "not_tiered", topics: "orders,logs-*", uploaded: 0},
		{name: "tiered_by_glob", topics: "orders,f*", uploaded: 1},
		{name: "no_rules", uploaded: 1, wantWarn: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			logDir := brokerdir.Rolled(t, filepath.Join(t.TempDir(), "kafka"))
			// Process-wide, as above: dropped so that each run starts empty.
			t.Cleanup(func() { objstore.DropMemory("sidecar-policy-" + tt.name) })
			flags := map[string]string{"kafka-log-dir": logDir, "bucket": "mem://sidecar-policy-" + tt.name}
			if tt.topics != "" {
				flags["topics"] = tt.topics
			}
			cfg, err := config.Load(config.LoadOptions{Process: config.ProcessSidecar, Flags: flags})
			if err != nil {
				t.Fatal(err)
			}
			var logs strings.Builder
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			s, err := NewSidecar(context.Background(), SidecarOptions{Config: cfg, Logger: logger})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, err := s.uploader.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			if got := gathered(t, s, "tiered_uploader_uploaded_segments_total"); got != tt.uploaded {
				t.Errorf("uploaded segments %v, want %v", got, tt.uploaded)
			}
			if got := strings.Contains(logs.String(), "level=WARN msg=\"no sidecar.topics rules"); got != tt.wantWarn {
				t.Errorf("start-up WARN %t, want %t; logs:\n%s", got, tt.wantWarn, logs.String())
			}
		})
	}
}
