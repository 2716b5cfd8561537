package fetchcache

import (
	"bytes"
	"context"
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

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/localtier/codec"
)

// testPKI is a CA with a server certificate for 127.0.0.1/localhost and
// client certificates on demand, all as PEM files in a temp dir.
type testPKI struct {
	t      testing.TB
	dir    string
	caCert *x509.Certificate
	caKey  *ecdsa.PrivateKey
	pool   *x509.CertPool
	serial int64

	CAFile, ServerCert, ServerKey string
}

func newTestPKI(t testing.TB, name string) *testPKI {
	t.Helper()
	p := &testPKI{t: t, dir: t.TempDir(), serial: 1}
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
	p.ServerCert, p.ServerKey, _ = p.issue(name+"-server", "localhost", x509.ExtKeyUsageServerAuth)
	return p
}

func (p *testPKI) newKey() *ecdsa.PrivateKey {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		p.t.Fatal(err)
	}
	return k
}

func (p *testPKI) write(name, typ string, der []byte) string {
	path := filepath.Join(p.dir, name)
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		p.t.Fatal(err)
	}
	return path
}

// issue signs a certificate for cn and writes it and its key; servers get
// the SANs 127.0.0.1 and localhost.
func (p *testPKI) issue(file, cn string, usage x509.ExtKeyUsage) (certFile, keyFile string, c tls.Certificate) {
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

// client returns a client certificate for cn.
func (p *testPKI) client(cn string) (certFile, keyFile string, c tls.Certificate) {
	return p.issue("client-"+strings.ReplaceAll(cn, " ", "_"), cn, x509.ExtKeyUsageClientAuth)
}

// clientTLS trusts the CA and presents certs.
func (p *testPKI) clientTLS(certs ...tls.Certificate) *tls.Config {
	return &tls.Config{RootCAs: p.pool, Certificates: certs, MinVersion: tls.VersionTLS12}
}

// serverTLS is the config.TLS of a listener; mutual adds the client CA.
func (p *testPKI) serverTLS(mutual bool) config.TLS {
	t := config.TLS{CertFile: p.ServerCert, KeyFile: p.ServerKey}
	if mutual {
		t.ClientCAFile = p.CAFile
	}
	return t
}

// logCapture is a slog handler target that keeps every line.
type logCapture struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (c *logCapture) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.Write(p)
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

// lines returns the captured lines containing all of subs.
func (c *logCapture) lines(subs ...string) []string {
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

func (c *logCapture) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(c, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Credentials of the auth tests. Every value is distinctive so a test can
// grep logs and messages for it.
const (
	tokCI        = "tok-ci-7f3a9c1e5b2d4a6c8e0f"
	tokOps       = "tok-ops-2b4d6f8a0c1e3a5c7e9b"
	passAlice    = "pw-alice-9d8c7b6a5f4e3d2c"
	passBob      = "pw-bob-1a2b3c4d5e6f7a8b"
	wrongToken   = "tok-wrong-0e1d2c3b4a5f6e7d"
	wrongPass    = "pw-wrong-f0e1d2c3b4a59687"
	clientACN    = "client-a"
	clientNoACLs = "client-nobody"
)

// authConfig: ci reads "orders" only, ops reads everything, alice the
// "orders" prefix, bob "secret", client-a (a certificate) "public.x".
func authConfig() config.Auth {
	return config.Auth{
		Tokens: []config.Token{{Principal: "ci", Token: tokCI}, {Principal: "ops", Token: tokOps}},
		SASLPlain: []config.PlainUser{
			{Username: "alice", Password: passAlice},
			{Username: "bob", Password: passBob},
		},
		ACLs: map[string][]string{
			"ci":      {"orders"},
			"ops":     {"*"},
			"alice":   {"orders*"},
			"bob":     {"secret"},
			clientACN: {"public.x"},
		},
	}
}

// authTopics are the auth tests' topics, each with 20 records in
// partition 0.
var authTopics = []string{"orders", "orders-eu", "public.x", "secret"}

func newAuthEnv(t testing.TB) *testEnv {
	t.Helper()
	e := newTestEnv(t)
	for _, name := range authTopics {
		e.topic(name, 1, nil)
		e.produce(e.log(name, 0), produceOpts{codec: codec.None}, genRecs(20, ts0, name))
	}
	return e
}

// secureServer is a Server with both listeners on loopback.
type secureServer struct {
	http, kafka string
	logs        *logCapture
}

func startSecureServer(t testing.TB, cat Catalog, sec Security) *secureServer {
	t.Helper()
	logs := &logCapture{}
	s, err := Listen(ServerOptions{
		Catalog: cat, HTTPAddr: "127.0.0.1:0", KafkaAddr: "127.0.0.1:0",
		Logger: logs.logger(), Security: sec,
		Kafka: KafkaOptions{MaxFetchWait: 200 * time.Millisecond, FetchPollInterval: 5 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("server: %v", err)
		}
	})
	return &secureServer{http: s.HTTPAddr().String(), kafka: s.KafkaAddr().String(), logs: logs}
}

func mustSecurity(t testing.TB, httpTLS, kafkaTLS config.TLS, auth config.Auth) Security {
	t.Helper()
	sec, err := NewSecurity(httpTLS, kafkaTLS, auth)
	if err != nil {
		t.Fatal(err)
	}
	return sec
}
