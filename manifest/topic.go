package manifest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Topic objects: one small object per topic, "topics/<topic>.json" under
// the prefix, written with a conditional PUT. It names the topic's current
// lineage (the topic ID whose manifests are served), its partition count
// and the configs readers need, the lineages it superseded (a re-created
// or deleted topic's old data, kept until the deleted-topic retention
// passes), and whether the topic is deleted. A topic without one (serve's
// own engine, brokers before 2.8, buckets written before topic IDs) is
// served from its name-only lineage.

// TopicVersion is the topic object's format version.
const TopicVersion = 1

// KindTopic is the topic object's "kind".
const KindTopic = "topic"

const (
	topicsDir       = "topics"
	maxTopicConfigs = 64
	maxConfigLen    = 1024
	maxLineages     = 1024
	// MaxTopicObjectBytes caps an encoded topic object.
	MaxTopicObjectBytes = 1 << 20
)

// Reserved names in a topic object's configs: not Kafka configs (Kafka
// refuses topic configs it does not know, so no topic has them), the proof
// that the current lineage is a topic of one Kafka cluster (LineageProof).
// They are in configs, not in the lineage, because releases before them
// decode topic objects strictly and would refuse a new lineage field:
// configs take any name, and an older writer that replaces the configs or
// the current lineage drops them, which only takes the proof away.
const (
	ConfigClusterID         = "tiered.cluster.id"
	ConfigMetadataOffset    = "tiered.metadata.offset"
	ConfigMetadataWitnesses = "tiered.metadata.witnesses"
)

// proofConfigs are the reserved names, in the order they are recorded.
var proofConfigs = []string{ConfigClusterID, ConfigMetadataOffset, ConfigMetadataWitnesses}

// MaxProofWitnesses bounds the witnesses a proof records.
const MaxProofWitnesses = 4

// LineageProof says that a Kafka cluster's metadata held the current
// lineage's topic ID under the topic's name: the cluster's ID (its
// meta.properties cluster.id) and the offset of that metadata in the
// cluster's KRaft metadata log (-1: not known, a source without one).
//
// Witnesses tie the proof to one metadata history, which the cluster ID
// alone does not: a cluster formatted again with the same cluster.id
// starts its metadata offsets at 0 again. They are the IDs of other topics
// the same metadata held live (at most MaxProofWitnesses). Topic IDs are
// random, so a later metadata that holds any of them is of the same
// history as the proof, and its offsets can be compared with the proof's;
// one that holds none of them proves nothing.
type LineageProof struct {
	ClusterID      string
	MetadataOffset int64
	Witnesses      []string
}

// Equal reports whether p and q are the same proof.
func (p LineageProof) Equal(q LineageProof) bool {
	return p.ClusterID == q.ClusterID && p.MetadataOffset == q.MetadataOffset && slices.Equal(p.Witnesses, q.Witnesses)
}

// Proof returns the proof recorded for the current lineage; false when
// there is none (a deleted topic, an object written before proofs, by an
// older release, or by a writer that knew no cluster), or one that does
// not parse.
func (s *TopicState) Proof() (LineageProof, bool) {
	if s == nil || s.Current == nil {
		return LineageProof{}, false
	}
	id := s.Configs[ConfigClusterID]
	if id == "" {
		return LineageProof{}, false
	}
	p := LineageProof{ClusterID: id, MetadataOffset: -1}
	if v, ok := s.Configs[ConfigMetadataOffset]; ok {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return LineageProof{}, false
		}
		p.MetadataOffset = n
	}
	p.Witnesses = parseWitnesses(s.Configs[ConfigMetadataWitnesses])
	return p, true
}

// parseWitnesses returns the witnesses a proof recorded; none when the
// value does not parse (the proof then proves nothing deleted).
func parseWitnesses(v string) []string {
	if v == "" {
		return nil
	}
	w := strings.Split(v, ",")
	if len(w) > MaxProofWitnesses {
		return nil
	}
	for _, id := range w {
		if ValidateTopicID(id) != nil {
			return nil
		}
	}
	return w
}

// witnessValue returns the config value recording the valid witnesses of
// w (at most MaxProofWitnesses); "" for none.
func witnessValue(w []string) string {
	var ok []string
	for _, id := range w {
		if len(ok) < MaxProofWitnesses && ValidateTopicID(id) == nil && !slices.Contains(ok, id) {
			ok = append(ok, id)
		}
	}
	return strings.Join(ok, ",")
}

// withProof returns configs (cloned) with proof recorded when it has none
// and there is room (a topic object holds at most maxTopicConfigs; without
// room there is no proof, which only keeps the lineage from being found
// deleted by reconciliation).
func withProof(configs map[string]string, proof *LineageProof) map[string]string {
	out := maps.Clone(configs)
	if proof == nil || proof.ClusterID == "" || len(proof.ClusterID) > maxConfigLen || !utf8.ValidString(proof.ClusterID) || out[ConfigClusterID] != "" {
		return out
	}
	witnesses := witnessValue(proof.Witnesses)
	need := 1
	if proof.MetadataOffset >= 0 {
		need++
	}
	if witnesses != "" {
		need++
	}
	if len(out)+need > maxTopicConfigs {
		return out
	}
	if out == nil {
		out = map[string]string{}
	}
	out[ConfigClusterID] = proof.ClusterID
	delete(out, ConfigMetadataOffset)
	delete(out, ConfigMetadataWitnesses)
	if proof.MetadataOffset >= 0 {
		out[ConfigMetadataOffset] = strconv.FormatInt(proof.MetadataOffset, 10)
	}
	if witnesses != "" {
		out[ConfigMetadataWitnesses] = witnesses
	}
	return out
}

// withoutProof returns configs without the reserved names.
func withoutProof(configs map[string]string) map[string]string {
	if !slices.ContainsFunc(proofConfigs, func(k string) bool { _, ok := configs[k]; return ok }) {
		return configs
	}
	out := maps.Clone(configs)
	for _, k := range proofConfigs {
		delete(out, k)
	}
	return out
}

// Reasons a lineage was superseded.
const (
	ReasonRecreated = "recreated" // a new topic ID under the same name
	ReasonDeleted   = "deleted"   // the broker's metadata deleted the topic
)

// TopicLineage is one lineage of a topic: the objects written for one
// topic ID.
type TopicLineage struct {
	// TopicID is Kafka's string form of the ID; "" only for a name-only
	// lineage superseded before any ID was seen.
	TopicID string `json:"topic_id"`
	// NameOnlyKeys: the lineage's objects are under the name-only
	// partition directories ("<topic>-<partition>"): a bucket written
	// before topic IDs, adopted by the first ID seen.
	NameOnlyKeys bool  `json:"name_only_keys,omitempty"`
	Partitions   int32 `json:"partitions"`
	// SupersededMs (Unix ms) and Reason are set on superseded lineages.
	SupersededMs int64  `json:"superseded_ms,omitempty"`
	Reason       string `json:"reason,omitempty"`
}

// KeyID is the topic ID that names the lineage's partition directories
// (DataKeysID, ManifestKeyID): "" for a name-only lineage.
func (l TopicLineage) KeyID() string {
	if l.NameOnlyKeys {
		return ""
	}
	return l.TopicID
}

// TopicState is a decoded topic object. Treat it as immutable: the
// methods that change it return a new one.
type TopicState struct {
	Prefix string // not encoded; from the key
	Topic  string
	// Current is the lineage served; nil when the topic is deleted.
	Current *TopicLineage
	// DeletedMs is when the deletion was seen (Current nil).
	DeletedMs int64
	// Configs are the topic configs readers need (cleanup.policy,
	// message.timestamp.type, ...), by Kafka's names.
	Configs map[string]string
	// Superseded lineages, oldest first: never served, removed after the
	// deleted-topic retention.
	Superseded []TopicLineage
	UpdatedMs  int64
}

type wireTopic struct {
	Version    int64             `json:"version"`
	Kind       string            `json:"kind"`
	Topic      string            `json:"topic"`
	Current    *TopicLineage     `json:"current"`
	DeletedMs  int64             `json:"deleted_ms"`
	Configs    map[string]string `json:"configs"`
	Superseded []TopicLineage    `json:"superseded"`
	UpdatedMs  int64             `json:"updated_ms"`
}

// TopicKey is the key of a topic's topic object.
func TopicKey(prefix, topic string) (string, error) {
	p, err := NormalizePrefix(prefix)
	if err != nil {
		return "", err
	}
	if err := ValidateTopic(topic); err != nil {
		return "", err
	}
	k := topicsDir + "/" + topic + subExt
	if p != "" {
		k = p + "/" + k
	}
	return k, nil
}

// Validate checks a topic object: name, IDs, lineages (no two in one
// partition directory, the current one never among the superseded), and
// the configs' sizes.
func (s *TopicState) Validate() error {
	if p, err := NormalizePrefix(s.Prefix); err != nil || p != s.Prefix {
		return invalidf("key prefix %q is not normalized", s.Prefix)
	}
	if err := ValidateTopic(s.Topic); err != nil {
		return invalidf("%v", err)
	}
	switch {
	case s.UpdatedMs < 0 || s.DeletedMs < 0:
		return invalidf("negative time")
	case s.Current == nil && s.DeletedMs == 0:
		return invalidf("no current lineage and no deletion time")
	case s.Current != nil && s.DeletedMs != 0:
		return invalidf("a deletion time on a topic with a current lineage")
	case len(s.Configs) > maxTopicConfigs:
		return invalidf("%d configs, more than %d", len(s.Configs), maxTopicConfigs)
	case len(s.Superseded) > maxLineages:
		return invalidf("%d superseded lineages, more than %d", len(s.Superseded), maxLineages)
	}
	for k, v := range s.Configs {
		if k == "" || len(k) > maxConfigLen || len(v) > maxConfigLen || !utf8.ValidString(k) || !utf8.ValidString(v) {
			return invalidf("config %q: empty, longer than %d bytes or not UTF-8", truncate(k), maxConfigLen)
		}
	}
	dirs := map[string]bool{}
	check := func(what string, l TopicLineage, superseded bool) error {
		switch {
		case l.TopicID == "" && !l.NameOnlyKeys:
			return invalidf("%s: no topic id and not name-only", what)
		case l.TopicID == "" && !superseded:
			return invalidf("%s: the current lineage has no topic id", what)
		case l.Partitions < 0:
			return invalidf("%s: negative partition count %d", what, l.Partitions)
		case superseded && (l.SupersededMs <= 0 || l.Reason != ReasonRecreated && l.Reason != ReasonDeleted):
			return invalidf("%s: superseded without a time or with reason %q", what, truncate(l.Reason))
		case !superseded && (l.SupersededMs != 0 || l.Reason != ""):
			return invalidf("%s: the current lineage has a superseded time or reason", what)
		}
		if l.TopicID != "" {
			if err := ValidateTopicID(l.TopicID); err != nil {
				return invalidf("%s: %v", what, err)
			}
		}
		if dirs[l.KeyID()] {
			return invalidf("%s: two lineages in the partition directories of topic id %q", what, l.KeyID())
		}
		dirs[l.KeyID()] = true
		return nil
	}
	if s.Current != nil {
		if err := check("current", *s.Current, false); err != nil {
			return err
		}
	}
	for i, l := range s.Superseded {
		if err := check(fmt.Sprintf("superseded[%d]", i), l, true); err != nil {
			return err
		}
	}
	return nil
}

// EncodeTopic validates s and encodes it as JSON (map keys sorted, so
// equal states encode to equal bytes).
func EncodeTopic(s *TopicState) ([]byte, error) {
	if err := s.Validate(); err != nil {
		return nil, fmt.Errorf("encode topic object: %w", err)
	}
	w := wireTopic{Version: TopicVersion, Kind: KindTopic, Topic: s.Topic, Current: s.Current, DeletedMs: s.DeletedMs,
		Configs: s.Configs, Superseded: s.Superseded, UpdatedMs: s.UpdatedMs}
	if w.Configs == nil {
		w.Configs = map[string]string{}
	}
	if w.Superseded == nil {
		w.Superseded = []TopicLineage{}
	}
	b, err := json.Marshal(&w)
	if err != nil {
		return nil, fmt.Errorf("encode topic object: %w", err)
	}
	return append(b, '\n'), nil
}

// DecodeTopic decodes and validates the topic object stored at key, which
// must be TopicKey of its own topic. Corrupt input is a
// *CorruptManifestError; a newer version an *UnsupportedVersionError.
func DecodeTopic(key string, data []byte) (*TopicState, error) {
	if len(data) > MaxTopicObjectBytes {
		return nil, &CorruptManifestError{Key: key, Reason: fmt.Sprintf("%d bytes exceeds the %d-byte limit", len(data), MaxTopicObjectBytes)}
	}
	var w wireTopic
	ver, err := decode(key, data, KindTopic, &w)
	if err != nil {
		return nil, err
	}
	if ver > TopicVersion {
		return nil, &UnsupportedVersionError{Key: key, Version: ver}
	}
	prefix, ok := topicKeyPrefix(key, w.Topic)
	if !ok {
		return nil, &CorruptManifestError{Key: key, Reason: fmt.Sprintf("holds topic %q, which is not the topic its key names", truncate(w.Topic))}
	}
	s := &TopicState{Prefix: prefix, Topic: w.Topic, Current: w.Current, DeletedMs: w.DeletedMs, Configs: w.Configs,
		Superseded: w.Superseded, UpdatedMs: w.UpdatedMs}
	if err := s.Validate(); err != nil {
		return nil, withKey(key, err)
	}
	return s, nil
}

// ParseTopicKey reports whether key is a topic object's key, and if so its
// prefix and topic.
func ParseTopicKey(key string) (prefix, topic string, ok bool) {
	dir, name := path.Split(key)
	topic, ok = strings.CutSuffix(name, subExt)
	if !ok || !strings.HasSuffix(dir, topicsDir+"/") {
		return "", "", false
	}
	prefix, ok = topicKeyPrefix(key, topic)
	return prefix, topic, ok
}

// topicKeyPrefix returns the prefix of key if key is TopicKey(prefix, topic).
func topicKeyPrefix(key, topic string) (string, bool) {
	if ValidateTopic(topic) != nil {
		return "", false
	}
	rel := topicsDir + "/" + topic + subExt
	prefix, ok := bytes.CutSuffix([]byte(key), []byte(rel))
	if !ok {
		return "", false
	}
	p := string(prefix)
	if p != "" {
		if p[len(p)-1] != '/' {
			return "", false
		}
		p = p[:len(p)-1]
	}
	if n, err := NormalizePrefix(p); err != nil || n != p {
		return "", false
	}
	return p, true
}

// ErrSupersededLineage is a partition whose topic ID belongs to a lineage
// the topic object superseded (a stale log dir of a deleted or re-created
// topic): it must never be written to again.
var ErrSupersededLineage = errors.New("topic id belongs to a superseded lineage")

// ErrNoTopicID is a partition without a topic ID under a topic whose
// object names one.
var ErrNoTopicID = errors.New("partition has no topic id, but the bucket's topic object names one")

// Observation is what an uploader saw of a topic in its source.
type Observation struct {
	TopicID    string // "" without partition.metadata
	Partitions int32  // the highest partition number seen + 1
	Configs    map[string]string
	// NameOnlyExists: the name-only lineage has a manifest (a bucket
	// written before topic IDs), which the first ID seen adopts.
	NameOnlyExists bool
	// NameOnlyForeign: that name-only lineage cannot be this topic's (it
	// holds offsets the partition never reached: the topic was re-created
	// before its ID was first seen). It is superseded instead of adopted.
	NameOnlyForeign bool
	NowMs           int64
	// Proof, when set, is a cluster's metadata holding TopicID under the
	// topic's name: recorded for the current lineage when it has none.
	Proof *LineageProof
	// ProofHolds reports whether the metadata that gave Proof holds a
	// topic ID live, under any name. A recorded proof of Proof's cluster,
	// below Proof's offset, whose witnesses are not all held becomes
	// Proof (the metadata holds TopicID, so it is of the same history): a
	// witness deleted is replaced before the lineage's proof is needed.
	// nil: recorded witnesses are kept unless there are none.
	ProofHolds func(topicID string) bool
}

// refreshWitnesses reports whether the recorded proof rec should become
// o's proof: of the same cluster at a greater offset, o has witnesses, and
// rec has none or one o's metadata no longer holds.
func (o *Observation) refreshWitnesses(rec LineageProof) bool {
	if o.Proof == nil || o.Proof.ClusterID != rec.ClusterID || witnessValue(o.Proof.Witnesses) == "" {
		return false
	}
	if o.Proof.MetadataOffset <= rec.MetadataOffset {
		// Not later than the proof (a broker whose metadata log lags): its
		// witnesses would replace a later metadata's, and that one's
		// theirs again on the next pass, every pass until it catches up.
		return false
	}
	if len(rec.Witnesses) == 0 {
		return witnessValue(o.Proof.Witnesses) != ""
	}
	if o.ProofHolds == nil {
		return false
	}
	for _, id := range rec.Witnesses {
		// The lineage's own ID witnesses nothing (Gone skips it): one
		// recorded is replaced like a witness deleted.
		if id == o.TopicID || !o.ProofHolds(id) {
			return true
		}
	}
	return false
}

// ObserveTopic returns the topic object after an uploader saw o (s nil:
// there is none yet), whether it must be written, and the KeyID the
// partition's objects go under. Rules:
//   - no topic ID and no topic object: the name-only lineage, no object;
//   - the current ID: the partition count grows to o's, configs update;
//   - no object yet: o's ID becomes current, adopting the name-only
//     lineage when it exists (NameOnlyKeys), or superseding it when it
//     is foreign (NameOnlyForeign);
//   - a new ID: the current lineage is superseded (ReasonRecreated, now)
//     and the new one is current in its own directories; a deleted topic
//     is re-created the same way;
//   - a superseded ID: ErrSupersededLineage; no ID under an object that
//     names one: ErrNoTopicID;
//   - o.Proof is recorded for o's ID when it becomes current, or when it
//     is current without one; a proof recorded is kept (configs o gives
//     replace the others, never the proof), except that it becomes
//     o.Proof (offset and witnesses) when o.Proof is of the same cluster
//     at a greater offset and the recorded one has no witnesses or one
//     o's metadata no longer holds (Observation.ProofHolds). Configs
//     named like the proof in o.Configs are ignored.
func ObserveTopic(prefix, topic string, s *TopicState, o Observation) (next *TopicState, keyID string, write bool, err error) {
	if o.TopicID == "" {
		if s == nil {
			return nil, "", false, nil
		}
		return s, "", false, fmt.Errorf("topic %s: %w", topic, ErrNoTopicID)
	}
	if err := ValidateTopicID(o.TopicID); err != nil {
		return s, "", false, err
	}
	if s == nil {
		p, err := NormalizePrefix(prefix)
		if err != nil {
			return nil, "", false, err
		}
		n := &TopicState{Prefix: p, Topic: topic, Configs: withProof(withoutProof(o.Configs), o.Proof), UpdatedMs: o.NowMs,
			Current: &TopicLineage{TopicID: o.TopicID, NameOnlyKeys: o.NameOnlyExists && !o.NameOnlyForeign, Partitions: o.Partitions}}
		if o.NameOnlyExists && o.NameOnlyForeign {
			n.Superseded = []TopicLineage{{NameOnlyKeys: true, Partitions: o.Partitions, SupersededMs: max(o.NowMs, 1), Reason: ReasonRecreated}}
		}
		if err := n.Validate(); err != nil {
			return nil, "", false, err
		}
		return n, n.Current.KeyID(), true, nil
	}
	for _, l := range s.Superseded {
		if l.TopicID == o.TopicID {
			return s, "", false, fmt.Errorf("topic %s id %s: %w", topic, o.TopicID, ErrSupersededLineage)
		}
	}
	n := s.clone()
	n.UpdatedMs = o.NowMs
	if c := n.Current; c != nil && c.TopicID == o.TopicID {
		changed := false
		if o.Partitions > c.Partitions {
			c.Partitions, changed = o.Partitions, true
		}
		want := n.Configs
		if o.Configs != nil {
			want = withoutProof(o.Configs)
			if _, ok := n.Proof(); ok {
				want = maps.Clone(want)
				if want == nil {
					want = map[string]string{}
				}
				for _, k := range proofConfigs {
					if v, ok := n.Configs[k]; ok {
						want[k] = v
					}
				}
				if len(want) > maxTopicConfigs {
					want = withoutProof(want) // no room: the proof goes, never the configs
				}
			}
		}
		if rec, ok := n.Proof(); !ok {
			want = withProof(withoutProof(want), o.Proof)
		} else if rec.ClusterID == want[ConfigClusterID] && o.refreshWitnesses(rec) {
			// The proof becomes o's, offset and witnesses: a later
			// metadata of the same history (it holds the lineage), so
			// the proof only moves forward and views that lag behind it
			// never take its witnesses back.
			w := maps.Clone(want)
			w[ConfigMetadataOffset] = strconv.FormatInt(o.Proof.MetadataOffset, 10)
			w[ConfigMetadataWitnesses] = witnessValue(o.Proof.Witnesses)
			if len(w) <= maxTopicConfigs {
				want = w
			}
		}
		if !maps.Equal(want, n.Configs) {
			n.Configs, changed = want, true
		}
		if !changed {
			return s, c.KeyID(), false, nil
		}
		return n, c.KeyID(), true, n.Validate()
	}
	if c := n.Current; c != nil {
		old := *c
		old.SupersededMs, old.Reason = max(o.NowMs, 1), ReasonRecreated
		n.addSuperseded(old)
	}
	n.Current = &TopicLineage{TopicID: o.TopicID, Partitions: o.Partitions}
	n.DeletedMs = 0
	n.Configs = withProof(withoutProof(o.Configs), o.Proof)
	if err := n.Validate(); err != nil {
		return s, "", false, err
	}
	return n, n.Current.KeyID(), true, nil
}

// MarkDeleted returns s with its current lineage superseded as deleted at
// nowMs: no reader serves the topic any more. A topic already deleted is
// returned as is (write false).
func (s *TopicState) MarkDeleted(nowMs int64) (next *TopicState, write bool) {
	if s.Current == nil {
		return s, false
	}
	n := s.clone()
	old := *n.Current
	old.SupersededMs, old.Reason = max(nowMs, 1), ReasonDeleted
	n.addSuperseded(old)
	n.Current, n.DeletedMs, n.UpdatedMs = nil, max(nowMs, 1), nowMs
	return n, true
}

// addSuperseded appends l to the superseded lineages of s (a clone),
// dropping the oldest removed ones (MarkRemoved) to stay within the limit.
func (s *TopicState) addSuperseded(l TopicLineage) {
	for len(s.Superseded) >= maxLineages {
		i := slices.IndexFunc(s.Superseded, func(r TopicLineage) bool { return r.Partitions == 0 })
		if i < 0 {
			break
		}
		s.Superseded = slices.Delete(s.Superseded, i, i+1)
	}
	s.Superseded = append(s.Superseded, l)
}

// Expired lists the superseded lineages whose retention has passed at
// nowMs: retentionMs 0 is at once, negative keeps them for ever. Removed
// lineages (no partitions left) are not listed.
func (s *TopicState) Expired(retentionMs, nowMs int64) []TopicLineage {
	if retentionMs < 0 {
		return nil
	}
	var out []TopicLineage
	for _, l := range s.Superseded {
		if l.Partitions > 0 && nowMs-l.SupersededMs >= retentionMs {
			out = append(out, l)
		}
	}
	return out
}

// MarkRemoved returns s with the superseded lineage whose KeyID is keyID
// (after its objects were removed) kept as removed: no partitions left, so
// nothing more to remove, but its topic ID stays superseded. A removed ID
// dropped from the object would look new to a sidecar that still sees a
// stale log dir of it (ObserveTopic), and would become current again over
// the live lineage. It reports whether s had such a lineage not yet
// removed.
func (s *TopicState) MarkRemoved(keyID string, nowMs int64) (*TopicState, bool) {
	i := slices.IndexFunc(s.Superseded, func(l TopicLineage) bool { return l.KeyID() == keyID && l.Partitions > 0 })
	if i < 0 {
		return s, false
	}
	n := s.clone()
	n.Superseded[i].Partitions = 0
	n.UpdatedMs = nowMs
	return n, true
}

// Removed reports whether the lineage in the partition directories of
// keyID was removed (MarkRemoved): nothing of it is committed any more,
// so whatever is found there later (a commit of a pass that was in flight
// when the lineage was removed) is garbage.
func (s *TopicState) Removed(keyID string) bool {
	if s == nil || s.Current != nil && s.Current.KeyID() == keyID {
		return false
	}
	return slices.ContainsFunc(s.Superseded, func(l TopicLineage) bool { return l.KeyID() == keyID && l.Partitions == 0 })
}

// Serving returns the lineage readers serve: its KeyID and topic ID; ok
// is false for a deleted topic.
func (s *TopicState) Serving() (keyID, topicID string, ok bool) {
	if s == nil {
		return "", "", true
	}
	if s.Current == nil {
		return "", "", false
	}
	return s.Current.KeyID(), s.Current.TopicID, true
}

func (s *TopicState) clone() *TopicState {
	n := *s
	if s.Current != nil {
		c := *s.Current
		n.Current = &c
	}
	n.Configs = maps.Clone(s.Configs)
	n.Superseded = slices.Clone(s.Superseded)
	return &n
}
