package groups

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/remotetier/objstore"
)

// TestMetrics: every series exists from creation at 0, and they follow a
// group through join, commit and leave.
func TestMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	NewMetrics(reg) // a second registration reuses the first's collectors
	for name, n := range map[string]int{
		"tiered_fetch_groups": len(states), "tiered_fetch_group_members": 1, "tiered_fetch_group_rebalances_total": 1,
		"tiered_fetch_group_commit_duration_seconds": 1, "tiered_fetch_group_puts_total": len(putResults),
		"tiered_fetch_group_put_duration_seconds": 1,
	} {
		if got := testutil.CollectAndCount(reg, name); got != n {
			t.Errorf("%s: %d series at start, want %d", name, got, n)
		}
	}
	h := newHarness(t, objstore.NewMemory(), func(o *Options) { o.Metrics = m; o.Store = NewStore(objstore.NewMemory(), StoreOptions{Metrics: m}) })
	a, ja := h.newMember("g")
	recv(t, ja)
	h.sync("g", a, 1, nil)
	wantCode(t, "commit", h.commit("g", a, 1, nil, 1), 0)
	for what, tc := range map[string]struct {
		c    prometheus.Collector
		want float64
	}{
		"stable groups": {m.groups.WithLabelValues(StateStable), 1},
		"members":       {m.members, 1},
		"rebalances":    {m.rebalances, 1},
		"puts ok":       {m.puts.WithLabelValues(PutOK), 1},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%s = %v, want %v", what, got, tc.want)
		}
	}
	if n := testutil.CollectAndCount(m.commit); n != 1 {
		t.Errorf("commit histogram: %d series", n)
	}
	lq := kmsg.NewPtrLeaveGroupRequest()
	lq.Version, lq.Group, lq.MemberID = 1, "g", a
	h.c.Leave(lq)
	h.c.Wait()
	if s, e, mem := testutil.ToFloat64(m.groups.WithLabelValues(StateStable)), testutil.ToFloat64(m.groups.WithLabelValues(StateEmpty)), testutil.ToFloat64(m.members); s != 0 || e != 1 || mem != 0 {
		t.Errorf("after the leave: stable %v empty %v members %v, want 0 1 0", s, e, mem)
	}
}
