package server

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// TestSecretsNeverLogged drives successful and failed authentication on
// both listeners with a capturing logger, then greps every log line, every
// response body and error message, and the printed configuration for the
// configured and the attempted secrets.
func TestSecretsNeverLogged(t *testing.T) {
	e := fetchkit.NewAuthEnv(t)
	pki := fetchkit.NewPKI(t, "secrets")
	sec := fetchkit.MustSecurity(t, pki.ServerTLS(false), pki.ServerTLS(false), fetchkit.AuthConfig())
	s := startSecureServer(t, e.Cat, sec)
	secrets := []string{fetchkit.TokCI, fetchkit.TokOps, fetchkit.PassAlice, fetchkit.PassBob, fetchkit.WrongToken, fetchkit.WrongPass}
	var messages []string

	// HTTP: every kind of credential, right and wrong, in every place.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: pki.ClientTLS(), DisableKeepAlives: true}}
	for _, auth := range []string{"", "Bearer " + fetchkit.TokCI, "Bearer " + fetchkit.TokOps, "Bearer " + fetchkit.WrongToken, "Bearer " + fetchkit.PassAlice,
		"Basic " + fetchkit.PassBob, "Bearer " + fetchkit.TokCI + " " + fetchkit.WrongPass, fetchkit.WrongToken} {
		for _, path := range []string{"/v1/topics", "/v1/topics/orders/partitions/0/records", "/v1/topics/secret/partitions/0",
			"/metrics", "/nope"} {
			status, body, challenge := httpGet(t, hc, "https://"+s.http+path, auth)
			messages = append(messages, fmt.Sprintf("%d %s %s", status, challenge, body))
		}
	}

	// Kafka: good and bad logins through franz-go, and raw SASL messages.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	tlsOpt := kgo.DialTLSConfig(pki.ClientTLS())
	for _, cred := range [][2]string{{"alice", fetchkit.PassAlice}, {"bob", fetchkit.PassBob}, {"alice", fetchkit.WrongPass}, {fetchkit.WrongPass, fetchkit.PassAlice}, {"bob", fetchkit.PassAlice}} {
		cl := fetchkit.MustClient(t, kgo.SeedBrokers(s.kafka), tlsOpt, saslOpt(cred[0], cred[1]), kgo.RequestRetries(0))
		_, err := kadm.NewClient(cl).Metadata(ctx, fetchkit.AuthTopics...)
		messages = append(messages, fmt.Sprint(err))
		if cred[0] == "alice" && cred[1] == fetchkit.PassAlice {
			errs := partitionErrors(t, cl, fetchkit.AuthTopics...)
			messages = append(messages, fmt.Sprint(errs))
		}
		cl.Close()
	}
	kafkaTLS := pki.ClientTLS()
	for _, msg := range []string{"alice" + fetchkit.PassAlice, "\x00alice\x00" + fetchkit.PassAlice + "\x00" + fetchkit.WrongPass, fetchkit.WrongPass + "\x00alice\x00" + fetchkit.PassAlice,
		"\x00" + fetchkit.PassBob + "\x00" + fetchkit.PassAlice} {
		c := dialSASL(t, s.kafka)
		c.RawConn.C = tlsClient(t, c.RawConn.C, kafkaTLS)
		c.handshake(1, "PLAIN")
		r := c.authenticate(2, msg)
		if r.ErrorMessage == nil {
			t.Fatalf("no error message for a bad login")
		}
		messages = append(messages, *r.ErrorMessage)
	}

	// Configuration and construction errors.
	messages = append(messages, fmt.Sprintf("%v %+v %#v", fetchkit.AuthConfig(), fetchkit.AuthConfig(), fetchkit.AuthConfig()))
	messages = append(messages, fmt.Sprintf("%v %+v %#v %s %v %+v", *sec.Auth, *sec.Auth, sec.Auth, sec.Auth, sec, sec))
	slogLine := &fetchkit.LogCapture{}
	slogLine.Logger().Info("objects", "auth", sec.Auth, "security", sec, "config", fetchkit.AuthConfig())
	messages = append(messages, slogLine.String())
	_, err := auth.NewAuthorizer(auth.Settings{SASLPlain: []auth.PlainUser{{Username: "a", Password: fetchkit.PassAlice}, {Username: "a", Password: fetchkit.PassBob + "\x00"}},
		Tokens: []auth.Token{{Principal: "", Token: fetchkit.TokCI}, {Principal: "x"}}})
	messages = append(messages, fmt.Sprint(err))

	logs := s.logs.String()
	for _, secret := range secrets {
		if strings.Contains(logs, secret) {
			t.Errorf("a log line holds secret %q:\n%s", secret, s.logs.Lines(secret))
		}
		for _, m := range messages {
			if strings.Contains(m, secret) {
				t.Errorf("a message holds secret %q: %q", secret, m)
			}
		}
	}
	// The test saw what it was meant to see.
	for _, want := range [][]string{
		{"authentication failed", "interface=http"},
		{"authentication failed", "interface=kafka", "username=alice"},
		{"topic access denied", "interface=http", "principal=User:ci"},
		{"topic access denied", "interface=kafka", "principal=User:alice"},
	} {
		if len(s.logs.Lines(want...)) == 0 {
			t.Errorf("no log line with %q:\n%s", want, logs)
		}
	}
	if !strings.Contains(strings.Join(messages, "\n"), "TOPIC_AUTHORIZATION_FAILED") {
		t.Error("no denial among the messages")
	}
}

// tlsClient runs a TLS handshake over c, trusting cfg's roots for
// 127.0.0.1.
func tlsClient(t *testing.T, c net.Conn, cfg *tls.Config) net.Conn {
	t.Helper()
	cfg = cfg.Clone()
	cfg.ServerName = "127.0.0.1"
	tc := tls.Client(c, cfg)
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	return tc
}
