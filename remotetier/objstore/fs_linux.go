package objstore

import (
	"os"

	"golang.org/x/sys/unix"
)

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
