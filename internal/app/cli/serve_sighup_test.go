package cli

import (
	"context"
	"maps"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tiered/tiered/internal/app/config"
	"github.com/tiered/tiered/internal/app/daemon"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
)

// waitLines waits up to 10 s for a log line containing all of subs.
func waitLines(t *testing.T, logs *fetchkit.LogCapture, subs ...string) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); len(logs.Lines(subs...)) == 0; {
		if time.Now().After(deadline) {
			t.Fatalf("no log line with %q in 10s:\n%s", subs, logs)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// newTestServe is an in-process serve on a fresh data dir and loopback
// listeners, with flags added to the defaults; the caller runs it.
func newTestServe(t *testing.T, flags map[string]string) (*daemon.Serve, *fetchkit.LogCapture) {
	t.Helper()
	all := map[string]string{"data-dir": filepath.Join(t.TempDir(), "data"), "http": "127.0.0.1:0", "kafka": "127.0.0.1:0", "shutdown_timeout": "10s"}
	maps.Copy(all, flags)
	cfg, err := config.Load(config.LoadOptions{Process: config.ProcessServe, Flags: all})
	if err != nil {
		t.Fatal(err)
	}
	logs := &fetchkit.LogCapture{}
	s, err := daemon.NewServe(context.Background(), daemon.ServeOptions{Config: cfg, Logger: logs.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	return s, logs
}

// SIGHUP reloads serve and logs the reload's audit line, as POST
// /v1/admin/reload does, with the signal as the principal.
func TestServeSIGHUPReloadIsAudited(t *testing.T) {
	s, logs := newTestServe(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- runServeProcess(ctx, s, logs.Logger()) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("serve stopped with %v", err)
		}
	}()
	// "serve listening" comes after SIGHUP is caught: the signal cannot
	// end the test process.
	waitLines(t, logs, "serve listening")
	<-s.Ready()
	if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	waitLines(t, logs, "level=INFO", "msg=audit", "principal=Signal:SIGHUP", "action=reload", "target=config", "result=ok")
}
