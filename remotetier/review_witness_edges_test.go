package remotetier

import (
	"slices"
	"testing"

	"github.com/tiered/tiered/manifest"
)

// Gone on recorded witnesses of every shape: only a valid witness other
// than the lineage itself, held by the view, lets the view find it deleted.
func TestReviewGoneWitnessShapes(t *testing.T) {
	view := rcView(rcCluster, 20, map[string]string{"__consumer_offsets": rcOffsets})
	for _, tt := range []struct {
		witnesses string
		gone      bool
	}{
		{"", false},
		{"garbage", false},
		{rcOffsets + ",", false},
		{lineA, false},                  // its own ID only
		{lineA + "," + rcOffsets, true}, // its own ID beside a held one
		{rcOffsets + "," + rcOffsets, true},
		{rcTxn + "," + rcOffsets, true},
		{rcTxn, false},
		{"AAAAAAAAAAAAAAAAAAAAAA," + rcOffsets, false}, // the zero ID: the value does not parse
		{rcTxn + "," + rcTxn + "," + rcTxn + "," + rcTxn + "," + rcOffsets, false}, // more than 4
	} {
		s := &manifest.TopicState{Topic: "orders", Current: &manifest.TopicLineage{TopicID: lineA, Partitions: 1},
			Configs: map[string]string{manifest.ConfigClusterID: rcCluster, manifest.ConfigMetadataOffset: "10"}}
		if tt.witnesses != "" {
			s.Configs[manifest.ConfigMetadataWitnesses] = tt.witnesses
		}
		if got := view.Gone(s); got != tt.gone {
			t.Errorf("witnesses %q: gone %v, want %v", tt.witnesses, got, tt.gone)
		}
		// A view that holds the lineage replaces witnesses that do not parse.
		live := rcView(rcCluster, 30, map[string]string{"orders": lineA, "__consumer_offsets": rcOffsets})
		n, _, _, err := manifest.ObserveTopic("", "orders", s, manifest.Observation{TopicID: lineA, Partitions: 1, Proof: live.proof("orders", lineA), ProofHolds: live.proofHolds()})
		if err != nil {
			t.Fatal(err)
		}
		// ... and its own ID, which witnesses nothing.
		if p, ok := n.Proof(); !ok || len(p.Witnesses) == 0 || slices.Contains(p.Witnesses, lineA) {
			t.Errorf("witnesses %q after a pass of a view holding the lineage: %+v, %v", tt.witnesses, p, ok)
		}
	}
}
