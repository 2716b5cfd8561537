package cli

import (
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/groupadmin"
	groupstore "github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/remotetier/objstore"
)

// groupsBucket uploads topic "logs" (offsets 0..2 in the bucket, timestamps
// 1_699_990_000_000 + 2000*i) and commits offset 0 for group "app" (Empty) and offset 1 for
// "busy" (Stable: its coordinator had members).
func groupsBucket(t *testing.T) (bucketURL string, store *groupstore.Store, b objstore.Bucket) {
	t.Helper()
	dir, bucket := rolledWithBucket(t, 4)
	mustRun(t, "", "upload", "--data-dir", dir, "--bucket", fileURL(bucket))
	b, err := objstore.NewFilesystem(bucket)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	store = groupstore.NewStore(b, groupstore.StoreOptions{})
	for g, st := range map[string]string{"app": groupstore.StateEmpty, "busy": groupstore.StateStable} {
		off := int64(0)
		if g == "busy" {
			off = 1
		}
		if _, err := store.Update(context.Background(), g, func(o *groupstore.Object) error {
			o.State, o.ProtocolType = st, "consumer"
			o.Offsets = []groupstore.Offset{{Topic: "logs", Partition: 0, Offset: off, LeaderEpoch: -1}}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	return fileURL(bucket), store, b
}

func TestGroupsBucket(t *testing.T) {
	bucket, store, _ := groupsBucket(t)
	res := mustRun(t, "", "groups", "list", "--bucket", bucket)
	if ls := lines(res.stdout); len(ls) != 3 || !strings.HasPrefix(ls[1], "app ") || !strings.Contains(ls[2], "Stable") {
		t.Fatalf("list:\n%s", res.stdout)
	}
	res = mustRun(t, "", "groups", "describe", "--bucket", bucket, "--group", "app", "--json")
	var d groupadmin.Description
	if err := json.Unmarshal([]byte(res.stdout), &d); err != nil {
		t.Fatal(err)
	}
	if d.Source != "bucket" || len(d.Offsets) != 1 || d.Offsets[0].Committed != 0 || d.Offsets[0].LogEnd != 3 || d.Offsets[0].Lag != 3 {
		t.Fatalf("describe: %+v", d)
	}
	// Record 1 has timestamp ...002000: --to-datetime at it, and one ms after (then record 2).
	for _, tc := range []struct{ at, want string }{{"1699990002000", "1"}, {"2023-11-14T19:26:42.001Z", "2"}} {
		res = mustRun(t, "", "groups", "reset-offsets", "--bucket", bucket, "--group", "app", "--topic", "logs", "--to-datetime", tc.at)
		if ls := lines(res.stdout); len(ls) != 2 || strings.Fields(ls[1])[4] != tc.want || !strings.Contains(res.stderr, "dry run") {
			t.Fatalf("dry run to %s: %q %q", tc.at, res.stdout, res.stderr)
		}
	}
	if o, _ := store.Reload(context.Background(), "app"); o.Offsets[0].Offset != 0 {
		t.Fatalf("the dry run wrote %+v", o.Offsets)
	}
	mustRun(t, "", "groups", "reset-offsets", "--bucket", bucket, "--group", "app", "--topic", "logs", "--to-datetime", "1699990002000", "--execute")
	if o, _ := store.Reload(context.Background(), "app"); o.Offsets[0].Offset != 1 {
		t.Fatalf("after --execute: %+v", o.Offsets)
	}
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"groups", "reset-offsets", "--bucket", bucket, "--group", "busy", "--topic", "logs", "--to-earliest", "--execute"}, 1, "has members"},
		{[]string{"groups", "delete", "--bucket", bucket, "--group", "busy"}, 1, "stop the group's consumers"},
		{[]string{"groups", "describe", "--bucket", bucket, "--group", "nope"}, 1, "group not found"},
		{[]string{"groups", "reset-offsets", "--bucket", bucket, "--group", "app", "--topic", "nope", "--to-earliest"}, 1, "nope"},
		{[]string{"groups", "reset-offsets", "--bucket", bucket, "--group", "app", "--topic", "logs"}, 2, "exactly one of"},
		{[]string{"groups", "reset-offsets", "--bucket", bucket, "--group", "app", "--topic", "logs", "--to-offset", "-1"}, 2, "negative"},
		{[]string{"groups", "reset-offsets", "--bucket", bucket, "--group", "app", "--topic", "logs", "--to-datetime", "yesterday"}, 2, "not an RFC 3339 time"},
		{[]string{"groups", "describe", "--bucket", bucket}, 2, "missing required flag --group"},
		{[]string{"groups", "list", "--bucket", bucket, "--fetch", "http://127.0.0.1:1"}, 2, "only one of"},
		{[]string{"groups", "frobnicate"}, 2, "unknown subcommand"},
	} {
		res := run(t, "", tc.args...)
		if res.code != tc.code || !strings.Contains(res.stderr, tc.msg) {
			t.Errorf("tiered %s: exit %d %q, want %d and %q", strings.Join(tc.args, " "), res.code, res.stderr, tc.code, tc.msg)
		}
	}
	mustRun(t, "", "groups", "delete", "--bucket", bucket, "--group", "app")
	if res = mustRun(t, "", "groups", "list", "--bucket", bucket, "--json"); strings.Contains(res.stdout, `"app"`) {
		t.Fatalf("list after delete: %s", res.stdout)
	}
	if res = mustRun(t, "", "help", "groups"); !strings.Contains(res.stdout, "groups reset-offsets") || !strings.Contains(res.stdout, "--to-datetime TIME") {
		t.Fatalf("help groups: %s", res.stdout)
	}
}

// TestGroupsFetchFollowsCoordinator: over --fetch, a replica that does not coordinate the
// group answers NOT_COORDINATOR with the coordinator's URL and the command repeats its
// request there.
func TestGroupsFetchFollowsCoordinator(t *testing.T) {
	bucket, store, b := groupsBucket(t)
	_ = bucket
	cat, err := fetchcache.NewRemoteCatalog(b, fetchcache.RemoteCatalogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	admin := &groupadmin.Admin{Store: store, Catalog: cat}
	coord := httptest.NewServer(httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: cat, Groups: &httpapi.Groups{Admin: admin}}))
	defer coord.Close()
	other := httptest.NewServer(httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: cat, Groups: &httpapi.Groups{Admin: admin,
		Route: func(string) (bool, string, string, error) { return false, "10.0.0.9:9092", coord.URL, nil }}}))
	defer other.Close()
	res := mustRun(t, "", "groups", "reset-offsets", "--fetch", other.URL, "--group", "app", "--topic", "logs", "--to-latest", "--execute", "--json")
	var plan groupadmin.Plan
	if err := json.Unmarshal([]byte(res.stdout), &plan); err != nil || !plan.Executed || *plan.Offsets[0].New != 3 {
		t.Fatalf("reset through the other replica: %v %s", err, res.stdout)
	}
	if o, _ := store.Reload(context.Background(), "app"); o.Offsets[0].Offset != 3 {
		t.Fatalf("stored %+v", o.Offsets)
	}
	res = mustRun(t, "", "groups", "list", "--fetch", other.URL)
	if !strings.Contains(res.stdout, "busy") {
		t.Fatalf("list: %s", res.stdout)
	}
	// A coordinator whose URL is unknown: a clear error naming it.
	lost := httptest.NewServer(httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: cat, Groups: &httpapi.Groups{Admin: admin,
		Route: func(string) (bool, string, string, error) { return false, "10.0.0.9:9092", "", nil }}}))
	defer lost.Close()
	if res = run(t, "", "groups", "describe", "--fetch", lost.URL, "--group", "app"); res.code != 1 || !strings.Contains(res.stderr, "coordinated by the fetch replica at 10.0.0.9:9092") {
		t.Fatalf("unknown coordinator URL: %d %q", res.code, res.stderr)
	}
}
