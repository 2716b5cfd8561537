package httpapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/groupadmin"
	"github.com/tiered/tiered/fetchcache/groups"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/localtier/codec"
	"github.com/tiered/tiered/remotetier/objstore"
)

type liveGroups map[string]groupadmin.Live

func (l liveGroups) LiveGroup(_ context.Context, g string) (groupadmin.Live, bool) {
	v, ok := l[g]
	return v, ok
}

// TestGroupRoutes drives /v1/groups over a local catalog and a memory bucket: list,
// describe, the dry run and the executed reset (to a time, by ListOffsets' rule), the
// refusals (members, another coordinator, a group the principal may not use, no admin),
// delete.
func TestGroupRoutes(t *testing.T) {
	ctx := context.Background()
	e := fetchkit.NewEnv(t)
	e.Topic("orders", 2, nil)
	for p := int32(0); p < 2; p++ {
		e.Produce(e.Log("orders", p), fetchkit.ProduceOpts{Codec: codec.None, Per: 5}, fetchkit.GenRecs(40, ts0, "o"))
	}
	e.Topic("secret", 1, nil) // app may not describe it
	e.Produce(e.Log("secret", 0), fetchkit.ProduceOpts{Codec: codec.None}, fetchkit.GenRecs(40, ts0, "s"))
	store := groups.NewStore(objstore.NewMemory(), groups.StoreOptions{})
	for _, g := range []string{"billing-app", "billing-busy", "other"} {
		if _, err := store.Update(ctx, g, func(o *groups.Object) error {
			o.ProtocolType = "consumer"
			o.Offsets = []groups.Offset{{Topic: "orders", Partition: 0, Offset: 7, LeaderEpoch: -1}, {Topic: "orders", Partition: 1, Offset: 9, LeaderEpoch: -1}}
			if g == "billing-app" {
				o.Offsets = append(o.Offsets, groups.Offset{Topic: "secret", Partition: 0, Offset: 9, LeaderEpoch: -1})
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	live := liveGroups{"billing-busy": {State: groups.StateStable, Members: []groupadmin.Member{{MemberID: "m1",
		Assignment: []groupadmin.TopicPartitions{{Topic: "orders", Partitions: []int32{0, 1}}}}}}}
	gs := &Groups{
		Admin: &groupadmin.Admin{Store: store, Catalog: e.Cat, Live: live},
		Names: func(context.Context) []string { return []string{"billing-busy"} },
		Route: func(g string) (bool, string, string, error) {
			switch g {
			case "elsewhere":
				return false, "10.0.0.2:9092", "http://10.0.0.2:8080", nil
			case "nowhere":
				return false, "", "", errors.New("no live fetch replica")
			}
			return true, "", "", nil
		},
	}
	settings := auth.Settings{
		Tokens: []auth.Token{{Principal: "app", Token: "tok-app"}, {Principal: "ops", Token: "tok-ops"}},
		ACLs: map[string]auth.ACL{
			"app": {Read: []string{"orders"}, Groups: []string{"billing-*"}},
			"ops": {Read: []string{"*"}, Groups: []string{"*"}, Admin: true},
		},
	}
	z, err := auth.NewAuthorizer(settings)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	srv := httptest.NewServer(NewHTTPHandler(HTTPOptions{Catalog: e.Cat, Groups: gs, Auth: z, Logger: slog.New(slog.NewTextHandler(&logs, nil))}))
	defer srv.Close()

	do := func(method, path, token, body string) (int, map[string]any) {
		t.Helper()
		req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			t.Fatalf("%s %s: body: %v", method, path, err)
		}
		return resp.StatusCode, out
	}
	// ts0+10*i is record i's timestamp: T = ts0+125 is offset 13 in both partitions.
	resetBody := `{"topic":"orders","to_datetime":"` + timeRFC(ts0+125) + `"%s}`
	for _, tc := range []struct {
		name, method, path, token, body string
		status                          int
		code                            string
		check                           func(t *testing.T, out map[string]any)
	}{
		{"list filtered by the principal's groups", "GET", "/v1/groups", "tok-app", "", 200, "", func(t *testing.T, out map[string]any) {
			gs := out["groups"].([]any)
			if len(gs) != 2 || gs[0].(map[string]any)["group"] != "billing-app" || gs[1].(map[string]any)["members"].(float64) != 1 {
				t.Fatalf("groups %v", gs)
			}
		}},
		{"list all for admin", "GET", "/v1/groups", "tok-ops", "", 200, "", func(t *testing.T, out map[string]any) {
			if n := len(out["groups"].([]any)); n != 3 {
				t.Fatalf("%d groups", n)
			}
		}},
		{"describe with lag", "GET", "/v1/groups/billing-app", "tok-app", "", 200, "", func(t *testing.T, out map[string]any) {
			// Only the topics the principal may describe (as Kafka's
			// OffsetFetch): not secret's offsets, log end or lag.
			offs := out["offsets"].([]any)
			p0 := offs[0].(map[string]any)
			if len(offs) != 2 || p0["committed"].(float64) != 7 || p0["log_end"].(float64) != 40 || p0["lag"].(float64) != 33 {
				t.Fatalf("offsets %v", offs)
			}
		}},
		{"describe all topics for admin", "GET", "/v1/groups/billing-app", "tok-ops", "", 200, "", func(t *testing.T, out map[string]any) {
			if offs := out["offsets"].([]any); len(offs) != 3 || offs[2].(map[string]any)["topic"] != "secret" {
				t.Fatalf("offsets %v", offs)
			}
		}},
		{"describe a group not allowed", "GET", "/v1/groups/other", "tok-app", "", 403, CodeGroupAuthorizationFailed, nil},
		{"describe unknown", "GET", "/v1/groups/billing-none", "tok-app", "", 404, CodeGroupIDNotFound, nil},
		{"describe elsewhere", "GET", "/v1/groups/elsewhere", "tok-ops", "", 421, CodeNotCoordinator, func(t *testing.T, out map[string]any) {
			if out["coordinator"] != "10.0.0.2:9092" || out["coordinator_http"] != "http://10.0.0.2:8080" {
				t.Fatalf("redirect %v", out)
			}
		}},
		{"describe with no coordinator", "GET", "/v1/groups/nowhere", "tok-ops", "", 503, CodeCoordinatorNotAvailable, nil},
		{"reset needs admin", "POST", "/v1/groups/billing-app/reset-offsets", "tok-app", strings.Replace(resetBody, "%s", "", 1), 403, "CLUSTER_AUTHORIZATION_FAILED", nil},
		{"reset dry run", "POST", "/v1/groups/billing-app/reset-offsets", "tok-ops", strings.Replace(resetBody, "%s", "", 1), 200, "", func(t *testing.T, out map[string]any) {
			offs := out["offsets"].([]any)
			if out["executed"] != false || len(offs) != 2 || offs[0].(map[string]any)["new"].(float64) != 13 {
				t.Fatalf("plan %v", out)
			}
			if o, _ := store.Reload(ctx, "billing-app"); o.Offsets[0].Offset != 7 {
				t.Fatalf("dry run wrote %v", o.Offsets)
			}
		}},
		{"reset with members", "POST", "/v1/groups/billing-busy/reset-offsets", "tok-ops", strings.Replace(resetBody, "%s", `,"execute":true`, 1), 409, CodeNonEmptyGroup, nil},
		{"reset bad body", "POST", "/v1/groups/billing-app/reset-offsets", "tok-ops", `{"topic":"orders","to_earliest":true,"to_latest":true}`, 400, "INVALID_REQUEST", nil},
		{"reset unknown field", "POST", "/v1/groups/billing-app/reset-offsets", "tok-ops", `{"topic":"orders","to_yesterday":true}`, 400, "INVALID_REQUEST", nil},
		{"reset unknown topic", "POST", "/v1/groups/billing-app/reset-offsets", "tok-ops", `{"topic":"nope","to_earliest":true}`, 404, "UNKNOWN_TOPIC_OR_PARTITION", nil},
		{"reset elsewhere", "POST", "/v1/groups/elsewhere/reset-offsets", "tok-ops", `{"topic":"orders","to_earliest":true}`, 421, CodeNotCoordinator, nil},
		{"reset execute", "POST", "/v1/groups/billing-app/reset-offsets", "tok-ops", strings.Replace(resetBody, "%s", `,"execute":true`, 1), 200, "", func(t *testing.T, out map[string]any) {
			o, _ := store.Reload(ctx, "billing-app")
			if out["executed"] != true || o.Offsets[0].Offset != 13 || o.Offsets[1].Offset != 13 {
				t.Fatalf("executed %v, stored %v", out["executed"], o.Offsets)
			}
		}},
		{"list by topic", "GET", "/v1/groups?topic=secret", "tok-ops", "", 200, "", func(t *testing.T, out map[string]any) {
			gs := out["groups"].([]any)
			if len(gs) != 1 || gs[0].(map[string]any)["group"] != "billing-app" || gs[0].(map[string]any)["partitions"].(float64) != 1 {
				t.Fatalf("groups %v", gs)
			}
		}},
		{"list by topic, filtered by the principal's groups", "GET", "/v1/groups?topic=orders", "tok-app", "", 200, "", func(t *testing.T, out map[string]any) {
			if n := len(out["groups"].([]any)); n != 2 {
				t.Fatalf("%d groups: %v", n, out)
			}
		}},
		{"describe by topic", "GET", "/v1/groups/billing-app?topic=secret", "tok-ops", "", 200, "", func(t *testing.T, out map[string]any) {
			if offs := out["offsets"].([]any); len(offs) != 1 || offs[0].(map[string]any)["topic"] != "secret" {
				t.Fatalf("offsets %v", offs)
			}
		}},
		{"delete offsets needs admin", "DELETE", "/v1/groups/billing-app?topic=secret", "tok-app", "", 403, "CLUSTER_AUTHORIZATION_FAILED", func(t *testing.T, _ map[string]any) {
			if o, _ := store.Reload(ctx, "billing-app"); len(o.Offsets) != 3 {
				t.Fatalf("a denied delete changed %v", o.Offsets)
			}
		}},
		{"delete offsets of a subscribed topic", "DELETE", "/v1/groups/billing-busy?topic=orders", "tok-ops", "", 409, CodeGroupSubscribedToTopic, nil},
		{"delete offsets of an unknown topic", "DELETE", "/v1/groups/billing-app?topic=nope", "tok-ops", "", 404, "UNKNOWN_TOPIC_OR_PARTITION", nil},
		{"delete offsets elsewhere", "DELETE", "/v1/groups/elsewhere?topic=orders", "tok-ops", "", 421, CodeNotCoordinator, nil},
		{"delete offsets", "DELETE", "/v1/groups/billing-app?topic=secret", "tok-ops", "", 200, "", func(t *testing.T, out map[string]any) {
			ps := out["partitions"].([]any)
			o, _ := store.Reload(ctx, "billing-app")
			if out["topic"] != "secret" || len(ps) != 1 || ps[0].(float64) != 0 || o == nil || len(o.Offsets) != 2 || o.Offsets[0].Topic != "orders" {
				t.Fatalf("answer %v, stored %+v", out, o)
			}
		}},
		{"delete offsets again", "DELETE", "/v1/groups/billing-app?topic=secret", "tok-ops", "", 200, "", func(t *testing.T, out map[string]any) {
			if ps := out["partitions"].([]any); len(ps) != 0 {
				t.Fatalf("answer %v", out)
			}
		}},
		{"delete with members", "DELETE", "/v1/groups/billing-busy", "tok-ops", "", 409, CodeNonEmptyGroup, nil},
		{"delete", "DELETE", "/v1/groups/other", "tok-ops", "", 200, "", func(t *testing.T, out map[string]any) {
			if o, _ := store.Reload(ctx, "other"); o != nil {
				t.Fatalf("deleted group still has %v", o)
			}
		}},
		{"delete again", "DELETE", "/v1/groups/other", "tok-ops", "", 404, CodeGroupIDNotFound, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, out := do(tc.method, tc.path, tc.token, tc.body)
			if status != tc.status || (tc.code != "" && out["code"] != tc.code) {
				t.Fatalf("%s %s: %d %v, want %d %s", tc.method, tc.path, status, out, tc.status, tc.code)
			}
			if tc.check != nil {
				tc.check(t, out)
			}
		})
	}
	// Deleting one topic's offsets is audited as its own action, on group/topic.
	for _, want := range []string{
		`principal=User:app action=group.delete_offsets target=billing-app/secret result=denied`,
		`principal=User:ops action=group.delete_offsets target=billing-busy/orders result=GROUP_SUBSCRIBED_TO_TOPIC`,
		`principal=User:ops action=group.delete_offsets target=billing-app/secret result=ok`,
	} {
		if !strings.Contains(logs.String(), want) {
			t.Errorf("no audit line %q in\n%s", want, logs.String())
		}
	}
}

func timeRFC(ms int64) string { return time.UnixMilli(ms).UTC().Format(time.RFC3339Nano) }
