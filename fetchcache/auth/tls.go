package auth

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// NewServerTLSConfig loads a listener's TLS settings: the server
// certificate chain and key (PEM), and optionally a PEM bundle of client
// CAs, which turns on mutual TLS (every client must present a certificate
// signed by one of them; its subject common name becomes the principal,
// Kafka's "User:CN" with the mapping rule RULE:^CN=([^,]*).*$/$1/). TLS
// 1.2 is the minimum. It returns nil, nil when t enables no TLS.
// Certificates are read once; replacing the files needs a restart.
func NewServerTLSConfig(t TLS) (*tls.Config, error) {
	if !t.Enabled() {
		if t.ClientCAFile != "" {
			return nil, errors.New("client_ca_file needs cert_file and key_file too")
		}
		return nil, nil
	}
	if t.CertFile == "" || t.KeyFile == "" {
		return nil, errors.New("cert_file and key_file go together")
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("load certificate %s and key %s: %w", t.CertFile, t.KeyFile, err)
	}
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{cert}}
	if t.ClientCAFile != "" {
		pem, err := os.ReadFile(t.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("read client CAs: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("client CAs %s: no PEM certificate", t.ClientCAFile)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// CertPrincipal is the principal of a connection's verified client
// certificate, if it has one.
func CertPrincipal(st *tls.ConnectionState) (Principal, bool) {
	if st == nil || len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return Principal{}, false
	}
	c := st.PeerCertificates[0]
	name := c.Subject.CommonName
	if name == "" {
		name = c.Subject.String()
	}
	return Principal{Name: name, Mechanism: MechanismMTLS}, true
}
