package cli

import (
	"context"
	"errors"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/testkit/testnet"
)

// TestDemoSaysWhatItDoes runs the demo with its default HTTP port taken and
// no kcat on PATH. It prints a line at once saying it is starting, a line
// naming the free port it took instead of the taken one (and none for the
// free default), that its kcat command needs kcat, which is not installed,
// and, on exit, the command that removes the data dir it keeps.
func TestDemoSaysWhatItDoes(t *testing.T) {
	addrs := testnet.LoopbackAddrs(t, 2)
	taken, err := net.Listen("tcp", addrs[0])
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	oldHTTP, oldKafka := demoHTTPAddr, demoKafkaAddr
	demoHTTPAddr, demoKafkaAddr = addrs[0], addrs[1]
	defer func() { demoHTTPAddr, demoKafkaAddr = oldHTTP, oldKafka }()
	t.Setenv("PATH", t.TempDir()) // no kcat

	dir := t.TempDir()
	var out, errb syncBuffer
	r := &Runner{Stdout: &out, Stderr: &errb}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan int, 1)
	go func() { done <- r.Run(ctx, []string{"demo", "--data-dir", dir}) }()
	deadline := time.Now().Add(60 * time.Second)
	for !strings.Contains(out.String(), "Stop with Ctrl-C") {
		select {
		case code := <-done:
			t.Fatalf("demo exited %d before its intro:\n%s\n%s", code, out.String(), errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no intro after 60 s:\n%s", out.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if code := <-done; code != 0 {
		t.Fatalf("demo exit %d: %s", code, errb.String())
	}
	got := lines(out.String())
	if want := "tiered demo: starting serve on data dir " + dir + " ..."; got[0] != want {
		t.Fatalf("first line %q, want %q", got[0], want)
	}
	text := out.String()
	moved := "tiered demo: " + addrs[0] + " is in use, so HTTP listens on 127.0.0.1:"
	if !strings.Contains(text, moved) || strings.Contains(text, "so Kafka listens") {
		t.Fatalf("output does not name the moved HTTP port (and only it):\n%s", text)
	}
	if !strings.Contains(text, "HTTP http://127.0.0.1:") || !strings.Contains(text, "Kafka "+addrs[1]) {
		t.Fatalf("output does not show the listeners:\n%s", text)
	}
	if !strings.Contains(text, "needs kcat, which is not on your PATH") {
		t.Fatalf("output does not say kcat is missing:\n%s", text)
	}
	if last, want := got[len(got)-1], "remove it with: rm -rf "+dir; last != want {
		t.Fatalf("last line %q, want %q", last, want)
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the data dir is not kept: %v", err)
	}
}

func TestDemoKcatNote(t *testing.T) {
	for _, tc := range []struct {
		look func(string) (string, error)
		want string
	}{
		{func(string) (string, error) { return "/opt/bin/kcat", nil }, "needs kcat: found at /opt/bin/kcat"},
		{func(string) (string, error) { return "", errors.New("not found") }, "needs kcat, which is not on your PATH: install it"},
	} {
		if got := kcatNote(tc.look); !strings.HasPrefix(got, tc.want) {
			t.Errorf("kcatNote = %q, want %q", got, tc.want)
		}
	}
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"/tmp/tiered-demo-123": "/tmp/tiered-demo-123",
		"/tmp/a b":             "'/tmp/a b'",
		"/tmp/it's":            `'/tmp/it'\''s'`,
	} {
		if got := shellQuote(in); got != want {
			t.Errorf("shellQuote(%q) = %q, want %q", in, got, want)
		}
	}
}
