package fetchkit

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/localtier/codec"
)

// PKI is a CA with a server certificate for 127.0.0.1/localhost and
// client certificates on demand, all as PEM files in a temp dir.
type PKI struct {
	t      testing.TB
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64

	CAFile, ServerCert, ServerKey string
}

func NewPKI(t testing.TB, name string) *PKI {
	t.Helper()
	p := &PKI{t: t, dir: t.TempDir(), serial: 1}
	key := p.newKey()
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(p.serial),
		Subject:               pkix.Name{CommonName: name + " test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	if p.caCert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	p.caKey = key
	p.pool = x509.NewCertPool()
	p.pool.AddCert(p.caCert)
	p.CAFile = p.write(name+"-ca.pem", "CERTIFICATE", der)
	p.ServerCert, p.ServerKey, _ = p.Issue(name+"-server", "localhost", x509.ExtKeyUsageServerAuth)
	return p
}

func (p *PKI) newKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	return k
}

func (p *PKI) write(name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// Issue signs a certificate for cn and writes it and its key; servers get
// the SANs 127.0.0.1 and localhost.
func (p *PKI) Issue(file, cn string, usage x509.ExtKeyUsage) (certFile, keyFile string, c tls.Certificate) {
	p.t.Helper()
	p.serial++
	key := p.newKey()
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(p.serial),
		Subject:      pkix.Name{CommonName: cn, Organization: []string{"tiered tests"}},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1)}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, p.caCert, &key.PublicKey, p.caKey)
	if err != nil {
		p.t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		p.t.Fatal(err)
	}
	certFile = p.write(file+".pem", "CERTIFICATE", der)
	keyFile = p.write(file+"-key.pem", "PRIVATE KEY", kder)
	c, err = tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		p.t.Fatal(err)
	}
	return certFile, keyFile, c
}

// Client returns a client certificate for cn.
func (p *PKI) Client(cn string) (certFile, keyFile string, c tls.Certificate) {
	return p.Issue("client-"+strings.ReplaceAll(cn, " ", "_"), cn, x509.ExtKeyUsageClientAuth)
}

// ClientTLS trusts the CA and presents certs.
func (p *PKI) ClientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.pool, Certificates: certs, MinVersion: tls.VersionTLS12}
}

// ServerTLS is the auth.TLS of a listener; mutual adds the client CA.
func (p *PKI) ServerTLS(mutual bool) auth.TLS {
	t := auth.TLS{CertFile: p.ServerCert, KeyFile: p.ServerKey}
	if mutual {
		t.ClientCAFile = p.CAFile
	}
	return t
}

// LogCapture is a slog handler target that keeps every line.
type LogCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *LogCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *LogCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// Lines returns the captured lines containing all of subs.
func (c *LogCapture) Lines(subs ...string) []string {
	var out []string
	for _, l := range strings.Split(c.String(), "\n") {
		ok := l != ""
		for _, s := range subs {
			ok = ok && strings.Contains(l, s)
		}
		if ok {
			out = append(out, l)
		}
	}
	return out
}

func (c *LogCapture) Logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Credentials of the auth tests. Every value is distinctive so a test can
// grep logs and messages for it.
const (
	TokCI        = "tok-ci-7f3a9c1e5b2d4a6c8e0f"
	TokOps       = "tok-ops-2b4d6f8a0c1e3a5c7e9b"
	TokAdmin     = "tok-admin-5c6d7e8f9a0b1c2d3e4f"
	PassAlice    = "pw-alice-9d8c7b6a5f4e3d2c"
	PassBob      = "pw-bob-1a2b3c4d5e6f7a8b"
	WrongToken   = "tok-wrong-0e1d2c3b4a5f6e7d"
	WrongPass    = "pw-wrong-f0e1d2c3b4a59687"
	ClientACN    = "client-a"
	ClientNoACLs = "client-nobody"
)

// AuthConfig: ci reads "orders" only, ops reads everything, admin
// administers (and reads nothing), alice reads the "orders" prefix, bob
// "secret", client-a (a certificate) "public.x".
func AuthConfig() auth.Settings {
	return auth.Settings{
		Tokens: []auth.Token{{Principal: "ci", Token: TokCI}, {Principal: "ops", Token: TokOps}, {Principal: "admin", Token: TokAdmin}},
		SASLPlain: []auth.PlainUser{
			{Username: "alice", Password: PassAlice},
			{Username: "bob", Password: PassBob},
		},
		ACLs: map[string]auth.ACL{
			"ci":      auth.ReadOnly("orders"),
			"ops":     auth.ReadOnly("*"),
			"admin":   {Admin: true},
			"alice":   auth.ReadOnly("orders*"),
			"bob":     auth.ReadOnly("secret"),
			ClientACN: auth.ReadOnly("public.x"),
		},
	}
}

// AuthTopics are the auth tests' topics, each with 20 records in
// partition 0.
var AuthTopics = []string{"orders", "orders-eu", "public.x", "secret"}

func NewAuthEnv(t testing.TB) *Env {
	t.Helper()
	e := NewEnv(t)
	for _, name := range AuthTopics {
		e.Topic(name, 1, nil)
		e.Produce(e.Log(name, 0), ProduceOpts{Codec: codec.None}, GenRecs(20, Ts0, name))
	}
	return e
}

// MustSecurity builds a listener Security from settings or fails the test.
func MustSecurity(t testing.TB, httpTLS, kafkaTLS auth.TLS, settings auth.Settings) auth.Security {
	t.Helper()
	sec, err := auth.NewSecurity(httpTLS, kafkaTLS, settings)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}
