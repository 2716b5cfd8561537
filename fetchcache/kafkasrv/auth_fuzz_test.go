package kafkasrv

import (
	"errors"
	"testing"
	"time"

	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/tiered/tiered/internal/testkit/fetchkit"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// FuzzKafkaSASL feeds two arbitrary frames to a fresh connection of a
// SASL-requiring server (the second as a raw token after a v0 handshake):
// no panic, and a connection that did not log in can still not read.
func FuzzKafkaSASL(f *testing.F) {
	e := fetchkit.NewAuthEnv(f)
	z, err := auth.NewAuthorizer(fetchkit.AuthConfig())
	if err != nil {
		f.Fatal(err)
	}
	s, err := NewKafkaServer(KafkaOptions{Catalog: e.Cat, Auth: z, MaxFetchWait: time.Millisecond})
	if err != nil {
		f.Fatal(err)
	}
	hs := func(v int16, mech string) []byte {
		r := kmsg.NewPtrSASLHandshakeRequest()
		r.Version, r.Mechanism = v, mech
		return requestFrame(r, 1)
	}
	auth := func(v int16, msg string) []byte {
		r := kmsg.NewPtrSASLAuthenticateRequest()
		r.Version, r.SASLAuthBytes = v, []byte(msg)
		return requestFrame(r, 2)
	}
	md := kmsg.NewPtrMetadataRequest()
	md.Version = 9
	mdFrame := requestFrame(md, 3)
	f.Add(hs(1, "PLAIN"), auth(2, "\x00alice\x00"+fetchkit.PassAlice))
	f.Add(hs(1, "PLAIN"), auth(0, "\x00alice\x00"+fetchkit.WrongPass))
	f.Add(hs(0, "PLAIN"), []byte("\x00bob\x00"+fetchkit.PassBob))
	f.Add(hs(1, "GSSAPI"), mdFrame)
	f.Add(auth(1, "\x00alice\x00"+fetchkit.PassAlice), mdFrame)
	f.Add(mdFrame, mdFrame)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		kc := &kafkaConn{s: s, stopping: make(chan struct{})}
		step := func(frame []byte) bool {
			var err error
			if kc.sasl.mechanism && kc.sasl.version == 0 {
				_, _, err = s.rawSASL(kc, frame)
			} else {
				_, _, err = s.handle(kc, frame)
			}
			return err == nil && !kc.closeAfter
		}
		if step(a) {
			step(b)
		}
		loggedIn := kc.sasl.done
		if loggedIn != !kc.principal.Anonymous() || loggedIn != kc.authenticated() {
			t.Fatalf("state: done %v, principal %v, authenticated %v", kc.sasl.done, kc.principal, kc.authenticated())
		}
		if loggedIn {
			if !s.o.Auth.KnownUser(kc.principal.Name) {
				t.Fatalf("logged in as unknown user %q", kc.principal.Name)
			}
			return
		}
		kc.sasl = saslState{}
		if _, _, err := s.handle(kc, mdFrame); !errors.Is(err, errSASLState) {
			t.Fatalf("metadata without login: %v", err)
		}
	})
}
