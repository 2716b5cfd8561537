package fetchcache

import (
	"bytes"
	"crypto/tls"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/app/config"
)

func TestNewAuthorizerRefuses(t *testing.T) {
	for name, tc := range map[string]struct {
		auth config.Auth
		want string
	}{
		"empty_principal": {config.Auth{Tokens: []config.Token{{Principal: " ", Token: tokCI}}}, "auth.tokens[0].principal"},
		"empty_token":     {config.Auth{Tokens: []config.Token{{Principal: "ci"}}}, "auth.tokens[0].token"},
		"nul_username":    {config.Auth{SASLPlain: []config.PlainUser{{Username: "a\x00b", Password: passAlice}}}, "auth.sasl_plain[0].username"},
		"nul_password":    {config.Auth{SASLPlain: []config.PlainUser{{Username: "a", Password: passAlice + "\x00"}}}, "auth.sasl_plain[0].password"},
		"duplicate_user": {config.Auth{SASLPlain: []config.PlainUser{{Username: "a", Password: passAlice}, {Username: "a", Password: passBob}}},
			"auth.sasl_plain[1].username"},
		"star_inside":    {config.Auth{ACLs: map[string][]string{"ci": {"or*ders"}}}, "auth.acls.ci[0]"},
		"bad_prefix":     {config.Auth{ACLs: map[string][]string{"ci": {"a/b*"}}}, "auth.acls.ci[0]"},
		"dotdot_topic":   {config.Auth{ACLs: map[string][]string{"ci": {"ok", ".."}}}, "auth.acls.ci[1]"},
		"slash_in_topic": {config.Auth{ACLs: map[string][]string{"ci": {"../x"}}}, "auth.acls.ci[0]"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := NewAuthorizer(tc.auth)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one about %s", err, tc.want)
			}
			for _, s := range []string{tokCI, passAlice, passBob} {
				if strings.Contains(err.Error(), s) {
					t.Fatalf("error quotes a secret: %v", err)
				}
			}
		})
	}
}

func TestAuthorizerAllowed(t *testing.T) {
	z, err := NewAuthorizer(authConfig())
	if err != nil {
		t.Fatal(err)
	}
	open, err := NewAuthorizer(config.Auth{Tokens: []config.Token{{Principal: "ci", Token: tokCI}}})
	if err != nil {
		t.Fatal(err)
	}
	user := func(n string) Principal { return Principal{Name: n, Mechanism: MechanismSASLPlain} }
	for _, tc := range []struct {
		z     *Authorizer
		p     Principal
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
		{z, user("nobody"), "orders", false}, // no entry: nothing
		{z, Principal{}, "secret", true},     // anonymous: the listener does not authenticate
		{z, Principal{Name: clientACN, Mechanism: MechanismMTLS}, "public.x", true},
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
	var none *Authorizer
	if none.TokensRequired() || none.SASLRequired() || none.HasACLs() {
		t.Fatal("nil authorizer requires something")
	}
}

func TestAuthenticate(t *testing.T) {
	z, err := NewAuthorizer(authConfig())
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := z.AuthenticateToken(tokOps); !ok || p != (Principal{Name: "ops", Mechanism: MechanismToken}) {
		t.Fatalf("ops token: %v %v", p, ok)
	}
	for _, bad := range []string{"", wrongToken, tokOps[:len(tokOps)-1], tokOps + "x", strings.ToUpper(tokOps)} {
		if p, ok := z.AuthenticateToken(bad); ok || !p.Anonymous() {
			t.Fatalf("token %q accepted as %v", bad, p)
		}
	}
	if p, ok := z.AuthenticatePlain("alice", passAlice); !ok || p.Name != "alice" || p.Mechanism != MechanismSASLPlain {
		t.Fatalf("alice: %v %v", p, ok)
	}
	for _, c := range [][2]string{{"alice", passBob}, {"alice", ""}, {"carol", passAlice}, {"", ""}, {"carol", string(plainDummy)}} {
		if _, ok := z.AuthenticatePlain(c[0], c[1]); ok {
			t.Fatalf("%q/%q accepted", c[0], c[1])
		}
	}
	if p := (Principal{Name: "alice"}); p.String() != "User:ANONYMOUS" {
		t.Fatalf("principal without mechanism prints %s", p)
	}
	if p := (Principal{Name: "alice", Mechanism: MechanismMTLS}); p.String() != "User:alice" {
		t.Fatalf("principal prints %s", p)
	}
}

func TestParsePlain(t *testing.T) {
	for _, tc := range []struct {
		msg        string
		user, pass string
		err        bool
	}{
		{"\x00alice\x00pw", "alice", "pw", false},
		{"alice\x00alice\x00pw", "alice", "pw", false},
		{"bob\x00alice\x00pw", "", "", true}, // authzid differs
		{"alice\x00pw", "", "", true},
		{"\x00\x00pw", "", "", true},
		{"\x00alice\x00", "", "", true},
		{"\x00alice\x00p\x00w", "", "", true},
		{"", "", "", true},
		{"\x00alice\x00" + strings.Repeat("p", maxPlainMessage), "", "", true},
	} {
		u, p, err := parsePlain([]byte(tc.msg))
		if (err != nil) != tc.err || u != tc.user || p != tc.pass {
			t.Errorf("parsePlain(%q) = %q, %q, %v", tc.msg, u, p, err)
		}
		if err != nil && (strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "alice")) {
			t.Errorf("parsePlain(%q) error quotes the message: %v", tc.msg, err)
		}
	}
}

// FuzzParsePlain: no panic; an accepted message is exactly
// [authzid] NUL user NUL pass with non-empty NUL-free fields and the
// authzid empty or the user; errors never quote the input.
func FuzzParsePlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00pw", "alice\x00alice\x00pw", "x\x00y", "\x00\x00", "\x00a\x00b\x00c", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, pass, err := parsePlain(msg)
		if err != nil {
			if len(msg) >= 8 && strings.Contains(err.Error(), string(msg)) {
				t.Fatalf("error quotes the message: %v", err)
			}
			return
		}
		if user == "" || pass == "" || strings.ContainsRune(user, 0) || strings.ContainsRune(pass, 0) {
			t.Fatalf("accepted bad fields %q %q", user, pass)
		}
		if rebuilt := []byte("\x00" + user + "\x00" + pass); !bytes.Equal(rebuilt, msg) && !bytes.Equal(append([]byte(user), rebuilt...), msg) {
			t.Fatalf("fields %q %q do not rebuild %q", user, pass, msg)
		}
	})
}

func TestLogLimiter(t *testing.T) {
	l := newLogLimiter(10 * time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	if n, ok := l.allow("a"); !ok || n != 0 {
		t.Fatal("first event not logged")
	}
	for range 3 {
		if _, ok := l.allow("a"); ok {
			t.Fatal("repeat within the interval logged")
		}
	}
	if _, ok := l.allow("b"); !ok {
		t.Fatal("another key not logged")
	}
	now = now.Add(10 * time.Second)
	if n, ok := l.allow("a"); !ok || n != 3 {
		t.Fatalf("after the interval: logged %v, suppressed %d, want 3", ok, n)
	}
	for i := range logLimiterMaxKeys + 10 {
		l.allow(string(rune(i)) + "k")
	}
	if len(l.keys) > logLimiterMaxKeys {
		t.Fatalf("%d keys kept", len(l.keys))
	}
}

func TestNewServerTLSConfig(t *testing.T) {
	pki := newTestPKI(t, "cfg")
	if c, err := NewServerTLSConfig(config.TLS{}); c != nil || err != nil {
		t.Fatalf("disabled: %v %v", c, err)
	}
	c, err := NewServerTLSConfig(pki.serverTLS(false))
	if err != nil || c.MinVersion != tls.VersionTLS12 || c.ClientAuth != tls.NoClientCert || len(c.Certificates) != 1 {
		t.Fatalf("tls: %+v %v", c, err)
	}
	c, err = NewServerTLSConfig(pki.serverTLS(true))
	if err != nil || c.ClientAuth != tls.RequireAndVerifyClientCert || c.ClientCAs == nil {
		t.Fatalf("mutual: %+v %v", c, err)
	}
	notPEM := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(notPEM, []byte("not a certificate"), 0o600); err != nil {
		t.Fatal(err)
	}
	for name, bad := range map[string]config.TLS{
		"ca_without_cert":  {ClientCAFile: pki.CAFile},
		"cert_without_key": {CertFile: pki.ServerCert},
		"swapped":          {CertFile: pki.ServerKey, KeyFile: pki.ServerCert},
		"missing_ca":       {CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: notPEM + ".missing"},
		"ca_not_pem":       {CertFile: pki.ServerCert, KeyFile: pki.ServerKey, ClientCAFile: notPEM},
	} {
		if _, err := NewServerTLSConfig(bad); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	if _, err := NewSecurity(config.TLS{}, config.TLS{ClientCAFile: pki.CAFile}, config.Auth{}); err == nil || !strings.Contains(err.Error(), "kafka.tls") {
		t.Fatalf("NewSecurity: %v", err)
	}
}

func TestSecurityWarnings(t *testing.T) {
	pki := newTestPKI(t, "warn")
	z, err := NewAuthorizer(config.Auth{SASLPlain: []config.PlainUser{{Username: "a", Password: passAlice}}, ACLs: map[string][]string{"a": {"*"}}})
	if err != nil {
		t.Fatal(err)
	}
	plain := Security{Auth: z}
	w := strings.Join(plain.warnings(true, true), "\n")
	if !strings.Contains(w, "HTTP listener does not authenticate") || !strings.Contains(w, "SASL/PLAIN on a plaintext Kafka listener") {
		t.Fatalf("warnings:\n%s", w)
	}
	sec := mustSecurity(t, pki.serverTLS(true), pki.serverTLS(false), config.Auth{SASLPlain: []config.PlainUser{{Username: "a", Password: passAlice}}})
	if w := sec.warnings(true, true); len(w) != 0 {
		t.Fatalf("warnings for a secured setup: %q", w)
	}
	if w := (Security{}).warnings(true, true); len(w) != 0 {
		t.Fatalf("warnings without auth: %q", w)
	}
}
