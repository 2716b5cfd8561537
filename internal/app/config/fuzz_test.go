package config

import (
	"bytes"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// loadBytes applies a YAML document to the defaults the way Load applies a file.
func loadBytes(data []byte) (*Config, []*FieldError) {
	c := Defaults()
	l := &loader{c: &c}
	l.loadYAML(data, "fuzz.yaml")
	return &c, l.problems
}

// FuzzLoad feeds arbitrary documents to the loader: it must not panic, every problem must be
// a located *FieldError, validation and printing must not panic either, and a document the
// loader accepts must also pass yaml.v3's strict decoding (KnownFields) into Config: the
// loader never accepts a key Config does not have.
func FuzzLoad(f *testing.F) {
	for _, seed := range []string{
		"",
		"data_dir: /tmp/x\nbucket: mem://b\n",
		"http: {addr: 127.0.0.1:0, tls: {cert_file: a, key_file: b}}\n",
		"fetch:\n  cache_bytes: 1GiB\n  chunk_bytes: 4MiB\n  max_wait: 2s\n",
		"broker:\n  log.retention.hours: 72\n  log.cleanup.policy: compact,delete\n  bogus: 1\n",
		"auth:\n  tokens: [{principal: a, token: t}]\n  acls: {a: ['*']}\n",
		"a: &a [x, x]\nb: [*a, *a]\n",
		"http: &h {addr: ':1'}\nkafka: *h\n",
		"<<: {data_dir: x}\n",
		"log: {level: info, level: debug}\n",
		"uploader: [1, 2]\nfetch: 3\n",
		"- a\n- b\n",
		"!!binary aGVsbG8=\n",
		"data_dir: ~\nshutdown_timeout: 1h\n",
		"? [a]\n: b\n",
		"sidecar:\n  deleted_topic_retention: 24h\n  topics: [{match: a, tier: false}, {match: 'b*', retention.ms: 5, retention.bytes: -1}]\n",
		"sidecar: {deleted_topic_retention: -1, topics: []}\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<16 {
			return
		}
		c, probs := loadBytes(data)
		for _, p := range probs {
			if p.Msg == "" || p.Source != SourceFile {
				t.Fatalf("unlocated problem %+v", p)
			}
		}
		_ = c.Validate()
		_, _ = c.BrokerSettings()
		_ = c.TopicDefaults()
		var out bytes.Buffer
		if err := c.WriteYAML(&out, true); err != nil {
			t.Fatalf("WriteYAML: %v", err)
		}
		if len(probs) > 0 {
			return
		}
		var strict Config
		dec := yaml.NewDecoder(bytes.NewReader(data))
		dec.KnownFields(true)
		if err := dec.Decode(&strict); err != nil && strings.Contains(err.Error(), "not found in type") {
			t.Fatalf("loader accepted a document with an unknown key: %v", err)
		}
	})
}
