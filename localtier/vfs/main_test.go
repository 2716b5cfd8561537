package vfs

import (
	"fmt"
	"io"
	"os"
	"testing"

	"go.uber.org/goleak"
)

// lockHolderEnv makes the test binary act as a lock-holding child process
// for TestOSLockReleasedOnKill: it locks the named file, says so on stdout,
// and waits to be killed.
const lockHolderEnv = "VFS_TEST_LOCK_HOLDER"

func TestMain(m *testing.M) {
	if name := os.Getenv(lockHolderEnv); name != "" {
		holdLock(name)
		return
	}
	goleak.VerifyTestMain(m)
}

func holdLock(name string) {
	if _, err := Default.Lock(name); err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	fmt.Println("locked")
	_, _ = io.Copy(io.Discard, os.Stdin) // blocks until the parent kills us
	os.Exit(3)
}
