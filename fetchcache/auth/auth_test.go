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
		"star_inside":    {auth.Settings{ACLs: map[string][]string{"ci": {"or*ders"}}}, "auth.acls.ci[0]"},
		"bad_prefix":     {auth.Settings{ACLs: map[string][]string{"ci": {"a/b*"}}}, "auth.acls.ci[0]"},
		"dotdot_topic":   {auth.Settings{ACLs: map[string][]string{"ci": {"ok", ".."}}}, "auth.acls.ci[1]"},
		"slash_in_topic": {auth.Settings{ACLs: map[string][]string{"ci": {"../x"}}}, "auth.acls.ci[0]"},
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
		if got := tc.z.Allowed(tc.p, tc.topic); got != tc.want {
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
	z, err := auth.NewAuthorizer(auth.Settings{SASLPlain: []auth.PlainUser{{Username: "a", Password: fetchkit.PassAlice}}, ACLs: map[string][]string{"a": {"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	plain := auth.Security{Auth: z}
	w := strings.Join(plain.Warnings(true, true), "\n")
	if !strings.Contains(w, "HTTP listener does not authenticate") || !strings.Contains(w, "SASL/PLAIN on a plaintext Kafka listener") {
		t.Fatalf("warnings:\n%s", w)
	}
	sec := fetchkit.MustSecurity(t, pki.ServerTLS(true), pki.ServerTLS(false), auth.Settings{SASLPlain: []auth.PlainUser{{Username: "a", Password: fetchkit.PassAlice}}})
	if w := sec.Warnings(true, true); len(w) != 0 {
		t.Fatalf("warnings for a secured setup: %q", w)
	}
	if w := (auth.Security{}).Warnings(true, true); len(w) != 0 {
		t.Fatalf("warnings without auth: %q", w)
	}
}
