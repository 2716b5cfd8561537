package objstore

import (
	"os"

	"golang.org/x/sys/unix"
)

const haveOpenat2 = true

// openat2Beneath resolves rel below dirfd in one openat2(2) call that
// refuses any symbolic link and any escape from dirfd. EAGAIN (a rename
// raced the resolution) is retried.
func openat2Beneath(dirfd int, rel string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags), Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS}
	for {
		fd, err := unix.Openat2(dirfd, rel, &how)
		if err != unix.EINTR && err != unix.EAGAIN {
			return fd, err
		}
	}
}

func getETagXattr(f *os.File) (string, bool) {
	var buf [64]byte
	n, err := unix.Fgetxattr(int(f.Fd()), fsXattrName, buf[:])
	if err != nil || n > len(buf) {
		return "", false
	}
	s := string(buf[:n])
	return s, wellFormedETag(s)
}

func setETagXattr(f *os.File, etag string) {
	_ = unix.Fsetxattr(int(f.Fd()), fsXattrName, []byte(etag), 0)
}
