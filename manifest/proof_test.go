package manifest

import (
	"fmt"
	"testing"
)

// The proof that a cluster's metadata held the current lineage lives in
// the configs (older releases decode topic objects strictly and take any
// config name): recorded once for the current lineage, kept when configs
// change, and never carried to another lineage, whoever writes it (a
// writer without a proof, as every older release is, drops it with the
// lineage it belonged to).
func TestTopicLineageProof(t *testing.T) {
	pA := &LineageProof{ClusterID: "MkU3OEVBNTcwNTJENDM2Qk", MetadataOffset: 42}
	s, _, write, err := ObserveTopic("", "orders", nil, Observation{TopicID: idA, Partitions: 1, NowMs: 1, Proof: pA})
	if err != nil || !write {
		t.Fatal(write, err)
	}
	if p, ok := s.Proof(); !ok || !p.Equal(*pA) {
		t.Fatalf("proof %+v, %v", p, ok)
	}
	data, err := EncodeTopic(s)
	if err != nil {
		t.Fatal(err)
	}
	if s, err = DecodeTopic("topics/orders.json", data); err != nil {
		t.Fatal(err)
	}
	// Another proof, and configs without it: the first proof stays.
	n, _, _, err := ObserveTopic("", "orders", s, Observation{TopicID: idA, Partitions: 1, NowMs: 2,
		Configs: map[string]string{"cleanup.policy": "compact", ConfigClusterID: "x"}, Proof: &LineageProof{ClusterID: "other", MetadataOffset: 50}})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := n.Proof(); !ok || !p.Equal(*pA) || n.Configs["cleanup.policy"] != "compact" {
		t.Fatalf("after a config change: proof %+v, %v, configs %v", p, ok, n.Configs)
	}
	// Nothing new: nothing written.
	if _, _, write, err := ObserveTopic("", "orders", n, Observation{TopicID: idA, Partitions: 1, NowMs: 3, Proof: pA}); err != nil || write {
		t.Fatalf("unchanged observation wrote: %v, %v", write, err)
	}
	// Deleted: no proof (nothing current). Re-created without a proof:
	// none; with one: the new lineage's.
	d, _ := n.MarkDeleted(4)
	if _, ok := d.Proof(); ok {
		t.Fatal("a deleted topic has a proof")
	}
	r, _, _, err := ObserveTopic("", "orders", d, Observation{TopicID: idB, Partitions: 1, NowMs: 5})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Proof(); ok {
		t.Fatalf("the re-created lineage inherited the proof %+v", p)
	}
	r, _, _, err = ObserveTopic("", "orders", n, Observation{TopicID: idB, Partitions: 1, NowMs: 5, Proof: &LineageProof{ClusterID: "c", MetadataOffset: -1}})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := r.Proof(); !ok || !p.Equal(LineageProof{ClusterID: "c", MetadataOffset: -1}) {
		t.Fatalf("re-created with a proof: %+v, %v (configs %v)", p, ok, r.Configs)
	}
	// A proof added to a current lineage without one.
	old, _, _, err := ObserveTopic("", "orders", nil, Observation{TopicID: idA, Partitions: 1, NowMs: 1, Configs: map[string]string{"cleanup.policy": "delete"}})
	if err != nil {
		t.Fatal(err)
	}
	up, _, write, err := ObserveTopic("", "orders", old, Observation{TopicID: idA, Partitions: 1, NowMs: 2, Proof: pA})
	if err != nil || !write {
		t.Fatal(write, err)
	}
	if p, ok := up.Proof(); !ok || !p.Equal(*pA) || up.Configs["cleanup.policy"] != "delete" {
		t.Fatalf("proof added: %+v, %v, configs %v", p, ok, up.Configs)
	}
	// No room: no proof, and the object still valid.
	full := map[string]string{}
	for i := range maxTopicConfigs {
		full[fmt.Sprintf("c%d", i)] = "v"
	}
	f, _, _, err := ObserveTopic("", "orders", nil, Observation{TopicID: idA, Partitions: 1, NowMs: 1, Configs: full, Proof: pA})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := f.Proof(); ok {
		t.Fatal("a proof past the configs limit")
	}
	// Configs that fill the object push a recorded proof out.
	g, _, _, err := ObserveTopic("", "orders", up, Observation{TopicID: idA, Partitions: 1, NowMs: 3, Configs: full, Proof: pA})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := g.Proof(); ok || len(g.Configs) != maxTopicConfigs {
		t.Fatalf("a full set of configs over a proof: %d configs", len(g.Configs))
	}
	// A proof whose offset does not parse is none.
	bad := up.clone()
	bad.Configs[ConfigMetadataOffset] = "x"
	if _, ok := bad.Proof(); ok {
		t.Fatal("unparsable offset taken for a proof")
	}
}
