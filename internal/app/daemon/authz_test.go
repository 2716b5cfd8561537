package daemon

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// The principals of the authorization tests, each with a bearer token and a
// SASL/PLAIN password: reader may read alpha (the list form), writer may
// produce to it and to new-*, admin may administer, nobody has no ACL entry;
// reader may use the consumer groups g-*, admin every group.
var authzPrincipals = []string{"reader", "writer", "admin", "nobody"}

func authzToken(p string) string    { return "tok-authz-" + p + "-3f9c2a7e" }
func authzPassword(p string) string { return "pw-authz-" + p + "-8d1b6e4c" }

// authzFlags configure serve with the principals above.
func authzFlags() map[string]string {
	var tokens, users []string
	for _, p := range authzPrincipals {
		tokens = append(tokens, fmt.Sprintf("{principal: %s, token: %s}", p, authzToken(p)))
		users = append(users, fmt.Sprintf("{username: %s, password: %s}", p, authzPassword(p)))
	}
	return map[string]string{
		"auth.tokens":     "[" + strings.Join(tokens, ", ") + "]",
		"auth.sasl_plain": "[" + strings.Join(users, ", ") + "]",
		"auth.acls":       "{reader: {read: [alpha], groups: [g-*]}, writer: {write: [alpha, new-*]}, admin: {admin: true, groups: ['*']}}",
	}
}

// callAs is call with principal's bearer token ("" for none).
func callAs(t *testing.T, principal, method, url, body string) answer {
	t.Helper()
	token := ""
	if principal != "" {
		token = authzToken(principal)
	}
	return callWith(t, token, method, url, body)
}

// startAuthzServe runs serve with auth and a topic alpha holding a record.
func startAuthzServe(t *testing.T) (*Serve, string, *fetchkit.LogCapture) {
	t.Helper()
	logs := &fetchkit.LogCapture{}
	s, base := startServeWith(t, authzFlags(), ServeOptions{Logger: logs.Logger()})
	if a := callAs(t, "admin", "POST", base+"/v1/topics", `{"topic":"alpha"}`); a.status != 201 {
		t.Fatalf("admin creates alpha: %+v", a)
	}
	if a := callAs(t, "writer", "POST", base+"/v1/topics/alpha/partitions/0/records", "{\"value\":\"v0\"}\n"); a.status != 200 {
		t.Fatalf("writer produces to alpha: %+v", a)
	}
	return s, base, logs
}

// A principal allowed to read alpha could set its retention to 1 s (and
// lose its segments, local and remote): the alter is now refused before
// the body is read, nothing changes, and the refusal is audited.
func TestReadOnlyPrincipalCannotAlterTopic(t *testing.T) {
	s, base, logs := startAuthzServe(t)
	for _, body := range []string{`{"retention.ms":"1000"}`, `{"set":{"retention.ms":"1000"}}`} {
		a := callAs(t, "reader", "PATCH", base+"/v1/topics/alpha/config", body)
		if a.status != http.StatusForbidden || !strings.Contains(a.body, `"code":"CLUSTER_AUTHORIZATION_FAILED"`) {
			t.Fatalf("reader alters alpha with %s: %+v, want 403 CLUSTER_AUTHORIZATION_FAILED", body, a)
		}
	}
	desc := callAs(t, "reader", "GET", base+"/v1/topics/alpha/config", "")
	if c := configOf(t, desc.body, "retention.ms"); c.Source == "override" || c.Value == "1000" {
		t.Fatalf("retention.ms after the refused alter: %+v", c)
	}
	if tc, _ := s.LogDir().Topic("alpha"); len(tc.Overrides) != 0 {
		t.Fatalf("alpha has overrides after the refused alter: %v", tc.Overrides)
	}
	if l := logs.Lines("level=INFO", "msg=audit", "principal=User:reader", "action=topic.alter", "target=alpha", "result=denied"); len(l) != 2 {
		t.Fatalf("audit lines of the refused alters: %q\n%s", l, logs)
	}
	// The admin may, and that is audited too.
	if a := callAs(t, "admin", "PATCH", base+"/v1/topics/alpha/config", `{"set":{"retention.ms":"3600000"}}`); a.status != 200 {
		t.Fatalf("admin alters alpha: %+v", a)
	}
	if l := logs.Lines("msg=audit", "principal=User:admin", "action=topic.alter", "target=alpha", "result=ok"); len(l) != 1 {
		t.Fatalf("audit line of the alter: %q\n%s", l, logs)
	}
	if l := logs.Lines("msg=audit", "principal=User:admin", "action=topic.create", "target=alpha", "result=ok"); len(l) != 1 {
		t.Fatalf("audit line of the create: %q\n%s", l, logs)
	}
}

// A principal without an ACL entry created topics and reloaded serve.
func TestPrincipalWithoutACLCannotAdminister(t *testing.T) {
	s, base, logs := startAuthzServe(t)
	for _, p := range []string{"nobody", "reader", "writer"} {
		if a := callAs(t, p, "POST", base+"/v1/topics", `{"topic":"made-by-`+p+`"}`); a.status != http.StatusForbidden || !strings.Contains(a.body, "CLUSTER_AUTHORIZATION_FAILED") {
			t.Fatalf("%s creates a topic: %+v, want 403", p, a)
		}
		if _, ok := s.LogDir().Topic("made-by-" + p); ok {
			t.Fatalf("%s's refused create made the topic", p)
		}
		if a := callAs(t, p, "POST", base+"/v1/admin/reload", ""); a.status != http.StatusForbidden || !strings.Contains(a.body, "CLUSTER_AUTHORIZATION_FAILED") {
			t.Fatalf("%s reloads: %+v, want 403", p, a)
		}
		if l := logs.Lines("msg=audit", "principal=User:"+p, "action=reload", "target=config", "result=denied"); len(l) != 1 {
			t.Fatalf("audit line of %s's refused reload: %q\n%s", p, l, logs)
		}
		if l := logs.Lines("msg=audit", "principal=User:"+p, "action=topic.create", "result=denied"); len(l) != 1 {
			t.Fatalf("audit line of %s's refused create: %q\n%s", p, l, logs)
		}
	}
	// A writer's produce to a missing topic it may write does not create
	// it: creating is administration.
	if a := callAs(t, "writer", "POST", base+"/v1/topics/new-1/records", "{\"value\":\"x\"}\n"); a.status != http.StatusNotFound {
		t.Fatalf("writer produces to the missing new-1: %+v, want 404", a)
	}
	if _, ok := s.LogDir().Topic("new-1"); ok {
		t.Fatal("a writer's produce created new-1")
	}
	if a := callAs(t, "admin", "POST", base+"/v1/admin/reload", ""); a.status != 200 {
		t.Fatalf("admin reloads: %+v", a)
	}
	if l := logs.Lines("level=INFO", "msg=audit", "principal=User:admin", "action=reload", "target=config", "result=ok"); len(l) != 1 {
		t.Fatalf("audit line of the reload: %q\n%s", l, logs)
	}
}

// A topic made by produce's auto-creation is a create: audited once.
func TestAutoCreateIsAudited(t *testing.T) {
	logs := &fetchkit.LogCapture{}
	_, base := startServeWith(t, nil, ServeOptions{Logger: logs.Logger()})
	for i := 0; i < 2; i++ {
		if a := call(t, "POST", base+"/v1/topics/fresh/records", "{\"value\":\"x\"}\n"); a.status != 200 {
			t.Fatalf("produce %d: %+v", i, a)
		}
	}
	if l := logs.Lines("level=INFO", "msg=audit", "principal=User:ANONYMOUS", "action=topic.create", "target=fresh", "result=ok"); len(l) != 1 {
		t.Fatalf("audit lines of the auto-creation: %q\n%s", l, logs)
	}
}

// serve's /metrics answered every authenticated principal (the issue saw
// topic names there): only an admin may read it now.
func TestServeMetricsNeedAdmin(t *testing.T) {
	_, base, _ := startAuthzServe(t)
	for _, p := range []string{"reader", "writer", "nobody"} {
		a := callAs(t, p, "GET", base+"/metrics", "")
		if a.status != http.StatusForbidden || strings.Contains(a.body, "alpha") || strings.Contains(a.body, "tiered_") {
			t.Fatalf("%s reads /metrics: %d %s", p, a.status, a.body)
		}
	}
	if a := callAs(t, "", "GET", base+"/metrics", ""); a.status != http.StatusUnauthorized {
		t.Fatalf("/metrics without a token: %+v", a)
	}
	if a := callAs(t, "admin", "GET", base+"/metrics", ""); a.status != 200 || !strings.Contains(a.body, "tiered_fetch_requests_total") {
		t.Fatalf("admin reads /metrics: %d\n%s", a.status, a.body)
	}
}

// httpCase is one route of the matrix: a request to it and the status each
// caller gets: no token, reader, writer, admin, nobody, and anonymous on
// serve without auth.
type httpCase struct {
	method, path, body string
	want               [6]int
}

// httpMatrix has a row for every route serve registers (httpapi.Routes);
// {principal} in a path or body is replaced by the caller's name.
var httpMatrix = map[string]httpCase{
	"GET /v1/topics": {"GET", "/v1/topics", "", [6]int{401, 200, 200, 200, 200, 200}},
	"GET /v1/topics/{topic}/partitions/{partition}": {"GET", "/v1/topics/alpha/partitions/0", "",
		[6]int{401, 200, 403, 403, 403, 200}},
	"GET /v1/topics/{topic}/partitions/{partition}/records": {"GET", "/v1/topics/alpha/partitions/0/records", "",
		[6]int{401, 200, 403, 403, 403, 200}},
	"GET /metrics": {"GET", "/metrics", "", [6]int{401, 403, 403, 200, 403, 200}},
	"GET /healthz": {"GET", "/healthz", "", [6]int{200, 200, 200, 200, 200, 200}},
	"GET /readyz":  {"GET", "/readyz", "", [6]int{200, 200, 200, 200, 200, 200}},
	"POST /v1/topics": {"POST", "/v1/topics", `{"topic":"made-by-{principal}"}`,
		[6]int{401, 403, 403, 201, 403, 201}},
	"GET /v1/topics/{topic}/config": {"GET", "/v1/topics/alpha/config", "", [6]int{401, 200, 200, 200, 403, 200}},
	"PATCH /v1/topics/{topic}/config": {"PATCH", "/v1/topics/alpha/config", `{"set":{"flush.messages":"1000"}}`,
		[6]int{401, 403, 403, 200, 403, 200}},
	"POST /v1/topics/{topic}/records": {"POST", "/v1/topics/alpha/records", "{\"value\":\"{principal}\"}\n",
		[6]int{401, 403, 200, 403, 403, 200}},
	"POST /v1/topics/{topic}/partitions/{partition}/records": {"POST", "/v1/topics/alpha/partitions/0/records", "{\"value\":\"{principal}\"}\n",
		[6]int{401, 403, 200, 403, 403, 200}},
	"POST /v1/admin/reload": {"POST", "/v1/admin/reload", "", [6]int{401, 403, 403, 200, 403, 200}},
	"/":                     {"GET", "/no/such/path", "", [6]int{401, 404, 404, 404, 404, 404}},
	// The group administration: list for every reader (filtered by the principal's groups
	// patterns), describe only for a principal whose patterns allow the group (or admin;
	// "ghost" has no object: 404), reset and delete for admin.
	"GET /v1/groups":         {"GET", "/v1/groups", "", [6]int{401, 200, 200, 200, 200, 200}},
	"GET /v1/groups/{group}": {"GET", "/v1/groups/ghost", "", [6]int{401, 403, 403, 404, 403, 404}},
	"POST /v1/groups/{group}/reset-offsets": {"POST", "/v1/groups/ghost/reset-offsets", `{"topic":"alpha","to_earliest":true}`,
		[6]int{401, 403, 403, 200, 403, 200}},
	"DELETE /v1/groups/{group}": {"DELETE", "/v1/groups/ghost", "", [6]int{401, 403, 403, 404, 403, 404}},
}

// callers are the matrix's columns: "" is no token (or no SASL).
var callers = append([]string{""}, authzPrincipals...)

// TestAuthorizationMatrixHTTP sends every route serve registers as each
// caller and checks the status; a route without a row fails.
func TestAuthorizationMatrixHTTP(t *testing.T) {
	_, base, _ := startAuthzServe(t)
	_, open := startServe(t, nil)
	if a := call(t, "POST", open+"/v1/topics", `{"topic":"alpha"}`); a.status != 201 {
		t.Fatalf("create alpha without auth: %+v", a)
	}
	if a := call(t, "POST", open+"/v1/topics/alpha/records", "{\"value\":\"v0\"}\n"); a.status != 200 {
		t.Fatalf("produce without auth: %+v", a)
	}
	routes := httpapi.Routes(httpapi.HTTPOptions{Writer: serveWriter{}, Gatherer: prometheus.NewRegistry(), Groups: &httpapi.Groups{}})
	seen := map[string]bool{}
	for _, rt := range routes {
		seen[rt.Pattern] = true
		tc, ok := httpMatrix[rt.Pattern]
		if !ok {
			t.Errorf("route %q (needs %s) has no row in the authorization matrix", rt.Pattern, rt.Perm)
			continue
		}
		for i, who := range append(callers, "auth-off") {
			name := who
			if name == "" {
				name = "no-token"
			}
			t.Run(rt.Pattern+"/"+name, func(t *testing.T) {
				body := strings.ReplaceAll(tc.body, "{principal}", name)
				var a answer
				if who == "auth-off" {
					a = call(t, tc.method, open+tc.path, body)
				} else {
					a = callAs(t, who, tc.method, base+tc.path, body)
				}
				if a.status != tc.want[i] {
					t.Fatalf("%s %s as %s: %d %s, want %d", tc.method, tc.path, name, a.status, a.body, tc.want[i])
				}
			})
		}
	}
	for p := range httpMatrix {
		if !seen[p] {
			t.Errorf("matrix row %q names no route", p)
		}
	}
}

// kafkaCase is one API of the matrix: a request and the answer each caller
// gets (the error code of its first topic or partition, or "closed"): no
// SASL, reader, writer, admin, nobody, and anonymous on serve without auth
// ("" where the API is not served without auth).
type kafkaCase struct {
	req  func() kmsg.Request
	want [6]string
}

const (
	kOK     = "OK"
	kClosed = "closed"
	kTAF    = "TOPIC_AUTHORIZATION_FAILED"
	kPolicy = "POLICY_VIOLATION"
	kSASL   = "ILLEGAL_SASL_STATE"
	kGAF    = "GROUP_AUTHORIZATION_FAILED"
	kMIR    = "MEMBER_ID_REQUIRED"
	kUMI    = "UNKNOWN_MEMBER_ID"
	kGNF    = "GROUP_ID_NOT_FOUND"
)

// The consumer-group rows' groups: g-1 (joined and committed to), g-del
// (never used: deleting it finds nothing).
const (
	authzGroup    = "g-1"
	authzDelGroup = "g-del"
)

// kafkaMatrix has a row for every API the Kafka listener registers
// (kafkasrv.APIs).
var kafkaMatrix = map[int16]kafkaCase{
	kmsg.Produce.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrProduceRequest()
		q.Version, q.Acks, q.TimeoutMillis = 9, -1, 1000
		qt := kmsg.NewProduceRequestTopic()
		qt.Topic = "alpha"
		qt.Partitions = []kmsg.ProduceRequestTopicPartition{kmsg.NewProduceRequestTopicPartition()}
		q.Topics = append(q.Topics, qt)
		return q
	}, [6]string{kClosed, kTAF, kPolicy, kTAF, kTAF, kPolicy}},
	kmsg.Fetch.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrFetchRequest()
		q.Version, q.MaxBytes, q.SessionEpoch, q.ReplicaID = 12, 1<<20, -1, -1
		qt := kmsg.NewFetchRequestTopic()
		qt.Topic = "alpha"
		qp := kmsg.NewFetchRequestTopicPartition()
		qp.PartitionMaxBytes = 1 << 20
		qt.Partitions = append(qt.Partitions, qp)
		q.Topics = append(q.Topics, qt)
		return q
	}, [6]string{kClosed, kOK, kTAF, kTAF, kTAF, kOK}},
	kmsg.ListOffsets.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrListOffsetsRequest()
		q.Version, q.ReplicaID = 7, -1
		qt := kmsg.NewListOffsetsRequestTopic()
		qt.Topic = "alpha"
		qp := kmsg.NewListOffsetsRequestTopicPartition()
		qp.Timestamp = -1
		qt.Partitions = append(qt.Partitions, qp)
		q.Topics = append(q.Topics, qt)
		return q
	}, [6]string{kClosed, kOK, kTAF, kTAF, kTAF, kOK}},
	kmsg.Metadata.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrMetadataRequest()
		q.Version = 12
		qt := kmsg.NewMetadataRequestTopic()
		topic := "alpha"
		qt.Topic = &topic
		q.Topics = append(q.Topics, qt)
		return q
	}, [6]string{kClosed, kOK, kOK, kOK, kTAF, kOK}},
	kmsg.ApiVersions.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrApiVersionsRequest()
		q.Version, q.ClientSoftwareName, q.ClientSoftwareVersion = 3, "authz-matrix", "1"
		return q
	}, [6]string{kOK, kOK, kOK, kOK, kOK, kOK}},
	kmsg.FindCoordinator.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrFindCoordinatorRequest()
		q.Version, q.CoordinatorKeys = 6, []string{authzGroup}
		return q
	}, [6]string{kClosed, kOK, kGAF, kOK, kGAF, kOK}},
	kmsg.JoinGroup.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrJoinGroupRequest()
		q.Version, q.Group, q.SessionTimeoutMillis, q.RebalanceTimeoutMillis = 9, authzGroup, 10000, 10000
		q.ProtocolType = "consumer"
		q.Protocols = []kmsg.JoinGroupRequestProtocol{{Name: "range", Metadata: []byte{}}}
		return q
	}, [6]string{kClosed, kMIR, kGAF, kMIR, kGAF, kMIR}},
	kmsg.SyncGroup.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrSyncGroupRequest()
		q.Version, q.Group, q.MemberID, q.Generation = 5, authzGroup, "m", 1
		return q
	}, [6]string{kClosed, kUMI, kGAF, kUMI, kGAF, kUMI}},
	kmsg.Heartbeat.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrHeartbeatRequest()
		q.Version, q.Group, q.MemberID, q.Generation = 4, authzGroup, "m", 1
		return q
	}, [6]string{kClosed, kUMI, kGAF, kUMI, kGAF, kUMI}},
	kmsg.LeaveGroup.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrLeaveGroupRequest()
		q.Version, q.Group = 5, authzGroup
		q.Members = []kmsg.LeaveGroupRequestMember{{MemberID: "m"}}
		return q
	}, [6]string{kClosed, kUMI, kGAF, kUMI, kGAF, kUMI}},
	kmsg.OffsetCommit.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrOffsetCommitRequest()
		q.Version, q.Group, q.Generation = 9, authzGroup, -1
		q.Topics = []kmsg.OffsetCommitRequestTopic{{Topic: "alpha", Partitions: []kmsg.OffsetCommitRequestTopicPartition{{Partition: 0, Offset: 1, LeaderEpoch: -1}}}}
		return q
	}, [6]string{kClosed, kOK, kGAF, kTAF, kGAF, kOK}}, // admin may use the group but not read alpha
	kmsg.OffsetFetch.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrOffsetFetchRequest()
		q.Version = 9
		q.Groups = []kmsg.OffsetFetchRequestGroup{{Group: authzGroup, MemberEpoch: -1, Topics: []kmsg.OffsetFetchRequestGroupTopic{{Topic: "alpha", Partitions: []int32{0}}}}}
		return q
	}, [6]string{kClosed, kOK, kGAF, kOK, kGAF, kOK}}, // describe on alpha: admin has it
	kmsg.DescribeGroups.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrDescribeGroupsRequest()
		q.Version, q.Groups = 5, []string{authzGroup}
		return q
	}, [6]string{kClosed, kOK, kGAF, kOK, kGAF, kOK}},
	kmsg.ListGroups.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrListGroupsRequest()
		q.Version = 5
		return q
	}, [6]string{kClosed, kOK, kOK, kOK, kOK, kOK}}, // lists only the groups the principal may use
	kmsg.DeleteGroups.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrDeleteGroupsRequest()
		q.Version, q.Groups = 2, []string{authzDelGroup}
		return q
	}, [6]string{kClosed, kGAF, kGAF, kGNF, kGAF, kGNF}}, // needs admin
	kmsg.OffsetDelete.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrOffsetDeleteRequest()
		q.Group = authzDelGroup
		q.Topics = []kmsg.OffsetDeleteRequestTopic{{Topic: "alpha", Partitions: []kmsg.OffsetDeleteRequestTopicPartition{{Partition: 0}}}}
		return q
	}, [6]string{kClosed, kGAF, kGAF, kGNF, kGAF, kGNF}}, // needs admin
	kmsg.SASLHandshake.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrSASLHandshakeRequest()
		q.Version, q.Mechanism = 1, kafkasrv.MechanismPLAIN
		return q
	}, [6]string{kOK, kSASL, kSASL, kSASL, kSASL, ""}}, // a second handshake is out of order
	kmsg.SASLAuthenticate.Int16(): {func() kmsg.Request {
		q := kmsg.NewPtrSASLAuthenticateRequest()
		q.Version, q.SASLAuthBytes = 2, []byte("\x00reader\x00"+authzPassword("reader"))
		return q
	}, [6]string{kSASL, kSASL, kSASL, kSASL, kSASL, ""}}, // no handshake before it
}

// kafkaOutcome is the error code of the first topic or partition of r (the
// top-level one for APIs without topics).
func kafkaOutcome(r kmsg.Response) string {
	var code int16
	switch r := r.(type) {
	case *kmsg.ProduceResponse:
		code = r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.FetchResponse:
		code = r.ErrorCode
		if code == 0 {
			code = r.Topics[0].Partitions[0].ErrorCode
		}
	case *kmsg.ListOffsetsResponse:
		code = r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.MetadataResponse:
		code = r.Topics[0].ErrorCode
	case *kmsg.ApiVersionsResponse:
		code = r.ErrorCode
	case *kmsg.SASLHandshakeResponse:
		code = r.ErrorCode
	case *kmsg.SASLAuthenticateResponse:
		code = r.ErrorCode
	case *kmsg.FindCoordinatorResponse:
		code = r.Coordinators[0].ErrorCode
	case *kmsg.JoinGroupResponse:
		code = r.ErrorCode
	case *kmsg.SyncGroupResponse:
		code = r.ErrorCode
	case *kmsg.HeartbeatResponse:
		code = r.ErrorCode
	case *kmsg.LeaveGroupResponse:
		code = r.ErrorCode
		if code == 0 {
			code = r.Members[0].ErrorCode
		}
	case *kmsg.OffsetCommitResponse:
		code = r.Topics[0].Partitions[0].ErrorCode
	case *kmsg.OffsetFetchResponse:
		code = r.Groups[0].ErrorCode
		if code == 0 {
			code = r.Groups[0].Topics[0].Partitions[0].ErrorCode
		}
	case *kmsg.DescribeGroupsResponse:
		code = r.Groups[0].ErrorCode
	case *kmsg.ListGroupsResponse:
		code = r.ErrorCode
	case *kmsg.DeleteGroupsResponse:
		code = r.Groups[0].ErrorCode
	case *kmsg.OffsetDeleteResponse:
		code = r.ErrorCode
		if code == 0 {
			code = r.Topics[0].Partitions[0].ErrorCode
		}
	default:
		return fmt.Sprintf("no outcome for %T", r)
	}
	if code == 0 {
		return kOK
	}
	if e := kerr.ErrorForCode(code); e != nil {
		var ke *kerr.Error
		if errors.As(e, &ke) {
			return ke.Message
		}
	}
	return fmt.Sprintf("error code %d", code)
}

// kafkaAs sends req on a new connection to addr, after a SASL/PLAIN login
// as principal unless principal is "".
func kafkaAs(t *testing.T, addr, principal string, req kmsg.Request) string {
	t.Helper()
	c := fetchkit.DialRaw(t, addr)
	corr := int32(0)
	if principal != "" {
		hs := kmsg.NewPtrSASLHandshakeRequest()
		hs.Version, hs.Mechanism = 1, kafkasrv.MechanismPLAIN
		hsr := kmsg.NewPtrSASLHandshakeResponse()
		corr++
		if err := c.Request(corr, hs, hsr); err != nil || hsr.ErrorCode != 0 {
			t.Fatalf("SASL handshake: %v, code %d", err, hsr.ErrorCode)
		}
		au := kmsg.NewPtrSASLAuthenticateRequest()
		au.Version, au.SASLAuthBytes = 2, []byte("\x00"+principal+"\x00"+authzPassword(principal))
		aur := kmsg.NewPtrSASLAuthenticateResponse()
		corr++
		if err := c.Request(corr, au, aur); err != nil || aur.ErrorCode != 0 {
			t.Fatalf("SASL authenticate as %s: %v, code %d", principal, err, aur.ErrorCode)
		}
	}
	resp := req.ResponseKind()
	corr++
	if err := c.Request(corr, req, resp); err != nil {
		return kClosed
	}
	return kafkaOutcome(resp)
}

// TestAuthorizationMatrixKafka sends every API the Kafka listener
// registers as each caller over SASL/PLAIN and checks the answer; an API
// without a row fails.
func TestAuthorizationMatrixKafka(t *testing.T) {
	s, _, _ := startAuthzServe(t)
	open, openBase := startServe(t, nil)
	if a := call(t, "POST", openBase+"/v1/topics", `{"topic":"alpha"}`); a.status != 201 {
		t.Fatalf("create alpha without auth: %+v", a)
	}
	seen := map[int16]bool{}
	for _, api := range kafkasrv.APIs() {
		seen[api.Key] = true
		tc, ok := kafkaMatrix[api.Key]
		if !ok {
			t.Errorf("Kafka API %s (key %d, needs %s) has no row in the authorization matrix", api.Name, api.Key, api.Perm)
			continue
		}
		for i, who := range append(callers, "auth-off") {
			name := who
			if name == "" {
				name = "no-sasl"
			}
			if who == "auth-off" && tc.want[i] == "" {
				continue // not served without SASL
			}
			t.Run(api.Name+"/"+name, func(t *testing.T) {
				var got string
				if who == "auth-off" {
					got = kafkaAs(t, open.KafkaAddr(), "", tc.req())
				} else {
					got = kafkaAs(t, s.KafkaAddr(), who, tc.req())
				}
				if got != tc.want[i] {
					t.Fatalf("%s as %s: %s, want %s", api.Name, name, got, tc.want[i])
				}
			})
		}
	}
	for k := range kafkaMatrix {
		if !seen[k] {
			t.Errorf("matrix row for API key %d names no registered API", k)
		}
	}
}

// TestREADMEPermissions checks the README's permission tables against the
// route table and the Kafka registry: a route or API it leaves out, or
// whose permission it misstates, fails.
func TestREADMEPermissions(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for _, rt := range httpapi.Routes(httpapi.HTTPOptions{Writer: serveWriter{}, Gatherer: prometheus.NewRegistry(), Groups: &httpapi.Groups{}}) {
		want := "| `" + rt.Pattern + "` | " + rt.Perm.String()
		if rt.Public {
			want += " (no authentication)"
		}
		if !strings.Contains(readme, want) {
			t.Errorf("README has no row %q for HTTP route %s", want, rt.Pattern)
		}
	}
	for _, api := range kafkasrv.APIs() {
		want := "| " + api.Name + " | " + api.Perm.String()
		if api.Perm != auth.PermNone {
			want += " on each topic"
		}
		if api.Group {
			want += ", and the group"
		}
		if api.Admin {
			want += " and admin"
		}
		if !strings.Contains(readme, want) {
			t.Errorf("README has no row %q for Kafka API %s", want, api.Name)
		}
	}
}
