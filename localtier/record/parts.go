package record

// CopyAt copies into dst the bytes at position pos of parts taken as one
// run of bytes (a read's batches as the buffers they lie in, a batch
// possibly spanning two), as many as fit dst or are there, and returns how
// many it copied.
func CopyAt(parts [][]byte, pos int, dst []byte) int {
	n := 0
	for _, p := range parts {
		if n == len(dst) {
			break
		}
		if pos >= len(p) {
			pos -= len(p)
			continue
		}
		n += copy(dst[n:], p[pos:])
		pos = 0
	}
	return n
}
