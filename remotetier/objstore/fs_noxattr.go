//go:build !linux

package objstore

import "os"

// Without Linux xattrs the filesystem backend recomputes ETags from content.

func getETagXattr(*os.File) (string, bool) { return "", false }

func setETagXattr(*os.File, string) {}
