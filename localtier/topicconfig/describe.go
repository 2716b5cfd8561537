package topicconfig

import "maps"

// Entry is one line of `topic describe`: a config name, its effective value as Kafka prints it,
// and whether that value is the default (not overridden for the topic).
type Entry struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	IsDefault bool   `json:"is_default"`
}

// Describe parses overrides like Parse and lists every config with its effective value, sorted
// by name. A name present in overrides is not default, even when set to the default value (as
// in Kafka). internal.segment.bytes is listed only when overridden. Values are canonical:
// "uncompressed" shows as "none", numbers without surrounding space.
func Describe(overrides map[string]string) ([]Entry, error) {
	c, err := Parse(overrides)
	if err != nil {
		return nil, err
	}
	out := make([]Entry, 0, len(defs))
	for i := range defs {
		d := &defs[i]
		_, set := overrides[d.name]
		if d.internal && !set {
			continue
		}
		out = append(out, Entry{Name: d.name, Value: d.format(&c), IsDefault: !set})
	}
	return out, nil
}

// Merge applies an alter request to a topic's stored overrides and returns the new overrides;
// base is not modified. Keys in set are added or replaced, then keys in deleteKeys are removed
// (reverting them to the default); a key both set and deleted is therefore deleted, as the later
// operation. The result is not validated: pass it to Parse before storing it.
func Merge(base map[string]string, set map[string]string, deleteKeys []string) map[string]string {
	out := make(map[string]string, len(base)+len(set))
	maps.Copy(out, base)
	maps.Copy(out, set)
	for _, k := range deleteKeys {
		delete(out, k)
	}
	return out
}
