package kafkasrv

import (
	"context"
	"errors"
	"time"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// SASL API keys and the versions served when SASL/PLAIN is configured.
const (
	saslHandshakeKey    int16 = 17
	saslAuthenticateKey int16 = 36
)

// saslHandshakeAPI and saslAuthenticateAPI serve SaslHandshake v0-1 and
// SaslAuthenticate v0-2, before authentication too.
var (
	saslHandshakeAPI    = api{key: saslHandshakeKey, min: 0, max: 1, preAuth: true, handle: handler((*KafkaServer).saslHandshake)}
	saslAuthenticateAPI = api{key: saslAuthenticateKey, min: 0, max: 2, preAuth: true, handle: handler((*KafkaServer).saslAuthenticate)}
)

// saslAPIVersions is what ApiVersions adds when SASL/PLAIN is configured.
var saslAPIVersions = versionsOf(saslAPIs)

// MechanismPLAIN is the only SASL mechanism served.
const MechanismPLAIN = "PLAIN"

// Kafka's messages for failed SASL/PLAIN logins (PlainSaslServer).
const (
	SASLBadCredentials = "Authentication failed: Invalid username or password"
	SASLBadMessage     = "Authentication failed: malformed SASL/PLAIN message"
	SASLAuthzMismatch  = "Authentication failed: Client requested an authorization id that is different from username"
)

// errSASLState is a request the connection's authentication state does not
// allow (a non-SASL request before authenticating, SASL out of order); the
// connection is closed.
var errSASLState = errors.New("illegal SASL state")

// errSASLFailed is a failed SASL/PLAIN login; the connection is closed.
var errSASLFailed = errors.New("SASL authentication failed")

// saslState is a connection's progress through SASL.
type saslState struct {
	mechanism bool  // a SaslHandshake chose PLAIN
	version   int16 // of that SaslHandshake: v0 sends the token as a raw frame
	done      bool  // authenticated through SASL
}

// preAuthAPI reports whether a request may come before authentication.
func preAuthAPI(key int16) bool {
	a := registered(key)
	return a != nil && a.preAuth
}

// authenticated reports whether kc may make requests other than
// ApiVersions and SASL ones.
func (kc *kafkaConn) authenticated() bool {
	return !kc.s.o.Auth.SASLRequired() || kc.sasl.done || !kc.principal.Anonymous()
}

// remote is the client's address for logs.
func (kc *kafkaConn) remote() string {
	if kc == nil || kc.c == nil {
		return ""
	}
	return kc.c.RemoteAddr().String()
}

// principalOf is kc's principal; anonymous without a connection.
func (kc *kafkaConn) principalOf() auth.Principal {
	if kc == nil {
		return auth.Principal{}
	}
	return kc.principal
}

type permKey struct{}

// withPerm returns ctx carrying the permission of the API being served
// (its registry entry's perm), which allowed checks.
func withPerm(ctx context.Context, p auth.Permission) context.Context {
	return context.WithValue(ctx, permKey{}, p)
}

// permOf is the permission of the API being served (withPerm); admin,
// which no topic grants, when none was set.
func permOf(ctx context.Context) auth.Permission {
	if perm, ok := ctx.Value(permKey{}).(auth.Permission); ok {
		return perm
	}
	return auth.PermAdmin
}

// allowed reports whether the connection's principal has the permission
// of the API being served (permOf) on topic and logs a denial.
func (s *KafkaServer) allowed(ctx context.Context, kc *kafkaConn, topic string) bool {
	perm := permOf(ctx)
	p := kc.principalOf()
	if s.o.Auth.May(p, perm, topic) {
		return true
	}
	s.o.Auth.LogDenied(s.log, fetchcache.InterfaceKafka, p, perm, topic, kc.remote())
	return false
}

// saslHandshake answers SaslHandshake: PLAIN is accepted once per
// connection; another mechanism gets UNSUPPORTED_SASL_MECHANISM and a
// repeated handshake ILLEGAL_SASL_STATE, and both close the connection
// after the response, as Kafka does.
func (s *KafkaServer) saslHandshake(_ context.Context, kc *kafkaConn, q *kmsg.SASLHandshakeRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrSASLHandshakeResponse()
	r.Version = q.Version
	r.SupportedMechanisms = []string{MechanismPLAIN}
	switch {
	case kc == nil:
		r.ErrorCode = kerr.IllegalSaslState.Code
		return r, fetchcache.CodeIllegalSASLState, 0
	case kc.sasl.mechanism || kc.sasl.done:
		r.ErrorCode = kerr.IllegalSaslState.Code
		kc.closeAfter = true
		s.log.Warn("kafka SASL handshake repeated, closing connection", "remote", kc.remote())
		return r, fetchcache.CodeIllegalSASLState, 0
	case q.Mechanism != MechanismPLAIN:
		r.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		kc.closeAfter = true
		s.o.Auth.LogAuthFailure(s.log, fetchcache.InterfaceKafka, q.Mechanism, "", kc.remote(), "unsupported SASL mechanism")
		return r, fetchcache.CodeUnsupportedSASLMechanism, 0
	}
	kc.sasl.mechanism, kc.sasl.version = true, q.Version
	return r, fetchcache.CodeOK, 0
}

// saslAuthenticate answers SaslAuthenticate after a v1 handshake. A failed
// login answers SASL_AUTHENTICATION_FAILED and closes the connection.
func (s *KafkaServer) saslAuthenticate(_ context.Context, kc *kafkaConn, q *kmsg.SASLAuthenticateRequest) (kmsg.Response, string, time.Duration) {
	r := kmsg.NewPtrSASLAuthenticateResponse()
	r.Version = q.Version
	r.SASLAuthBytes = []byte{}
	if kc == nil || !kc.sasl.mechanism || kc.sasl.version < 1 || kc.sasl.done {
		r.ErrorCode = kerr.IllegalSaslState.Code
		msg := "SaslAuthenticate needs a SaslHandshake v1 for PLAIN first, once per connection"
		r.ErrorMessage = &msg
		if kc != nil {
			kc.closeAfter = true
			s.log.Warn("kafka SaslAuthenticate out of order, closing connection", "remote", kc.remote())
		}
		return r, fetchcache.CodeIllegalSASLState, 0
	}
	if msg, ok := s.login(kc, q.SASLAuthBytes); !ok {
		r.ErrorCode = kerr.SaslAuthenticationFailed.Code
		r.ErrorMessage = &msg
		kc.closeAfter = true
		return r, fetchcache.CodeSASLAuthenticationFailed, 0
	}
	return r, fetchcache.CodeOK, 0
}

// rawSASL handles the token frame that follows a SaslHandshake v0: success
// answers an empty token frame; failure closes the connection without a
// response, as Kafka does for v0 clients.
func (s *KafkaServer) rawSASL(kc *kafkaConn, frame []byte) ([]byte, string, error) {
	if _, ok := s.login(kc, frame); !ok {
		return nil, fetchcache.CodeSASLAuthenticationFailed, errSASLFailed
	}
	return []byte{0, 0, 0, 0}, fetchcache.CodeOK, nil
}

// login checks a SASL/PLAIN message and, when good, makes its user the
// connection's principal. On failure it logs (never the password) and
// returns the message for the client.
func (s *KafkaServer) login(kc *kafkaConn, msg []byte) (string, bool) {
	kc.sasl.mechanism = false
	user, pass, err := auth.ParsePlain(msg)
	if err != nil {
		reason, out := "malformed PLAIN message", SASLBadMessage
		if errors.Is(err, auth.ErrAuthzMismatch) {
			reason, out = "authorization id differs from username", SASLAuthzMismatch
		}
		s.o.Auth.LogAuthFailure(s.log, fetchcache.InterfaceKafka, MechanismPLAIN, "", kc.remote(), reason)
		return out, false
	}
	p, ok := s.o.Auth.AuthenticatePlain(user, pass)
	if !ok {
		// Log the username only when it is one: an unknown "username" may
		// be a password typed in the wrong field.
		logged := ""
		if s.o.Auth.KnownUser(user) {
			logged = user
		}
		s.o.Auth.LogAuthFailure(s.log, fetchcache.InterfaceKafka, MechanismPLAIN, logged, kc.remote(), "invalid username or password")
		return SASLBadCredentials, false
	}
	kc.principal, kc.sasl.done = p, true
	return "", true
}
