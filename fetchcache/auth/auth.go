// Package auth owns who may do what on the fetch service's listeners: principals
// (bearer token, SASL/PLAIN, client certificate), the authorizer and its
// per-principal ACLs (read, write, groups, admin: Permission, May), the audit
// line of a change (Audit), the TLS settings of a listener, and the settings
// types the process configuration embeds (Settings, ACL, TLS, Secret).
// The listeners (fetchcache/httpapi, fetchcache/kafkasrv) call it; it
// knows nothing of them.
package auth

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tiered/tiered/localtier/topicconfig"
)

// Authentication mechanisms a Principal came through.
const (
	MechanismToken     = "token"      // HTTP bearer token
	MechanismSASLPlain = "sasl_plain" // Kafka SASL/PLAIN
	MechanismMTLS      = "mtls"       // verified client certificate (HTTP or Kafka)
	MechanismSignal    = "signal"     // a signal to the process (SIGHUP's reload), for audit lines
)

// Principal is who a request comes from. The zero Principal is the
// anonymous client of a listener that does not authenticate.
type Principal struct {
	// Name is the token's principal, the SASL/PLAIN username, or the
	// client certificate's subject common name (the whole subject DN when
	// it has no CN). ACL entries are keyed by it.
	Name string
	// Mechanism is one of MechanismToken, MechanismSASLPlain,
	// MechanismMTLS; empty for the anonymous principal.
	Mechanism string
}

// Anonymous reports whether p is the unauthenticated principal.
func (p Principal) Anonymous() bool { return p.Mechanism == "" }

// String is Kafka's form: "User:<name>", or "User:ANONYMOUS"; a signal's
// principal is "Signal:<name>".
func (p Principal) String() string {
	switch {
	case p.Anonymous():
		return "User:ANONYMOUS"
	case p.Mechanism == MechanismSignal:
		return "Signal:" + p.Name
	}
	return "User:" + p.Name
}

// SignalPrincipal is the principal of a change a signal to the process
// made (SignalPrincipal("SIGHUP") for serve's reload), for audit lines; it
// is never authenticated and no ACL applies to it.
func SignalPrincipal(signal string) Principal {
	return Principal{Name: signal, Mechanism: MechanismSignal}
}

type principalKey struct{}

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFromContext returns the principal the HTTP handler authenticated
// for the request whose context this is (anonymous when none).
func PrincipalFromContext(ctx context.Context) Principal {
	p, _ := ctx.Value(principalKey{}).(Principal)
	return p
}

// Authorizer holds the credentials and per-principal ACLs of both
// listeners (the auth section of the configuration). It is immutable and
// safe for concurrent use. A nil *Authorizer authenticates nobody and
// allows everything, as does one built from an empty Settings.
//
// Authentication, per listener:
//   - HTTP requires "Authorization: Bearer <token>" when any token is
//     configured (a verified client certificate also identifies the client
//     when the HTTP listener has a client CA); /healthz and /readyz never
//     do. Without tokens and without mutual TLS, HTTP clients are
//     anonymous.
//   - Kafka requires SASL/PLAIN when any SASL user is configured; with a
//     client CA on the Kafka listener, the verified certificate's common
//     name is the principal and SASL/PLAIN, if the client also does it,
//     replaces it. Without either, Kafka clients are anonymous.
//
// Authorization (May): the anonymous principal may do everything (the
// listener does not authenticate, as before auth existed). When no ACL is
// configured at all, every authenticated principal may do everything
// (authentication without authorization, as a Kafka broker without an
// authorizer). Once any ACL is configured, a principal may do exactly what
// its entry allows (ACL: read, write and groups by pattern — exact names,
// prefixes ending in '*', or "*" — and admin), and a principal without an
// entry may do nothing.
type Authorizer struct {
	tokens []tokenCred
	users  map[string]Secret
	acls   map[string]principalACL // nil: authorization disabled
	deny   *logLimiter
}

type tokenCred struct {
	principal string
	token     Secret
}

// Permission is what an HTTP route or a Kafka API needs of its principal.
type Permission uint8

// The permissions, from none to cluster administration.
const (
	// PermNone needs only authentication (ApiVersions, SASL, an unknown path).
	PermNone Permission = iota
	// PermDescribe needs read or write on the topic, or admin: see that it
	// exists and how it is configured (Metadata, the topic list, GET config).
	PermDescribe
	// PermRead needs read on the topic: its records and offsets.
	PermRead
	// PermWrite needs write on the topic: produce.
	PermWrite
	// PermAdmin needs admin: topic create, alter and delete, reload, group
	// administration, /metrics. It is cluster-wide; no topic is named.
	PermAdmin
)

// String names the permission as the documentation does.
func (p Permission) String() string {
	switch p {
	case PermNone:
		return "none"
	case PermDescribe:
		return "describe"
	case PermRead:
		return "read"
	case PermWrite:
		return "write"
	case PermAdmin:
		return "admin"
	}
	return fmt.Sprintf("Permission(%d)", uint8(p))
}

// patterns is a compiled list of name patterns.
type patterns struct {
	all      bool
	exact    map[string]bool
	prefixes []string
}

func (a patterns) match(name string) bool {
	if a.all || a.exact[name] {
		return true
	}
	for _, p := range a.prefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// principalACL is one principal's compiled ACL.
type principalACL struct {
	read, write, groups patterns
	admin               bool
}

// CheckTopicPattern accepts "*", a topic name Kafka accepts, or a prefix of
// one followed by '*'.
func CheckTopicPattern(pat string) error {
	return checkPattern(pat, func(prefix string) error {
		if topicconfig.ValidateTopicName(prefix+"x") != nil {
			return fmt.Errorf("%q: a topic prefix may contain only ASCII letters, digits, '.', '_' and '-'", pat)
		}
		return nil
	}, func(name string) error {
		if err := topicconfig.ValidateTopicName(name); err != nil {
			return fmt.Errorf("%q: %w", name, err)
		}
		return nil
	})
}

// CheckGroupPattern accepts "*", a consumer group ID, or a prefix of one
// followed by '*'. A group ID is any non-empty string (as in Kafka) free of
// control characters.
func CheckGroupPattern(pat string) error {
	check := func(s string) error {
		for _, r := range s {
			if r < 0x20 || r == 0x7f {
				return fmt.Errorf("%q: a group ID must not contain control characters", pat)
			}
		}
		return nil
	}
	if pat == "" {
		return errors.New(`"": a group ID must not be empty`)
	}
	return checkPattern(pat, check, check)
}

// checkPattern checks pat: "*", a prefix followed by '*' (checkPrefix), or
// an exact name (checkExact).
func checkPattern(pat string, checkPrefix, checkExact func(string) error) error {
	prefix, isPrefix := strings.CutSuffix(pat, "*")
	switch {
	case pat == "*":
		return nil
	case strings.Contains(prefix, "*"):
		return fmt.Errorf("%q: '*' may appear only at the end", pat)
	case isPrefix:
		return checkPrefix(prefix)
	default:
		return checkExact(pat)
	}
}

// compile checks and compiles the patterns of auth.acls.<principal>.<field>.
func compile(pats []string, path string, check func(string) error, errs *[]error) patterns {
	out := patterns{exact: map[string]bool{}}
	for i, pat := range pats {
		if err := check(pat); err != nil {
			*errs = append(*errs, fmt.Errorf("%s[%d]: %w", path, i, err))
			continue
		}
		switch prefix, isPrefix := strings.CutSuffix(pat, "*"); {
		case pat == "*":
			out.all = true
		case isPrefix:
			out.prefixes = append(out.prefixes, prefix)
		default:
			out.exact[pat] = true
		}
	}
	return out
}

// NewAuthorizer checks a and builds an Authorizer from it. Problems are
// reported per field, never quoting a secret.
func NewAuthorizer(a Settings) (*Authorizer, error) {
	z := &Authorizer{users: map[string]Secret{}, deny: newLogLimiter(denialLogInterval)}
	var errs []error
	for i, t := range a.Tokens {
		switch {
		case strings.TrimSpace(t.Principal) == "":
			errs = append(errs, fmt.Errorf("auth.tokens[%d].principal: must not be empty", i))
		case t.Token == "":
			errs = append(errs, fmt.Errorf("auth.tokens[%d].token: must not be empty", i))
		default:
			z.tokens = append(z.tokens, tokenCred{principal: t.Principal, token: t.Token})
		}
	}
	for i, u := range a.SASLPlain {
		switch {
		case u.Username == "" || strings.ContainsRune(u.Username, 0):
			errs = append(errs, fmt.Errorf("auth.sasl_plain[%d].username: must be non-empty and free of NUL", i))
		case u.Password == "" || strings.ContainsRune(u.Password.Reveal(), 0):
			errs = append(errs, fmt.Errorf("auth.sasl_plain[%d].password: must be non-empty and free of NUL", i))
		default:
			if _, dup := z.users[u.Username]; dup {
				errs = append(errs, fmt.Errorf("auth.sasl_plain[%d].username: %q is configured twice", i, u.Username))
			}
			z.users[u.Username] = u.Password
		}
	}
	if len(a.ACLs) > 0 {
		z.acls = make(map[string]principalACL, len(a.ACLs))
		names := make([]string, 0, len(a.ACLs))
		for n := range a.ACLs {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, name := range names {
			e, p := a.ACLs[name], "auth.acls."+name
			z.acls[name] = principalACL{
				read:   compile(e.Read, p+".read", CheckTopicPattern, &errs),
				write:  compile(e.Write, p+".write", CheckTopicPattern, &errs),
				groups: compile(e.Groups, p+".groups", CheckGroupPattern, &errs),
				admin:  e.Admin,
			}
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("auth config: %w", err)
	}
	return z, nil
}

// Format prints a summary, never a credential, for every verb (and so in
// log/slog attributes).
func (z Authorizer) Format(f fmt.State, _ rune) {
	fmt.Fprintf(f, "Authorizer{tokens: %d, sasl_plain users: %d, acl principals: %d}", len(z.tokens), len(z.users), len(z.acls))
}

// TokensRequired reports whether the HTTP API requires a bearer token.
func (z *Authorizer) TokensRequired() bool { return z != nil && len(z.tokens) > 0 }

// SASLRequired reports whether the Kafka listener requires SASL/PLAIN.
func (z *Authorizer) SASLRequired() bool { return z != nil && len(z.users) > 0 }

// KnownUser reports whether username is a configured SASL/PLAIN user, so a
// failed login may log it (an unknown "username" may be a password typed in
// the wrong field).
func (z *Authorizer) KnownUser(username string) bool {
	if z == nil {
		return false
	}
	_, ok := z.users[username]
	return ok
}

// HasACLs reports whether any topic allow-list is configured.
func (z *Authorizer) HasACLs() bool { return z != nil && z.acls != nil }

// AuthenticateToken returns the principal of a bearer token. Every
// configured token is compared, each in constant time.
func (z *Authorizer) AuthenticateToken(token string) (Principal, bool) {
	if z == nil {
		return Principal{}, false
	}
	found := -1
	for i, t := range z.tokens {
		if t.token.Equal(token) && found < 0 {
			found = i
		}
	}
	if found < 0 {
		return Principal{}, false
	}
	return Principal{Name: z.tokens[found].principal, Mechanism: MechanismToken}, true
}

// plainDummy is compared against when the username is unknown, so an
// unknown user costs the same as a wrong password.
const plainDummy Secret = "tiered-no-such-user-0123456789abcdef"

// AuthenticatePlain checks a SASL/PLAIN username and password.
func (z *Authorizer) AuthenticatePlain(username, password string) (Principal, bool) {
	if z == nil {
		return Principal{}, false
	}
	want, known := z.users[username]
	if !known {
		want = plainDummy
	}
	if !want.Equal(password) || !known {
		return Principal{}, false
	}
	return Principal{Name: username, Mechanism: MechanismSASLPlain}, true
}

// May reports whether p has permission perm on topic (ignored for PermNone
// and PermAdmin). See Authorizer for who may do what.
func (z *Authorizer) May(p Principal, perm Permission, topic string) bool {
	if !z.Enforced(p) || perm == PermNone {
		return true
	}
	acl, ok := z.acls[p.Name]
	if !ok {
		return false
	}
	switch perm {
	case PermDescribe:
		return acl.admin || acl.read.match(topic) || acl.write.match(topic)
	case PermRead:
		return acl.read.match(topic)
	case PermWrite:
		return acl.write.match(topic)
	case PermAdmin:
		return acl.admin
	}
	return false
}

// Enforced reports whether ACLs apply to p: some are configured and p is
// authenticated.
func (z *Authorizer) Enforced(p Principal) bool {
	return z != nil && z.acls != nil && !p.Anonymous()
}

// GroupAllowed reports whether p may join and commit offsets for the
// consumer group (auth.acls.<principal>.groups); the Kafka group APIs ask
// it for every group a request names.
func (z *Authorizer) GroupAllowed(p Principal, group string) bool {
	if !z.Enforced(p) {
		return true
	}
	acl, ok := z.acls[p.Name]
	return ok && acl.groups.match(group)
}

// Audit results besides an error code.
const (
	AuditOK     = "ok"
	AuditDenied = "denied"
)

// Audit logs one change a principal made or tried (topic create, alter or
// delete, reload, group offset reset): INFO "audit" with the principal,
// the action (e.g. "topic.alter"), its target (a topic, "config") and the
// result (AuditOK, AuditDenied or the error code).
func Audit(log *slog.Logger, p Principal, action, target, result string) {
	log.Info("audit", "principal", p.String(), "action", action, "target", target, "result", result)
}

// denialLogInterval spaces the log lines of repeated denials of one
// principal on one topic (or failed logins from one address).
const denialLogInterval = 10 * time.Second

// LogDenied logs a refused request, at most once per denialLogInterval per
// interface, principal, permission and topic; the line counts the ones left
// out: "topic access denied" for a topic's permission, "cluster access
// denied" for admin.
func (z *Authorizer) LogDenied(log *slog.Logger, iface string, p Principal, perm Permission, topic, remote string) {
	if z == nil {
		return
	}
	if n, ok := z.deny.allow(iface + "\x00" + p.Name + "\x00" + perm.String() + "\x00" + topic); ok {
		if perm == PermAdmin {
			log.Warn("cluster access denied", "interface", iface, "principal", p.String(), "mechanism", p.Mechanism,
				"permission", perm.String(), "remote", remote, "suppressed", n)
			return
		}
		log.Warn("topic access denied", "interface", iface, "principal", p.String(), "mechanism", p.Mechanism,
			"permission", perm.String(), "topic", topic, "remote", remote, "suppressed", n)
	}
}

// LogGroupDenied logs a request for a consumer group the principal's
// groups patterns do not allow ("group access denied"), rate-limited as
// LogDenied.
func (z *Authorizer) LogGroupDenied(log *slog.Logger, iface string, p Principal, group, remote string) {
	if z == nil {
		return
	}
	if n, ok := z.deny.allow(iface + "\x00" + p.Name + "\x00group\x00" + group); ok {
		log.Warn("group access denied", "interface", iface, "principal", p.String(), "mechanism", p.Mechanism,
			"group", group, "remote", remote, "suppressed", n)
	}
}

// LogAuthFailure logs a failed authentication, at most once per
// denialLogInterval per interface, remote host and reason. It never logs a
// credential: user is a SASL username or empty.
func (z *Authorizer) LogAuthFailure(log *slog.Logger, iface, mechanism, user, remote, reason string) {
	if z == nil {
		return
	}
	host := remote
	if i := strings.LastIndexByte(remote, ':'); i > 0 {
		host = remote[:i]
	}
	if n, ok := z.deny.allow("auth\x00" + iface + "\x00" + host + "\x00" + reason); ok {
		args := []any{"interface", iface, "mechanism", mechanism, "remote", remote, "reason", reason, "suppressed", n}
		if user != "" {
			args = append(args, "username", user)
		}
		log.Warn("authentication failed", args...)
	}
}

// logLimiter allows one event per key per interval and counts the rest.
// Its memory is bounded: past maxKeys keys it starts over.
type logLimiter struct {
	every time.Duration
	now   func() time.Time
	mu    sync.Mutex
	keys  map[string]*limitEntry
}

type limitEntry struct {
	last       time.Time
	suppressed int
}

const logLimiterMaxKeys = 4096

func newLogLimiter(every time.Duration) *logLimiter {
	return &logLimiter{every: every, now: time.Now, keys: map[string]*limitEntry{}}
}

// allow reports whether to log an event for key, and how many events of
// key were suppressed since the last one logged.
func (l *logLimiter) allow(key string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.now()
	e, ok := l.keys[key]
	if !ok {
		if len(l.keys) >= logLimiterMaxKeys {
			clear(l.keys)
		}
		l.keys[key] = &limitEntry{last: now}
		return 0, true
	}
	if now.Sub(e.last) < l.every {
		e.suppressed++
		return 0, false
	}
	n := e.suppressed
	e.last, e.suppressed = now, 0
	return n, true
}

// Security is the TLS and authentication of a Server's listeners; the zero
// value is plaintext and anonymous.
type Security struct {
	// HTTPTLS and KafkaTLS, when set, serve the listener over TLS
	// (NewServerTLSConfig). A config requiring client certificates makes
	// their common names principals.
	HTTPTLS  *tls.Config
	KafkaTLS *tls.Config
	// Auth holds the credentials and topic allow-lists; nil allows
	// everyone everything.
	Auth *Authorizer
}

// NewSecurity builds a Server's Security from the configuration's
// http.tls, kafka.tls and auth sections.
func NewSecurity(httpTLS, kafkaTLS TLS, auth Settings) (Security, error) {
	var s Security
	var err error
	if s.HTTPTLS, err = NewServerTLSConfig(httpTLS); err != nil {
		return Security{}, fmt.Errorf("http.tls: %w", err)
	}
	if s.KafkaTLS, err = NewServerTLSConfig(kafkaTLS); err != nil {
		return Security{}, fmt.Errorf("kafka.tls: %w", err)
	}
	if s.Auth, err = NewAuthorizer(auth); err != nil {
		return Security{}, err
	}
	return s, nil
}

// Warnings lists what an operator should know about a security setup: a
// listener that does not authenticate while others do, authentication
// without ACLs, credentials sent in clear text.
func (s Security) Warnings(http, kafka bool) []string {
	var out []string
	httpMTLS := s.HTTPTLS != nil && s.HTTPTLS.ClientAuth == tls.RequireAndVerifyClientCert
	kafkaMTLS := s.KafkaTLS != nil && s.KafkaTLS.ClientAuth == tls.RequireAndVerifyClientCert
	httpAuth := s.Auth.TokensRequired() || httpMTLS
	kafkaAuth := s.Auth.SASLRequired() || kafkaMTLS
	if http && !httpAuth && (kafkaAuth || s.Auth.HasACLs()) {
		out = append(out, "the HTTP listener does not authenticate (no auth.tokens, no http.tls.client_ca_file): its clients may do everything (read and produce to every topic, administer)")
	}
	if kafka && !kafkaAuth && (httpAuth || s.Auth.HasACLs()) {
		out = append(out, "the Kafka listener does not authenticate (no auth.sasl_plain, no kafka.tls.client_ca_file): its clients may do everything (read every topic)")
	}
	if (httpAuth && http || kafkaAuth && kafka) && !s.Auth.HasACLs() {
		out = append(out, "no auth.acls: every authenticated principal may do everything (read and produce to every topic, administer)")
	}
	if http && s.Auth.TokensRequired() && s.HTTPTLS == nil {
		out = append(out, "bearer tokens on a plaintext HTTP listener travel in clear text: configure http.tls")
	}
	if kafka && s.Auth.SASLRequired() && s.KafkaTLS == nil {
		out = append(out, "SASL/PLAIN on a plaintext Kafka listener sends passwords in clear text: configure kafka.tls")
	}
	return out
}
