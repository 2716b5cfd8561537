package cli

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/tiered/tiered/localtier"
	"github.com/tiered/tiered/localtier/topicconfig"
)

var topicCreateCmd = &command{
	name:    "topic create",
	summary: "create a topic with empty partitions",
	help: `usage: tiered topic create (--data-dir DIR | --server URL) --topic T [--partitions N] [--config k=v ...] [--json]

Creates topic T in the data dir: one directory T-<p> per partition, each with an empty
active segment, and stores the config overrides. Config names and values are Kafka's
topic configs (cleanup.policy, retention.ms, segment.bytes, compression.type, ...);
invalid values and combinations are refused with Kafka's messages.

With --server URL the topic is created by a running 'tiered serve' over its HTTP API
(POST /v1/topics), which holds the data dir.

Flags:
  --data-dir DIR     data directory (default ./data; created if missing)
  --server URL       a serve process's HTTP address (e.g. http://127.0.0.1:8080)
  --topic T          topic name (required; Kafka's rules: [a-zA-Z0-9._-], at most 249 chars)
  --partitions N     partition count (default 1)
  --config k=v       config override; repeat for several
  --json             print the new topic's description as JSON

Example:
  tiered topic create --topic orders --partitions 3 --config cleanup.policy=compact --config compression.type=zstd
`,
	run: runTopicCreate,
}

var topicAlterCmd = &command{
	name:    "topic alter",
	summary: "set or delete topic config overrides",
	help: `usage: tiered topic alter (--data-dir DIR | --server URL) --topic T [--config k=v ...] [--delete-config k ...] [--json]

Sets and deletes config overrides of an existing topic (like kafka-configs --alter
--add-config/--delete-config). The merged config is validated as a whole before it is
stored; a deleted override goes back to the default. The partition count cannot be changed.

With --server URL a running 'tiered serve' applies the change (PATCH /v1/topics/T/config)
to its open partitions at once.

Flags:
  --data-dir DIR       data directory (default ./data; must exist)
  --server URL         a serve process's HTTP address (e.g. http://127.0.0.1:8080)
  --topic T            topic name (required)
  --config k=v         override to set; repeat for several
  --delete-config k    override to delete; repeat for several
  --json               print the topic's description as JSON afterwards

Example:
  tiered topic alter --topic orders --config retention.ms=86400000 --delete-config compression.type
`,
	run: runTopicAlter,
}

var topicDescribeCmd = &command{
	name:    "topic describe",
	summary: "show partitions, offsets and every config",
	help: `usage: tiered topic describe (--data-dir DIR | --server URL) [--topic T] [--json]

Shows each partition (log start and end offsets, segment count, bytes on disk) and every
topic config with its effective value, marked "(default)" or "(override)" like
kafka-configs --describe --all. Without --topic, describes every topic. With --server
URL a running 'tiered serve' answers (GET /v1/topics/T/config), and a config set by the
broker section of serve's configuration shows "(broker)".

Flags:
  --data-dir DIR     data directory (default ./data; must exist)
  --server URL       a serve process's HTTP address (e.g. http://127.0.0.1:8080)
  --topic T          topic to describe (default: all topics)
  --json             print JSON: {"topic", "partitions": [{"partition", "log_start_offset",
                     "log_end_offset", "segments", "size_bytes"}], "configs": [{"name",
                     "value", "is_default", "source"}]}; without --topic, {"topics": [...]}

Example:
  tiered topic describe --topic orders
`,
	run: runTopicDescribe,
}

// parseConfigs turns repeated --config k=v flags into a map.
func parseConfigs(list []string) (map[string]string, error) {
	m := map[string]string{}
	for _, kv := range list {
		k, v, ok := strings.Cut(kv, "=")
		k = strings.TrimSpace(k)
		if !ok || k == "" {
			return nil, usagef("invalid --config %q: want name=value", kv)
		}
		if _, dup := m[k]; dup {
			return nil, usagef("--config %s is given more than once", k)
		}
		m[k] = v
	}
	return m, nil
}

func requireTopic(topic string) error {
	if topic == "" {
		return usagef("missing required flag --topic")
	}
	return nil
}

// requireTopicPartition checks the --topic and --partition flags of a
// command that names one partition: both given, the partition in range.
func requireTopicPartition(fs *flag.FlagSet, topic string, partition int) error {
	if err := requireTopic(topic); err != nil {
		return err
	}
	if !setFlags(fs)["partition"] {
		return usagef("missing required flag --partition")
	}
	if partition < 0 || partition > math.MaxInt32 {
		return usagef("--partition %d is out of range", partition)
	}
	return nil
}

func runTopicCreate(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("topic create")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	server := fs.String("server", "", "")
	topic := fs.String("topic", "", "")
	partitions := fs.Int("partitions", 1, "")
	var cfgs stringList
	fs.Var(&cfgs, "config", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	if err := requireTopic(*topic); err != nil {
		return err
	}
	if *partitions < 1 || *partitions > localtier.MaxPartitions {
		return usagef("--partitions %d is out of range: must be between 1 and %d", *partitions, localtier.MaxPartitions)
	}
	overrides, err := parseConfigs(cfgs)
	if err != nil {
		return err
	}
	if err := dataDirOrServer(setFlags(fs), *server); err != nil {
		return err
	}
	if *server != "" {
		body, _ := json.Marshal(map[string]any{"topic": *topic, "partitions": *partitions, "configs": overrides})
		var desc topicJSON
		if err := serverCall(ctx, *server, http.MethodPost, "/v1/topics", "application/json", body, &desc); err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(r.Stdout, desc)
		}
		fmt.Fprintf(r.Stdout, "Created topic %s with %d partition(s).\n", *topic, *partitions)
		return nil
	}
	if wrote, err := changeTopic(r, *dataDir, *topic, false, *asJSON, func(d *localtier.LogDir) error {
		_, err := d.CreateTopic(*topic, *partitions, overrides)
		return err
	}); err != nil || wrote {
		return err
	}
	fmt.Fprintf(r.Stdout, "Created topic %s with %d partition(s).\n", *topic, *partitions)
	return nil
}

// changeTopic applies change to the data dir opened for writing (existing:
// the dir must exist already) and closes it; with asJSON it then writes the
// topic's description as saved and reports that it did.
func changeTopic(r *Runner, dataDir, topic string, existing, asJSON bool, change func(*localtier.LogDir) error) (bool, error) {
	d, err := r.openDataDirForWrite(dataDir, existing)
	if err != nil {
		return false, err
	}
	defer d.Close()
	if err := change(d); err != nil {
		return false, err
	}
	if err := d.Close(); err != nil {
		return false, fmt.Errorf("close data dir: %w", err)
	}
	if !asJSON {
		return false, nil
	}
	desc, err := describeAfterClose(r, dataDir, topic)
	if err != nil {
		return false, err
	}
	return true, writeJSON(r.Stdout, desc)
}

// describeAfterClose reopens the data dir to describe a topic (create and
// alter close first so their changes are durable before they report).
func describeAfterClose(r *Runner, dir, topic string) (topicJSON, error) {
	d, _, err := r.openDataDirReadOnly(dir, r.lockWait())
	if err != nil {
		return topicJSON{}, err
	}
	defer d.Close()
	desc, err := d.DescribeTopic(topic)
	if err != nil {
		return topicJSON{}, err
	}
	return toTopicJSON(desc), d.Close()
}

func runTopicAlter(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("topic alter")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	server := fs.String("server", "", "")
	topic := fs.String("topic", "", "")
	fs.Int("partitions", 0, "")
	var cfgs, dels stringList
	fs.Var(&cfgs, "config", "")
	fs.Var(&dels, "delete-config", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	if err := requireTopic(*topic); err != nil {
		return err
	}
	if setFlags(fs)["partitions"] {
		return usagef("--partitions cannot be changed by topic alter")
	}
	if len(cfgs) == 0 && len(dels) == 0 {
		return usagef("nothing to alter: give --config k=v or --delete-config k")
	}
	set, err := parseConfigs(cfgs)
	if err != nil {
		return err
	}
	for _, k := range dels {
		if _, both := set[k]; both {
			return usagef("--config %s and --delete-config %s cannot be used together", k, k)
		}
	}
	known := topicconfig.Names()
	for _, k := range dels {
		if !slices.Contains(known, k) {
			return fmt.Errorf("--delete-config %s: unknown topic config", k)
		}
	}
	if err := dataDirOrServer(setFlags(fs), *server); err != nil {
		return err
	}
	if *server != "" {
		body, _ := json.Marshal(map[string]any{"set": set, "delete": []string(dels)})
		var desc topicJSON
		if err := serverCall(ctx, *server, http.MethodPatch, "/v1/topics/"+url.PathEscape(*topic)+"/config", "application/json", body, &desc); err != nil {
			return err
		}
		if *asJSON {
			return writeJSON(r.Stdout, desc)
		}
	} else {
		if wrote, err := changeTopic(r, *dataDir, *topic, true, *asJSON, func(d *localtier.LogDir) error {
			return d.AlterTopic(*topic, set, dels)
		}); err != nil || wrote {
			return err
		}
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(set)) {
		parts = append(parts, fmt.Sprintf("set %s=%s", k, set[k]))
	}
	for _, k := range dels {
		parts = append(parts, "deleted "+k)
	}
	fmt.Fprintf(r.Stdout, "Altered topic %s: %s.\n", *topic, strings.Join(parts, ", "))
	return nil
}

// topicJSON is the --json shape of a topic description.
type topicJSON struct {
	Topic      string                    `json:"topic"`
	Partitions []localtier.PartitionDesc `json:"partitions"`
	Configs    []configJSON              `json:"configs"`
}

type configJSON struct {
	Name      string `json:"name"`
	Value     string `json:"value"`
	IsDefault bool   `json:"is_default"`
	Source    string `json:"source"` // "default" or "override"
}

func toTopicJSON(desc localtier.TopicDescription) topicJSON {
	out := topicJSON{Topic: desc.Name, Partitions: desc.Partitions, Configs: []configJSON{}}
	if out.Partitions == nil {
		out.Partitions = []localtier.PartitionDesc{}
	}
	for _, e := range desc.Configs {
		out.Configs = append(out.Configs, configJSON{Name: e.Name, Value: e.Value, IsDefault: e.IsDefault, Source: source(e.IsDefault)})
	}
	return out
}

func source(isDefault bool) string {
	if isDefault {
		return "default"
	}
	return "override"
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func runTopicDescribe(r *Runner, ctx context.Context, args []string) error {
	fs := newFlags("topic describe")
	dataDir := fs.String("data-dir", DefaultDataDir, "")
	server := fs.String("server", "", "")
	topic := fs.String("topic", "", "")
	asJSON := fs.Bool("json", false, "")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if err := noArgs(pos); err != nil {
		return err
	}
	if err := dataDirOrServer(setFlags(fs), *server); err != nil {
		return err
	}
	var descs []topicJSON
	where := *dataDir
	if *server != "" {
		where = *server
		if descs, err = describeOverHTTP(ctx, *server, *topic); err != nil {
			return err
		}
	} else {
		d, err := r.openDataDirForRead(*dataDir, viaServer)
		if err != nil {
			return err
		}
		defer d.Close()
		names := []string{*topic}
		if *topic == "" {
			names = d.Topics()
		}
		for _, n := range names {
			desc, err := d.DescribeTopic(n)
			if err != nil {
				return err
			}
			descs = append(descs, toTopicJSON(desc))
		}
		if err := d.Close(); err != nil {
			return fmt.Errorf("close data dir: %w", err)
		}
	}
	if *asJSON {
		if *topic != "" {
			return writeJSON(r.Stdout, descs[0])
		}
		if descs == nil {
			descs = []topicJSON{}
		}
		return writeJSON(r.Stdout, map[string]any{"topics": descs})
	}
	if len(descs) == 0 {
		fmt.Fprintf(r.Stdout, "No topics in %s.\n", where)
		return nil
	}
	for i, t := range descs {
		if i > 0 {
			fmt.Fprintln(r.Stdout)
		}
		fmt.Fprintf(r.Stdout, "Topic: %s\tPartitionCount: %d\n", t.Topic, len(t.Partitions))
		for _, p := range t.Partitions {
			fmt.Fprintf(r.Stdout, "\tPartition: %d\tLogStartOffset: %d\tLogEndOffset: %d\tSegments: %d\tSize: %d\n",
				p.Partition, p.LogStartOffset, p.LogEndOffset, p.Segments, p.SizeBytes)
		}
		fmt.Fprintln(r.Stdout, "Configs:")
		for _, c := range t.Configs {
			fmt.Fprintf(r.Stdout, "\t%s=%s (%s)\n", c.Name, c.Value, c.Source)
		}
	}
	return nil
}

// describeOverHTTP describes one topic, or every topic, through a serve
// process's HTTP API.
func describeOverHTTP(ctx context.Context, server, topic string) ([]topicJSON, error) {
	names := []string{topic}
	if topic == "" {
		var list struct {
			Topics []struct {
				Topic string `json:"topic"`
			} `json:"topics"`
		}
		if err := serverCall(ctx, server, http.MethodGet, "/v1/topics", "", nil, &list); err != nil {
			return nil, err
		}
		names = names[:0]
		for _, t := range list.Topics {
			names = append(names, t.Topic)
		}
	}
	var out []topicJSON
	for _, n := range names {
		var desc topicJSON
		if err := serverCall(ctx, server, http.MethodGet, "/v1/topics/"+url.PathEscape(n)+"/config", "", nil, &desc); err != nil {
			return nil, err
		}
		out = append(out, desc)
	}
	return out, nil
}
