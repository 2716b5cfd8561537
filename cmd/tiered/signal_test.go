package main

import (
	"fmt"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// freeAddr is a loopback address with a port nothing listens on.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// TestSecondSignalForcesExit: the first SIGINT starts serve's graceful
// shutdown, which waits for an in-flight request (here a produce body that
// stopped arriving) up to shutdown_timeout; a second SIGINT ends the process
// at once, with a non-zero status, as operators expect of a second Ctrl-C.
func TestSecondSignalForcesExit(t *testing.T) {
	bin := buildBinary(t)
	httpAddr := freeAddr(t)
	serve := exec.Command(bin, "serve", "--data-dir", filepath.Join(t.TempDir(), "data"), "--http", httpAddr, "--kafka", freeAddr(t))
	if err := serve.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	exited := make(chan struct{})
	go func() { done <- serve.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = serve.Process.Kill()
		<-exited
	})
	for deadline := time.Now().Add(20 * time.Second); ; {
		resp, err := http.Get("http://" + httpAddr + "/readyz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// An in-flight request: a produce body that stops arriving.
	c, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST /v1/topics/t/partitions/0/records HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n{\"value\":")
	time.Sleep(300 * time.Millisecond)

	if err := serve.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("serve exited (%v) before its in-flight request finished; the test needs a shutdown that waits", err)
	case <-time.After(time.Second):
	}
	if err := serve.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if exitCode(err) == 0 {
			t.Fatalf("serve after a second SIGINT: exit 0, want non-zero")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("serve still running 5 s after a second SIGINT")
	}
}
