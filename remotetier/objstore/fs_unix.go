//go:build unix

package objstore

import (
	"os"

	"golang.org/x/sys/unix"
)

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			return err
		}
	}
}

func funlock(f *os.File) { _ = unix.Flock(int(f.Fd()), unix.LOCK_UN) }
