package auth

import (
	"bytes"
	"errors"
	"fmt"
)

// maxPlainMessage bounds a SASL/PLAIN message (RFC 4616 allows 255 octets
// per field).
const maxPlainMessage = 3 * 1024

// ParsePlain splits a SASL/PLAIN message (RFC 4616: [authzid] NUL authcid
// NUL passwd). The authorization id, if given, must be the username, as
// Kafka requires. Errors never quote the message.
func ParsePlain(msg []byte) (username, password string, err error) {
	if len(msg) > maxPlainMessage {
		return "", "", fmt.Errorf("SASL/PLAIN message of %d bytes exceeds %d", len(msg), maxPlainMessage)
	}
	i := bytes.IndexByte(msg, 0)
	if i < 0 {
		return "", "", errors.New("SASL/PLAIN message has no NUL separator")
	}
	authz, rest := msg[:i], msg[i+1:]
	j := bytes.IndexByte(rest, 0)
	if j < 0 {
		return "", "", errors.New("SASL/PLAIN message has one NUL separator, want two")
	}
	user, pass := rest[:j], rest[j+1:]
	switch {
	case bytes.IndexByte(pass, 0) >= 0:
		return "", "", errors.New("SASL/PLAIN message has more than two NUL separators")
	case len(user) == 0:
		return "", "", errors.New("SASL/PLAIN username is empty")
	case len(pass) == 0:
		return "", "", errors.New("SASL/PLAIN password is empty")
	case len(authz) > 0 && !bytes.Equal(authz, user):
		return "", "", ErrAuthzMismatch
	}
	return string(user), string(pass), nil
}

var ErrAuthzMismatch = errors.New("SASL/PLAIN authorization id differs from the username")
