//go:build unix && !linux

package objstore

import (
	"os"

	"golang.org/x/sys/unix"
)

// Without openat2 keys are resolved by walking them (see fs_resolve.go).
const haveOpenat2 = false

func openat2Beneath(int, string, int) (int, error) { return -1, unix.ENOSYS }

// Without Linux xattrs the filesystem backend recomputes ETags from content.

func getETagXattr(*os.File) (string, bool) { return "", false }

func setETagXattr(*os.File, string) {}
