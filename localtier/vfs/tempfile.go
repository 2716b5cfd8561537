package vfs

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// createTempTries bounds the names CreateTemp tries before it gives up.
const createTempTries = 10000

// CreateTemp creates a new file in dir for reading and writing, as
// os.CreateTemp does: its name is pattern with the last "*" replaced by a
// random string (appended when pattern has no "*"), and it is created with
// O_EXCL and mode 0o600, so concurrent callers never get the same file.
// An empty dir means os.TempDir(). The caller removes the file.
func CreateTemp(fsys FS, dir, pattern string) (File, error) {
	if strings.ContainsRune(pattern, os.PathSeparator) {
		return nil, &os.PathError{Op: "createtemp", Path: pattern, Err: errors.New("pattern contains path separator")}
	}
	if dir == "" {
		dir = os.TempDir()
	}
	prefix, suffix := pattern, ""
	if i := strings.LastIndexByte(pattern, '*'); i >= 0 {
		prefix, suffix = pattern[:i], pattern[i+1:]
	}
	for try := 1; ; try++ {
		name := filepath.Join(dir, prefix+strconv.FormatUint(uint64(rand.Uint32()), 10)+suffix)
		f, err := fsys.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
		if err == nil || !errors.Is(err, os.ErrExist) || try == createTempTries {
			return f, err
		}
	}
}
