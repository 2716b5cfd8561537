package server

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/httpapi"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// httpGet sends GET url with an Authorization header when auth is set and
// returns the status, the body and the WWW-Authenticate header.
func httpGet(t *testing.T, c *http.Client, url, auth string) (int, string, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b), resp.Header.Get("WWW-Authenticate")
}

func errorCode(t *testing.T, body string) string {
	t.Helper()
	var e httpapi.ErrorBody
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("error body %q: %v", body, err)
	}
	return e.Code
}

// topicNames decodes a /v1/topics answer.
func topicNames(t *testing.T, body string) []string {
	t.Helper()
	var out struct {
		Topics []httpapi.TopicJSON `json:"topics"`
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil {
		t.Fatalf("topics body %q: %v", body, err)
	}
	var names []string
	for _, tp := range out.Topics {
		names = append(names, tp.Topic)
	}
	return strings.Fields(strings.Join(names, " "))
}

func TestHTTPBearerAuth(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	z, err := auth.NewAuthorizer(fetchkit.AuthConfig())
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m := fetchcache.NewServeMetrics(reg)
	logs := &fetchkit.LogCapture{}
	srv := httptest.NewServer(httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: e.Cat, Auth: z, Metrics: m, Gatherer: reg, Logger: logs.Logger()}))
	defer srv.Close()
	c := srv.Client()
	ci, ops := "Bearer "+fetchkit.TokCI, "bearer "+fetchkit.TokOps // the scheme is case-insensitive

	for _, tc := range []struct {
		name, path, auth string
		status           int
		code             string
		challenge        string
	}{
		{"healthz_open", "/healthz", "", 200, "", ""},
		{"readyz_open", "/readyz", "", 200, "", ""},
		{"no_token", "/v1/topics", "", 401, fetchcache.CodeUnauthorized, `Bearer realm="tiered"`},
		{"wrong_token", "/v1/topics", "Bearer " + fetchkit.WrongToken, 401, fetchcache.CodeUnauthorized, `Bearer realm="tiered", error="invalid_token"`},
		{"basic_scheme", "/v1/topics", "Basic " + fetchkit.TokCI, 401, fetchcache.CodeUnauthorized, `Bearer realm="tiered"`},
		{"metrics_needs_token", "/metrics", "", 401, fetchcache.CodeUnauthorized, `Bearer realm="tiered"`},
		{"metrics_needs_admin", "/metrics", ci, 403, fetchcache.CodeClusterAuthorizationFailed, ""},
		{"metrics_admin", "/metrics", "Bearer " + fetchkit.TokAdmin, 200, "", ""},
		{"unknown_path_needs_token", "/nope", "", 401, fetchcache.CodeUnauthorized, `Bearer realm="tiered"`},
		{"allowed_partition", "/v1/topics/orders/partitions/0", ci, 200, "", ""},
		{"allowed_records", "/v1/topics/orders/partitions/0/records", ci, 200, "", ""},
		{"denied_records", "/v1/topics/secret/partitions/0/records", ci, 403, fetchcache.CodeTopicAuthorizationFailed, ""},
		{"denied_partition", "/v1/topics/orders-eu/partitions/0", ci, 403, fetchcache.CodeTopicAuthorizationFailed, ""},
		{"denied_unknown_topic", "/v1/topics/nope/partitions/0", ci, 403, fetchcache.CodeTopicAuthorizationFailed, ""},
		{"denied_escaped", "/v1/topics/orders%2Fx/partitions/0/records", ci, 403, fetchcache.CodeTopicAuthorizationFailed, ""},
		{"no_serve_route", "/v1/topics/secret/config", ci, 404, fetchcache.CodeNotFound, ""}, // fetch has no write API
		{"ops_reads_all", "/v1/topics/secret/partitions/0/records", ops, 200, "", ""},
		{"ops_invalid_name", "/v1/topics/a%2Fb/partitions/0", ops, 400, fetchcache.CodeInvalidRequest, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, body, challenge := httpGet(t, c, srv.URL+tc.path, tc.auth)
			if status != tc.status || challenge != tc.challenge {
				t.Fatalf("status %d, WWW-Authenticate %q, want %d %q; body %s", status, challenge, tc.status, tc.challenge, body)
			}
			if tc.code != "" && errorCode(t, body) != tc.code {
				t.Fatalf("code of %s, want %s", body, tc.code)
			}
		})
	}

	_, body, _ := httpGet(t, c, srv.URL+"/v1/topics", ci)
	if got := strings.Join(topicNames(t, body), ","); got != "orders" {
		t.Fatalf("ci lists %s, want orders", got)
	}
	_, body, _ = httpGet(t, c, srv.URL+"/v1/topics", ops)
	if got := strings.Join(topicNames(t, body), ","); got != strings.Join(fetchkit.AuthTopics, ",") {
		t.Fatalf("ops lists %s", got)
	}

	if n := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceHTTP, fetchcache.CodeUnauthorized)); n != 5 {
		t.Fatalf("%v unauthorized requests counted, want 5", n)
	}
	if n := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceHTTP, fetchcache.CodeTopicAuthorizationFailed)); n != 4 {
		t.Fatalf("%v denied requests counted, want 4", n)
	}
	if n := fetchkit.CounterValue(t, m.Requests(fetchcache.InterfaceHTTP, fetchcache.CodeClusterAuthorizationFailed)); n != 1 {
		t.Fatalf("%v denied admin requests counted, want 1", n)
	}
	denials := logs.Lines("topic access denied", "principal=User:ci", "topic=secret", "interface=http")
	if len(denials) != 1 {
		t.Fatalf("denial lines for ci on secret: %q\nall logs:\n%s", denials, logs)
	}
	if len(logs.Lines("authentication failed", "interface=http")) == 0 {
		t.Fatalf("no authentication failure logged:\n%s", logs)
	}
}

// TestHTTPWithoutAuth: with no credentials configured the API stays open,
// as before auth existed.
func TestHTTPWithoutAuth(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	z, err := auth.NewAuthorizer(auth.Settings{})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(httpapi.NewHTTPHandler(httpapi.HTTPOptions{Catalog: e.Cat, Auth: z}))
	defer srv.Close()
	if status, body, _ := httpGet(t, srv.Client(), srv.URL+"/v1/topics/secret/partitions/0/records", "Bearer whatever"); status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	_, body, _ := httpGet(t, srv.Client(), srv.URL+"/v1/topics", "")
	if got := strings.Join(topicNames(t, body), ","); got != strings.Join(fetchkit.AuthTopics, ",") {
		t.Fatalf("lists %s", got)
	}
}

func TestHTTPTLS(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	pki := fetchkit.NewPKI(t, "http")
	rogue := fetchkit.NewPKI(t, "rogue")
	_, _, certA := pki.Client(fetchkit.ClientACN)
	_, _, certNobody := pki.Client(fetchkit.ClientNoACLs)
	_, _, certRogue := rogue.Client(fetchkit.ClientACN)
	client := func(cfg *tls.Config) *http.Client {
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg, DisableKeepAlives: true}}
	}

	t.Run("server_tls_with_tokens", func(t *testing.T) {
		s := startSecureServer(t, e.Cat, fetchkit.MustSecurity(t, pki.ServerTLS(false), auth.TLS{}, fetchkit.AuthConfig()))
		url := "https://" + s.http
		c := client(pki.ClientTLS())
		defer c.CloseIdleConnections()
		if status, body, _ := httpGet(t, c, url+"/v1/topics/orders/partitions/0/records", "Bearer "+fetchkit.TokCI); status != 200 {
			t.Fatalf("status %d: %s", status, body)
		}
		if status, _, _ := httpGet(t, c, url+"/v1/topics/orders/partitions/0/records", ""); status != 401 {
			t.Fatalf("no token over TLS: %d", status)
		}
		// A client certificate is not asked for, so it identifies nobody.
		cc := client(pki.ClientTLS(certA))
		defer cc.CloseIdleConnections()
		if status, _, _ := httpGet(t, cc, url+"/v1/topics/public.x/partitions/0", ""); status != 401 {
			t.Fatalf("unrequested certificate authenticated: %d", status)
		}
		// The TLS listener answers plaintext with a 400, never with data.
		if resp, err := client(nil).Get("http://" + s.http + "/v1/topics"); err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusBadRequest {
				t.Fatalf("plaintext request: %s", resp.Status)
			}
		}
		old := pki.ClientTLS()
		old.MaxVersion = tls.VersionTLS11
		old.MinVersion = tls.VersionTLS10
		oc := client(old)
		if _, err := oc.Get(url + "/healthz"); err == nil {
			t.Fatal("TLS 1.1 accepted")
		}
		if _, err := client(&tls.Config{}).Get(url + "/healthz"); err == nil {
			t.Fatal("server certificate verified without the CA")
		}
	})

	t.Run("mutual_tls", func(t *testing.T) {
		s := startSecureServer(t, e.Cat, fetchkit.MustSecurity(t, pki.ServerTLS(true), auth.TLS{}, fetchkit.AuthConfig()))
		url := "https://" + s.http
		ca := client(pki.ClientTLS(certA))
		defer ca.CloseIdleConnections()
		if status, body, _ := httpGet(t, ca, url+"/v1/topics/public.x/partitions/0/records", ""); status != 200 {
			t.Fatalf("client-a on public.x: %d %s", status, body)
		}
		status, body, _ := httpGet(t, ca, url+"/v1/topics/orders/partitions/0/records", "")
		if status != 403 || errorCode(t, body) != fetchcache.CodeTopicAuthorizationFailed {
			t.Fatalf("client-a on orders: %d %s", status, body)
		}
		_, body, _ = httpGet(t, ca, url+"/v1/topics", "")
		if got := strings.Join(topicNames(t, body), ","); got != "public.x" {
			t.Fatalf("client-a lists %s", got)
		}
		// A token on an mTLS connection names the principal.
		if status, body, _ := httpGet(t, ca, url+"/v1/topics/orders/partitions/0/records", "Bearer "+fetchkit.TokCI); status != 200 {
			t.Fatalf("token over mTLS: %d %s", status, body)
		}
		if status, _, _ := httpGet(t, ca, url+"/v1/topics/public.x/partitions/0/records", "Bearer "+fetchkit.WrongToken); status != 401 {
			t.Fatalf("wrong token over mTLS: %d", status)
		}
		cn := client(pki.ClientTLS(certNobody))
		defer cn.CloseIdleConnections()
		if status, _, _ := httpGet(t, cn, url+"/v1/topics/public.x/partitions/0", ""); status != 403 {
			t.Fatalf("certificate without an ACL entry: %d", status)
		}
		if len(s.logs.Lines("topic access denied", "principal=User:"+fetchkit.ClientACN, "mechanism=mtls", "topic=orders")) != 1 {
			t.Fatalf("no denial line for client-a:\n%s", s.logs)
		}
		for name, cfg := range map[string]*tls.Config{"no_certificate": pki.ClientTLS(), "rogue_ca": pki.ClientTLS(certRogue)} {
			if _, err := client(cfg).Get(url + "/healthz"); err == nil {
				t.Fatalf("%s: handshake accepted", name)
			}
		}
	})
}
