package auth

import (
	"bytes"
	"strings"
	"testing"
	"time"
)

func TestParsePlain(t *testing.T) {
	for _, tc := range []struct {
		msg        string
		user, pass string
		err        bool
	}{
		{"\x00alice\x00pw", "alice", "pw", false},
		{"alice\x00alice\x00pw", "alice", "pw", false},
		{"bob\x00alice\x00pw", "", "", true}, // authzid differs
		{"alice\x00pw", "", "", true},
		{"\x00\x00pw", "", "", true},
		{"\x00alice\x00", "", "", true},
		{"\x00alice\x00p\x00w", "", "", true},
		{"", "", "", true},
		{"\x00alice\x00" + strings.Repeat("p", maxPlainMessage), "", "", true},
	} {
		u, p, err := ParsePlain([]byte(tc.msg))
		if (err != nil) != tc.err || u != tc.user || p != tc.pass {
			t.Errorf("ParsePlain(%q) = %q, %q, %v", tc.msg, u, p, err)
		}
		if err != nil && (strings.Contains(err.Error(), "pw") || strings.Contains(err.Error(), "alice")) {
			t.Errorf("ParsePlain(%q) error quotes the message: %v", tc.msg, err)
		}
	}
}

// auth.FuzzParsePlain: no panic; an accepted message is exactly
// [authzid] NUL user NUL pass with non-empty NUL-free fields and the
// authzid empty or the user; errors never quote the input.
func FuzzParsePlain(f *testing.F) {
	for _, s := range []string{"\x00alice\x00pw", "alice\x00alice\x00pw", "x\x00y", "\x00\x00", "\x00a\x00b\x00c", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, msg []byte) {
		user, pass, err := ParsePlain(msg)
		if err != nil {
			if len(msg) >= 8 && strings.Contains(err.Error(), string(msg)) {
				t.Fatalf("error quotes the message: %v", err)
			}
			return
		}
		if user == "" || pass == "" || strings.ContainsRune(user, 0) || strings.ContainsRune(pass, 0) {
			t.Fatalf("accepted bad fields %q %q", user, pass)
		}
		if rebuilt := []byte("\x00" + user + "\x00" + pass); !bytes.Equal(rebuilt, msg) && !bytes.Equal(append([]byte(user), rebuilt...), msg) {
			t.Fatalf("fields %q %q do not rebuild %q", user, pass, msg)
		}
	})
}

func TestLogLimiter(t *testing.T) {
	l := newLogLimiter(10 * time.Second)
	now := time.Unix(1000, 0)
	l.now = func() time.Time { return now }
	if n, ok := l.allow("a"); !ok || n != 0 {
		t.Fatal("first event not logged")
	}
	for range 3 {
		if _, ok := l.allow("a"); ok {
			t.Fatal("repeat within the interval logged")
		}
	}
	if _, ok := l.allow("b"); !ok {
		t.Fatal("another key not logged")
	}
	now = now.Add(10 * time.Second)
	if n, ok := l.allow("a"); !ok || n != 3 {
		t.Fatalf("after the interval: logged %v, suppressed %d, want 3", ok, n)
	}
	for i := range logLimiterMaxKeys + 10 {
		l.allow(string(rune(i)) + "k")
	}
	if len(l.keys) > logLimiterMaxKeys {
		t.Fatalf("%d keys kept", len(l.keys))
	}
}
