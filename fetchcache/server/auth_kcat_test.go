package server

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/fetchcache/kafkasrv"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/tiered/tiered/internal/testkit/testrecs"
)

// TestKcatSecured consumes with librdkafka's kcat over SASL_SSL and over
// mutual TLS, and checks that a wrong password and a denied topic fail.
func TestKcatSecured(t *testing.T) {
	kcat := fetchkit.KcatPath(t)
	e := fetchkit.NewAuthEnv(t)
	pki := fetchkit.NewPKI(t, "kcat")
	certFile, keyFile, _ := pki.Client(fetchkit.ClientACN)
	saslSrv := startSecureServer(t, e.Cat, fetchkit.MustSecurity(t, auth.TLS{}, pki.ServerTLS(false), fetchkit.AuthConfig()))
	mtlsSrv := startSecureServer(t, e.Cat, fetchkit.MustSecurity(t, auth.TLS{}, pki.ServerTLS(true), fetchkit.AuthConfig()))
	sasl := func(user, pass string) []string {
		return []string{"-X", "security.protocol=SASL_SSL", "-X", "sasl.mechanisms=PLAIN",
			"-X", "sasl.username=" + user, "-X", "sasl.password=" + pass, "-X", "ssl.ca.location=" + pki.CAFile}
	}
	mtls := []string{"-X", "security.protocol=SSL", "-X", "ssl.ca.location=" + pki.CAFile,
		"-X", "ssl.certificate.location=" + certFile, "-X", "ssl.key.location=" + keyFile}
	// run consumes partition 0 of topic; quiet leaves librdkafka's own
	// log lines out of stderr.
	run := func(t *testing.T, addr, topic string, sec []string, quiet bool) (string, string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		args := append([]string{"-C", "-b", addr, "-t", topic, "-p", "0", "-o", "beginning", "-e", "-f", `%o %s\n`}, sec...)
		if quiet {
			args = append(args, "-q")
		}
		cmd := exec.CommandContext(ctx, kcat, args...)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		return string(out), stderr.String(), err
	}
	lines := func(topic string) string {
		var b strings.Builder
		for _, r := range testrecs.FromLog(t, e.Log(topic, 0)) {
			fmt.Fprintf(&b, "%d %s\n", r.Offset, r.Value)
		}
		return b.String()
	}
	t.Run("sasl_ssl", func(t *testing.T) {
		out, stderr, err := run(t, saslSrv.kafka, "orders-eu", sasl("alice", fetchkit.PassAlice), true)
		if err != nil || out != lines("orders-eu") {
			t.Fatalf("kcat: %v\nstdout:\n%.400s\nstderr:\n%s", err, out, stderr)
		}
	})
	t.Run("mutual_tls", func(t *testing.T) {
		out, stderr, err := run(t, mtlsSrv.kafka, "public.x", mtls, true)
		if err != nil || out != lines("public.x") {
			t.Fatalf("kcat: %v\nstdout:\n%.400s\nstderr:\n%s", err, out, stderr)
		}
	})
	t.Run("wrong_password", func(t *testing.T) {
		out, stderr, err := run(t, saslSrv.kafka, "orders", append(sasl("alice", fetchkit.WrongPass), "-m", "2"), false)
		if err == nil || out != "" || !strings.Contains(stderr, kafkasrv.SASLBadCredentials) {
			t.Fatalf("kcat with a wrong password: %v\nstdout:\n%.400s\nstderr:\n%s", err, out, stderr)
		}
	})
	t.Run("denied_topic", func(t *testing.T) {
		out, stderr, err := run(t, saslSrv.kafka, "secret", sasl("alice", fetchkit.PassAlice), true)
		if err == nil || out != "" || !strings.Contains(strings.ToLower(stderr), "authoriz") {
			t.Fatalf("kcat on a denied topic: %v\nstdout:\n%.400s\nstderr:\n%s", err, out, stderr)
		}
	})
	if len(saslSrv.logs.Lines("topic access denied", "principal=User:alice", "topic=secret")) == 0 {
		t.Fatalf("no denial line:\n%s", saslSrv.logs)
	}
}
