package auth_test

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

func TestNewAuthorizerRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		auth auth.Settings
		want string
	}{
		"empty_principal": {auth.Settings{Tokens: []auth.Token{{Principal: " ", Token: fetchkit.TokCI}}}, "auth.tokens[0].principal"},
		"empty_token":     {auth.Settings{Tokens: []auth.Token{{Principal: "ci"}}}, "auth.tokens[0].token"},
		"nul_username":    {auth.Settings{SASLPlain: []auth.PlainUser{{Username: "a\x00b", Password: fetchkit.PassAlice}}}, "auth.sasl_plain[0].username"},
		"nul_password":    {auth.Settings{SASLPlain: []auth.PlainUser{{Username: "a", Password: fetchkit.PassAlice + "\x00"}}}, "auth.sasl_plain[0].password"},
		"duplicate_user": {auth.Settings{SASLPlain: []auth.PlainUser{{Username: "a", Password: fetchkit.PassAlice}, {Username: "a", Password: fetchkit.PassBob}}},
			"auth.sasl_plain[1].username"},
		"star_inside":    {auth.Settings{ACLs: map[string]auth.ACL{"ci": auth.ReadOnly("or*ders")}}, "auth.acls.ci.read[0]"},
		"bad_prefix":     {auth.Settings{ACLs: map[string]auth.ACL{"ci": auth.ReadOnly("a/b*")}}, "auth.acls.ci.read[0]"},
		"dotdot_topic":   {auth.Settings{ACLs: map[string]auth.ACL{"ci": auth.ReadOnly("ok", "..")}}, "auth.acls.ci.read[1]"},
		"slash_in_topic": {auth.Settings{ACLs: map[string]auth.ACL{"ci": auth.ReadOnly("../x")}}, "auth.acls.ci.read[0]"},
		"bad_write":      {auth.Settings{ACLs: map[string]auth.ACL{"ci": {Write: []string{"ok", "a b"}}}}, "auth.acls.ci.write[1]"},
		"empty_group":    {auth.Settings{ACLs: map[string]auth.ACL{"ci": {Groups: []string{""}}}}, "auth.acls.ci.groups[0]"},
		"group_star":     {auth.Settings{ACLs: map[string]auth.ACL{"ci": {Groups: []string{"a*b*"}}}}, "auth.acls.ci.groups[0]"},
		"group_control":  {auth.Settings{ACLs: map[string]auth.ACL{"ci": {Groups: []string{"ok", "a\nb"}}}}, "auth.acls.ci.groups[1]"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := auth.NewAuthorizer(tc.auth)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one about %s", err, tc.want)
			}
			for _, s := range []string{fetchkit.TokCI, fetchkit.PassAlice, fetchkit.PassBob} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error quotes a secret: %v", err)
				}
			}
		})
	}
}

func TestAuthorizerAllowed(t *testing.T) {
	z, err := auth.NewAuthorizer(fetchkit.AuthConfig())
	if err != nil {
		t.Fatal(err)
	}
	open, err := auth.NewAuthorizer(auth.Settings{Tokens: []auth.Token{{Principal: "ci", Token: fetchkit.TokCI}}})
	if err != nil {
		t.Fatal(err)
	}
	user := func(n string) auth.Principal { return auth.Principal{Name: n, Mechanism: auth.MechanismSASLPlain} }
	for _, tc := range []struct {
		z     *auth.Authorizer
		p     auth.Principal
		topic string
		want  bool
	}{
		{z, user("ci"), "orders", true},
		{z, user("ci"), "orders-eu", false}, // exact name, not a prefix
		{z, user("alice"), "orders", true},
		{z, user("alice"), "orders-eu", true},
		{z, user("alice"), "order", false},
		{z, user("ops"), "anything.at_all", true},
		{z, user("bob"), "orders", false},
		{z, user("nobody"), "orders", false},  // no entry: nothing
		{z, auth.Principal{}, "secret", true}, // anonymous: the listener does not authenticate
		{z, auth.Principal{Name: fetchkit.ClientACN, Mechanism: auth.MechanismMTLS}, "public.x", true},
		{open, user("ci"), "secret", true}, // no ACLs at all: authentication only
		{nil, user("ci"), "secret", true},
	} {
		if got := tc.z.May(tc.p, auth.PermRead, tc.topic); got != tc.want {
			t.Errorf("%v on %q: allowed %v, want %v", tc.p, tc.topic, got, tc.want)
		}
	}
	if !z.TokensRequired() || !z.SASLRequired() || !z.HasACLs() || open.SASLRequired() || open.HasACLs() {
		t.Fatal("required flags")
	}
	var none *auth.Authorizer
	if none.TokensRequired() || none.SASLRequired() || none.HasACLs() {
		t.Fatal("nil authorizer requires something")
	}
}

func TestAuthenticate(t *testing.T) {
	z, err := auth.NewAuthorizer(fetchkit.AuthConfig())
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := z.AuthenticateToken(fetchkit.TokOps); !ok || p != (auth.Principal{Name: "ops", Mechanism: auth.MechanismToken}) {
		t.Fatalf("ops token: %v %v", p, ok)
	}
	for _, bad := range []string{"", fetchkit.WrongToken, fetchkit.TokOps[:len(fetchkit.TokOps)-1], fetchkit.TokOps + "x", strings.ToUpper(fetchkit.TokOps)} {
		if p, ok := z.AuthenticateToken(bad); ok || !p.Anonymous() {
			t.Fatalf("token %q accepted as %v", bad, p)
		}
	}
	if p, ok := z.AuthenticatePlain("alice", fetchkit.PassAlice); !ok || p.Name != "alice" || p.Mechanism != auth.MechanismSASLPlain {
		t.Fatalf("alice: %v %v", p, ok)
	}
	for _, c := range [][2]string{{"alice", fetchkit.PassBob}, {"alice", ""}, {"carol", fetchkit.PassAlice}, {"", ""}, {"carol", "tiered-no-such-user-0123456789abcdef"}} {
		if _, ok := z.AuthenticatePlain(c[0], c[1]); ok {
			t.Fatalf("%q/%q accepted", c[0], c[1])
		}
	}
	if p := (auth.Principal{Name: "alice"}); p.String() != "User:ANONYMOUS" {
		t.Fatalf("principal without mechanism prints %s", p)
	}
	if p := (auth.Principal{Name: "alice", Mechanism: auth.MechanismMTLS}); p.String() != "User:alice" {
		t.Fatalf("principal prints %s", p)
	}
}

func TestNewServerTLSConfig(t *testing.T) {
	pki := fetchkit.NewPKI(t, "cfg")
	if c, err := auth.NewServerTLSConfig(auth.TLS{}); c != nil || err != nil {
		t.Fatalf("disabled: %v %v", c, err)
	}
	c, err := auth.NewServerTLSConfig(pki.ServerTLS(false))
	if err != nil || c.MinVersion != tls.VersionTLS12 || c.ClientAuth != tls.NoClientCert || len(c.Certificates) != 1 {
		t.Fatalf("tls: %+v %v", c, err)
	}
	c, err = auth.NewServerTLSConfig(pki.ServerTLS(true))
	if err != nil || c.ClientAuth != tls.RequireAndVerifyClientCert || c.ClientCAs == nil {
		t.Fatalf("mutual: %+v %v", c, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]auth.TLS{
		"ca_without_cert":  {ClientCAFile: pki.CAFile},
		"cert_without_key": {CertFile: pki.ServerCert},
		"swapped":          {CertFile: pki.ServerKey, KeyFile: pki.ServerCert},
		"missing_ca":       {CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: notPEM + ".missing"},
		"ca_not_pem":       {CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: notPEM},
	} {
		if _, err := auth.NewServerTLSConfig(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := auth.NewSecurity(auth.TLS{}, auth.TLS{ClientCAFile: pki.CAFile}, auth.Settings{}); err == nil || !strings.Contains(err.Error(), "kafka.tls") {
		t.Fatalf("auth.NewSecurity: %v", err)
	}
}

func TestSecurityWarnings(t *testing.T) {
	pki := fetchkit.NewPKI(t, "warn")
	z, err := auth.NewAuthorizer(auth.Settings{SASLPlain: []auth.PlainUser{{Username: "a", Password: fetchkit.PassAlice}}, ACLs: map[string]auth.ACL{"a": auth.ReadOnly("*")}})
	if err != nil {
		t.Fatal(err)
	}
	plain := auth.Security{Auth: z}
	w := strings.Join(plain.Warnings(true, true), "\n")
	if !strings.Contains(w, "HTTP listener does not authenticate") || !strings.Contains(w, "SASL/PLAIN on a plaintext Kafka listener") {
		t.Fatalf("warnings:\n%s", w)
	}
	users := []auth.PlainUser{{Username: "a", Password: fetchkit.PassAlice}}
	sec := fetchkit.MustSecurity(t, pki.ServerTLS(true), pki.ServerTLS(false), auth.Settings{SASLPlain: users, ACLs: map[string]auth.ACL{"a": auth.ReadOnly("*")}})
	if w := sec.Warnings(true, true); len(w) != 0 {
		t.Fatalf("warnings for a secured setup: %q", w)
	}
	noACLs := fetchkit.MustSecurity(t, pki.ServerTLS(true), pki.ServerTLS(false), auth.Settings{SASLPlain: users})
	if w := strings.Join(noACLs.Warnings(true, true), "\n"); !strings.Contains(w, "no auth.acls: every authenticated principal may do everything") {
		t.Fatalf("warnings for authentication without ACLs:\n%s", w)
	}
	if w := (auth.Security{}).Warnings(true, true); len(w) != 0 {
		t.Fatalf("warnings without auth: %q", w)
	}
}

func TestAuthorizerMay(t *testing.T) {
	z, err := auth.NewAuthorizer(auth.Settings{
		Tokens: []auth.Token{{Principal: "reader", Token: fetchkit.TokCI}},
		ACLs: map[string]auth.ACL{
			"reader": auth.ReadOnly("orders", "logs-*"),
			"app":    {Read: []string{"orders"}, Groups: []string{"billing-*"}},
			"ingest": {Read: []string{"*"}, Write: []string{"orders"}},
			"writer": {Write: []string{"orders"}},
			"ops":    {Read: []string{"*"}, Write: []string{"*"}, Groups: []string{"*"}, Admin: true},
			"admin":  {Admin: true},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	open, err := auth.NewAuthorizer(auth.Settings{Tokens: []auth.Token{{Principal: "ci", Token: fetchkit.TokCI}}})
	if err != nil {
		t.Fatal(err)
	}
	user := func(n string) auth.Principal { return auth.Principal{Name: n, Mechanism: auth.MechanismToken} }
	// Each principal's answer for: describe, read, write on "orders"; read
	// on "logs-eu"; write on "logs-eu"; admin.
	for _, tc := range []struct {
		z    *auth.Authorizer
		p    auth.Principal
		want [6]bool
	}{
		{z, user("reader"), [6]bool{true, true, false, true, false, false}},
		{z, user("app"), [6]bool{true, true, false, false, false, false}},
		{z, user("ingest"), [6]bool{true, true, true, true, false, false}},
		{z, user("writer"), [6]bool{true, false, true, false, false, false}},
		{z, user("ops"), [6]bool{true, true, true, true, true, true}},
		{z, user("admin"), [6]bool{true, false, false, false, false, true}},
		{z, user("nobody"), [6]bool{false, false, false, false, false, false}},
		{z, auth.Principal{}, [6]bool{true, true, true, true, true, true}}, // the listener does not authenticate
		{open, user("ci"), [6]bool{true, true, true, true, true, true}},    // no ACLs: authentication only
		{nil, user("ci"), [6]bool{true, true, true, true, true, true}},
	} {
		got := [6]bool{
			tc.z.May(tc.p, auth.PermDescribe, "orders"), tc.z.May(tc.p, auth.PermRead, "orders"), tc.z.May(tc.p, auth.PermWrite, "orders"),
			tc.z.May(tc.p, auth.PermRead, "logs-eu"), tc.z.May(tc.p, auth.PermWrite, "logs-eu"), tc.z.May(tc.p, auth.PermAdmin, ""),
		}
		if got != tc.want {
			t.Errorf("%v: describe/read/write orders, read/write logs-eu, admin = %v, want %v", tc.p, got, tc.want)
		}
		if !tc.z.May(tc.p, auth.PermNone, "orders") {
			t.Errorf("%v: PermNone refused", tc.p)
		}
	}
	for _, tc := range []struct {
		p     string
		group string
		want  bool
	}{
		{"app", "billing-eu", true}, {"app", "billing", false}, {"ops", "any", true}, {"reader", "billing-eu", false}, {"nobody", "x", false},
	} {
		if got := z.GroupAllowed(user(tc.p), tc.group); got != tc.want {
			t.Errorf("%s in group %q: %v, want %v", tc.p, tc.group, got, tc.want)
		}
	}
	if !open.GroupAllowed(user("ci"), "x") || !z.GroupAllowed(auth.Principal{}, "x") {
		t.Error("groups refused without enforcement")
	}
}

func TestAudit(t *testing.T) {
	logs := &fetchkit.LogCapture{}
	auth.Audit(logs.Logger(), auth.Principal{Name: "ops", Mechanism: auth.MechanismToken}, "topic.alter", "orders", auth.AuditOK)
	if l := logs.Lines("level=INFO", "msg=audit", "principal=User:ops", "action=topic.alter", "target=orders", "result=ok"); len(l) != 1 {
		t.Fatalf("audit line missing:\n%s", logs.String())
	}
	if p := auth.SignalPrincipal("SIGHUP"); p.String() != "Signal:SIGHUP" || p.Anonymous() {
		t.Fatalf("signal principal prints %s", p)
	}
}

// TestSecretEqual: a secret matches only itself: not a prefix, an
// extension, another value of the same length, or the empty string.
func TestSecretEqual(t *testing.T) {
	s := auth.Secret("s3cret-token")
	for _, tc := range []struct {
		candidate string
		want      bool
	}{
		{"s3cret-token", true},
		{"s3cret-toke", false},
		{"s3cret-token ", false},
		{"s3cret-tokeN", false},
		{"", false},
	} {
		if got := s.Equal(tc.candidate); got != tc.want {
			t.Errorf("Equal(%q) = %v, want %v", tc.candidate, got, tc.want)
		}
	}
	if !auth.Secret("").Equal("") {
		t.Error("an empty secret does not equal the empty string")
	}
}
