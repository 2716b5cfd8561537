package daemon

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/tiered/tiered/internal/app/config"
)

// startServe runs serve in-process on free ports over a temp data dir.
func startServe(t *testing.T, flags map[string]string) (*Serve, string) {
	t.Helper()
	return startServeWith(t, flags, ServeOptions{})
}

// startServeWith is startServe with o's options (its Config is made from
// flags).
func startServeWith(t *testing.T, flags map[string]string, o ServeOptions) (*Serve, string) {
	t.Helper()
	dir := t.TempDir()
	all := map[string]string{"data-dir": filepath.Join(dir, "data"), "http": "127.0.0.1:0", "kafka": "127.0.0.1:0",
		"broker.log.retention.ms": "3600000", "shutdown_timeout": "10s"}
	for k, v := range flags {
		all[k] = v
	}
	cfg, err := config.Load(config.LoadOptions{Flags: all, Process: config.ProcessServe})
	if err != nil {
		t.Fatal(err)
	}
	o.Config = cfg
	s, err := NewServe(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve stopped with %v", err)
		}
	})
	select {
	case <-s.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("serve not ready in 10s")
	}
	return s, "http://" + s.HTTPAddr()
}

type answer struct {
	status int
	body   string
}

func call(t *testing.T, method, url, body string) answer {
	t.Helper()
	return callWith(t, "", method, url, body)
}

// callWith is call with "Authorization: Bearer <token>" unless token is "".
func callWith(t *testing.T, token, method, url, body string) answer {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return answer{resp.StatusCode, string(b)}
}

func configOf(t *testing.T, body, name string) ConfigEntry {
	t.Helper()
	var d TopicDescription
	if err := json.Unmarshal([]byte(body), &d); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	for _, c := range d.Configs {
		if c.Name == name {
			return c
		}
	}
	t.Fatalf("no config %s in %s", name, body)
	return ConfigEntry{}
}

// TestServeHTTPAPI drives the topic admin and produce endpoints: status
// codes and Kafka error names, config sources, the flush promise and reload.
func TestServeHTTPAPI(t *testing.T) {
	s, base := startServe(t, nil)

	tests := []struct {
		name, method, path, body string
		status                   int
		want                     string
	}{
		{"create", "POST", "/v1/topics", `{"topic":"orders","partitions":2,"configs":{"segment.ms":"60000"}}`, 201, `"source":"override"`},
		{"create_again", "POST", "/v1/topics", `{"topic":"orders"}`, 409, `"code":"TOPIC_ALREADY_EXISTS"`},
		{"create_bad_config", "POST", "/v1/topics", `{"topic":"x","configs":{"retention.ms":"soon","nope":"1"}}`, 400, `Unknown topic config name: nope`},
		{"create_bad_name", "POST", "/v1/topics", `{"topic":"a/b"}`, 400, `"code":"INVALID_TOPIC_EXCEPTION"`},
		{"create_collides", "POST", "/v1/topics", `{"topic":"ord.ers"}`, 201, ``},
		{"create_collision", "POST", "/v1/topics", `{"topic":"ord_ers"}`, 400, `collides`},
		{"create_bad_json", "POST", "/v1/topics", `{"topic":"y","extra":1}`, 400, `"code":"INVALID_REQUEST"`},
		{"create_bad_partitions", "POST", "/v1/topics", `{"topic":"y","partitions":-1}`, 400, `"code":"INVALID_PARTITIONS"`},
		{"describe_unknown", "GET", "/v1/topics/nope/config", ``, 404, `"code":"UNKNOWN_TOPIC_OR_PARTITION"`},
		{"alter", "PATCH", "/v1/topics/orders/config", `{"set":{"flush.messages":"1"},"delete":["segment.ms"]}`, 200, `"name":"flush.messages","value":"1"`},
		{"alter_invalid", "PATCH", "/v1/topics/orders/config", `{"set":{"local.retention.ms":"7200000"}}`, 400, `"code":"INVALID_CONFIG"`},
		{"alter_nothing", "PATCH", "/v1/topics/orders/config", `{}`, 400, `nothing to alter`},
		{"produce_keyed", "POST", "/v1/topics/orders/records", "{\"key\":\"a\",\"value\":\"1\"}\n{\"key\":\"b\",\"value\":\"2\"}\n", 200, `"records":2`},
		{"produce_partition", "POST", "/v1/topics/orders/partitions/1/records", "{\"value\":\"x\"}\n", 200, `"partition":1`},
		{"produce_bad_line", "POST", "/v1/topics/orders/partitions/0/records", "{\"value\":\"x\"}\n{oops\n", 400, `line 2: invalid JSON`},
		{"produce_unknown_partition", "POST", "/v1/topics/orders/partitions/7/records", "{\"value\":\"x\"}\n", 404, `UNKNOWN_TOPIC_OR_PARTITION`},
		{"produce_no_auto_create", "POST", "/v1/topics/fresh/records?auto_create=false", "{\"value\":\"x\"}\n", 404, `unknown topic`},
		{"produce_auto_create", "POST", "/v1/topics/fresh/records", "{\"value\":\"x\"}\n", 200, `"created":true`},
		{"produce_timestamp_max_int64", "POST", "/v1/topics/orders/partitions/0/records", "{\"value\":\"x\",\"timestamp\":9223372036854775807}\n", 400, `"code":"INVALID_TIMESTAMP"`},
		{"produce_bad_query", "POST", "/v1/topics/fresh/records?sync=1", "{\"value\":\"x\"}\n", 400, `unknown or bad query parameter`},
		{"reload", "POST", "/v1/admin/reload", ``, 200, `reloaded`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := call(t, tt.method, base+tt.path, tt.body)
			if a.status != tt.status || !strings.Contains(a.body, tt.want) {
				t.Fatalf("%s %s: %d %s; want %d containing %q", tt.method, tt.path, a.status, a.body, tt.status, tt.want)
			}
		})
	}
	// A broker-wide default shows as such; flush.messages=1 made every
	// append durable in Append itself, so no acknowledgement flush ran.
	a := call(t, "GET", base+"/v1/topics/orders/config", "")
	if c := configOf(t, a.body, "retention.ms"); c.Source != config.LayerBroker || c.Value != "3600000" || !c.IsDefault {
		t.Fatalf("retention.ms %+v", c)
	}
	if c := configOf(t, a.body, "segment.ms"); c.Source != config.LayerDefault {
		t.Fatalf("deleted segment.ms %+v", c)
	}
	if got := testutil.ToFloat64(s.local.flushes); got != 0 {
		t.Fatalf("%v acknowledgement flushes for a flush.messages=1 topic", got)
	}
	if got := testutil.ToFloat64(s.local.appendedRecords); got != 4 {
		t.Fatalf("appended records %v, want 4", got)
	}
	// flush.ms set (not due): the append is flushed before the answer.
	if a := call(t, "PATCH", base+"/v1/topics/orders/config", `{"set":{"flush.ms":"3600000"},"delete":["flush.messages"]}`); a.status != 200 {
		t.Fatal(a)
	}
	if a := call(t, "POST", base+"/v1/topics/orders/partitions/0/records", "{\"value\":\"y\"}\n"); a.status != 200 {
		t.Fatal(a)
	}
	l, _ := s.LogDir().Partition("orders", 0)
	if got := testutil.ToFloat64(s.local.flushes); got != 1 || l.RecoveryPoint() != l.LogEndOffset() {
		t.Fatalf("flushes %v, recovery point %d of %d: the acknowledged append is not durable", got, l.RecoveryPoint(), l.LogEndOffset())
	}
	// Kafka's defaults: acknowledged from the page cache, no flush.
	if a := call(t, "POST", base+"/v1/topics/fresh/records", "{\"value\":\"z\"}\n"); a.status != 200 {
		t.Fatal(a)
	}
	if got := testutil.ToFloat64(s.local.flushes); got != 1 {
		t.Fatalf("flushes %v after an append to a topic with the default flush policy", got)
	}
}
