package vfs

import (
	"bufio"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestOSLockReleasedOnKill locks from a child process, kills it with
// SIGKILL, and checks the kernel released the lock.
func TestOSLockReleasedOnKill(t *testing.T) {
	name := filepath.Join(t.TempDir(), ".lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), lockHolderEnv+"="+name)
	stdin, err := cmd.StdinPipe()
	must(t, err)
	defer stdin.Close()
	stdout, err := cmd.StdoutPipe()
	must(t, err)
	must(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "locked" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child said %q, %v", line, err)
	}

	_, err = Default.Lock(name)
	if !errors.Is(err, ErrLocked) {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("lock held by another process: got %v, want ErrLocked", err)
	}
	must(t, cmd.Process.Kill()) // SIGKILL: no chance to unlock
	_ = cmd.Wait()

	l, err := Default.Lock(name)
	if err != nil {
		t.Fatalf("lock after holder was killed: %v", err)
	}
	must(t, l.Close())
}
