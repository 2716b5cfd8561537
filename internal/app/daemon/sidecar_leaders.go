package daemon

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/localtier/checkpoint"
)

// brokerID reads node.id (KRaft) or broker.id (ZooKeeper) from the log
// dir's meta.properties.
func brokerID(dir string) (int32, error) {
	path := filepath.Join(dir, "meta.properties")
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("sidecar.bootstrap_server needs the broker id: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		k, v, ok := strings.Cut(line, "=")
		if !ok || strings.HasPrefix(line, "#") {
			continue
		}
		if k = strings.TrimSpace(k); k == "node.id" || k == "broker.id" {
			id, err := strconv.ParseInt(strings.TrimSpace(v), 10, 32)
			if err != nil || id < 0 {
				return 0, fmt.Errorf("%s: %s=%q is not a broker id", path, k, v)
			}
			return int32(id), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	return 0, fmt.Errorf("%s has neither node.id nor broker.id", path)
}

// leaderLookup returns a function asking the cluster at bootstrap (a
// comma-separated host:port list) which partitions the broker id leads, and
// the function closing its client. It checks the cluster answers before
// returning.
func leaderLookup(ctx context.Context, bootstrap string, id int32) (func(context.Context) (map[checkpoint.TopicPartition]bool, error), func(), error) {
	var seeds []string
	for _, s := range strings.Split(bootstrap, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	cl, err := kgo.NewClient(kgo.SeedBrokers(seeds...), kgo.RequestRetries(1), kgo.DialTimeout(5*time.Second))
	if err != nil {
		return nil, nil, fmt.Errorf("sidecar.bootstrap_server %s: %w", bootstrap, err)
	}
	leads := func(ctx context.Context) (map[checkpoint.TopicPartition]bool, error) {
		ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		// A fresh Metadata request every pass (kadm's Metadata may answer
		// from the client's cache, which would miss a leader change).
		req := kmsg.NewPtrMetadataRequest()
		resp, err := req.RequestWith(ctx, cl)
		if err != nil {
			return nil, fmt.Errorf("metadata from %s: %w", bootstrap, err)
		}
		out := map[checkpoint.TopicPartition]bool{}
		for _, t := range resp.Topics {
			if t.ErrorCode != 0 || t.Topic == nil {
				continue
			}
			for _, p := range t.Partitions {
				if p.ErrorCode == 0 && p.Leader == id {
					out[checkpoint.TopicPartition{Topic: *t.Topic, Partition: p.Partition}] = true
				}
			}
		}
		return out, nil
	}
	if _, err := leads(ctx); err != nil {
		cl.Close()
		return nil, nil, fmt.Errorf("sidecar.bootstrap_server: %w", err)
	}
	return leads, cl.Close, nil
}
