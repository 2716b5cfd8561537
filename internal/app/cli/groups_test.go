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

// liveOf is a coordinator's membership for the --fetch tests.
type liveOf map[string]groupadmin.Live

func (l liveOf) LiveGroup(_ context.Context, g string) (groupadmin.Live, bool) {
	v, ok := l[g]
	return v, ok
}

// TestGroupsTopic: --topic on every groups subcommand, over --bucket and over --fetch.
// "app" (Empty) has offsets on logs-0 and on "gone" (a topic no longer served); "busy" has
// logs-0 only and is Stable in the bucket, and through the fetch service has a live member
// assigned logs-0.
func TestGroupsTopic(t *testing.T) {
	for _, via := range []string{"bucket", "fetch"} {
		t.Run(via, func(t *testing.T) {
			bucket, store, b := groupsBucket(t)
			if _, err := store.Update(context.Background(), "app", func(o *groupstore.Object) error {
				o.Offsets = append(o.Offsets, groupstore.Offset{Topic: "gone", Partition: 2, Offset: 5, LeaderEpoch: -1})
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			target := []string{"--bucket", bucket}
			refusal := "has members"
			if via == "fetch" {
				cat, err := fetchcache.NewRemoteCatalog(b, fetchcache.RemoteCatalogOptions{})
				if err != nil {
					t.Fatal(err)
				}
				live := liveOf{"busy": {State: groupstore.StateStable, Members: []groupadmin.Member{{MemberID: "m1",
					Assignment: []groupadmin.TopicPartitions{{Topic: "logs", Partitions: []int32{0}}}}}}}
				srv := httptest.NewServer(httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: cat, Groups: &httpapi.Groups{
					Admin: &groupadmin.Admin{Store: store, Catalog: cat, Live: live},
					Names: func(context.Context) []string { return []string{"busy"} }}}))
				defer srv.Close()
				target = []string{"--fetch", srv.URL}
				refusal = "GROUP_SUBSCRIBED_TO_TOPIC"
			}
			groups := func(sub string, args ...string) []string {
				return append(append([]string{"groups", sub}, target...), args...)
			}
			for _, tc := range []struct {
				name string
				args []string
				code int
				out  []string // in stdout (code 0) or stderr
				not  []string // not in stdout
			}{
				{"list by topic", groups("list", "--topic", "gone"), 0, []string{"app "}, []string{"busy"}},
				{"list by topic json", groups("list", "--topic", "logs", "--json"), 0, []string{`"app"`, `"busy"`}, nil},
				{"list by unknown topic", groups("list", "--topic", "nope"), 0, []string{"GROUP"}, []string{"app", "busy"}},
				{"describe by topic", groups("describe", "--group", "app", "--topic", "gone", "--json"), 0, []string{`"topic": "gone"`}, []string{`"topic": "logs"`}},
				{"describe by topic text", groups("describe", "--group", "app", "--topic", "logs"), 0, []string{"logs "}, []string{"gone"}},
				{"delete offsets of a subscribed topic", groups("delete", "--group", "busy", "--topic", "logs"), 1, []string{refusal}, nil},
				{"delete offsets of an unknown topic", groups("delete", "--group", "app", "--topic", "nope"), 1, []string{"nope"}, nil},
				{"delete offsets of an unknown group", groups("delete", "--group", "nobody", "--topic", "logs"), 1, []string{"group not found"}, nil},
				{"delete offsets", groups("delete", "--group", "app", "--topic", "logs"), 0, []string{"deleted the committed offsets of topic logs from group app (partitions 0)"}, nil},
				{"delete offsets again", groups("delete", "--group", "app", "--topic", "logs", "--json"), 0, []string{`"partitions": []`}, nil},
				{"delete offsets of a topic no longer served", groups("delete", "--group", "app", "--topic", "gone", "--json"), 0, []string{`"partitions": [`, "2"}, nil},
				{"empty topic", groups("delete", "--group", "app", "--topic", ""), 2, []string{"missing required flag --topic"}, nil},
				{"empty topic on list", groups("list", "--topic", ""), 2, []string{"missing required flag --topic"}, nil},
				{"invalid topic on list", groups("list", "--topic", "../x y"), 1, []string{`Topic name "../x y" is illegal`}, nil},
				{"invalid topic on delete", groups("delete", "--group", "app", "--topic", ".."), 1, []string{`Topic name cannot be "." or ".."`}, nil},
			} {
				t.Run(tc.name, func(t *testing.T) {
					res := run(t, "", tc.args...)
					got := res.stdout
					if tc.code != 0 {
						got = res.stderr
					}
					if res.code != tc.code {
						t.Fatalf("tiered %s: exit %d (%q %q), want %d", strings.Join(tc.args, " "), res.code, res.stdout, res.stderr, tc.code)
					}
					for _, w := range tc.out {
						if !strings.Contains(got, w) {
							t.Errorf("tiered %s: %q lacks %q", strings.Join(tc.args, " "), got, w)
						}
					}
					for _, w := range tc.not {
						if strings.Contains(res.stdout, w) {
							t.Errorf("tiered %s: %q has %q", strings.Join(tc.args, " "), res.stdout, w)
						}
					}
				})
			}
			// The group stays, with no offsets left, and busy's offsets were not touched.
			o, err := store.Reload(context.Background(), "app")
			if err != nil || o == nil || len(o.Offsets) != 0 || o.State != groupstore.StateEmpty {
				t.Fatalf("app after: %+v %v", o, err)
			}
			if o, _ := store.Reload(context.Background(), "busy"); o == nil || len(o.Offsets) != 1 {
				t.Fatalf("busy after: %+v", o)
			}
			if res := mustRun(t, "", "help", "groups", "delete"); !strings.Contains(res.stdout, "[--topic T]") || !strings.Contains(res.stdout, "GROUP_SUBSCRIBED_TO_TOPIC") {
				t.Fatalf("help groups delete: %s", res.stdout)
			}
		})
	}
}
