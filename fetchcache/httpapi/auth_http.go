package httpapi

import (
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
)

// HTTP authentication failures answer 401 with this challenge (RFC 6750).
const httpAuthRealm = `Bearer realm="tiered"`

// guard authenticates every request except those of the public paths
// (/healthz, /readyz) and passes the principal on in the request context
// (auth.PrincipalFromContext); authorize then checks the route's
// permission.
//
// Every request body must arrive within BodyReadTimeout, whether its route
// reads it or not: a route that does not (every GET, a write refused before
// its body) leaves net/http to discard it, before the response is flushed
// or within its first large write, and a declared body that never comes
// would hold the connection and the handler for ever. The deadline is
// lifted once the body has been read to its end (a route reading one arms
// its own, bodyDeadline).
func (a *httpAPI) guard(public map[string]bool, next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.ContentLength != 0 {
			r.Body = &deadlineBody{ReadCloser: r.Body, done: a.bodyDeadline(rw)}
		}
		if public[r.URL.Path] {
			next.ServeHTTP(rw, r)
			return
		}
		p, failure := a.principal(r)
		if failure != "" {
			a.counted(func(w *countingWriter, r *http.Request) {
				challenge := httpAuthRealm
				if failure == "invalid token" {
					challenge += `, error="invalid_token"`
				}
				w.Header().Set("WWW-Authenticate", challenge)
				a.auth.LogAuthFailure(a.log, fetchcache.InterfaceHTTP, auth.MechanismToken, "", r.RemoteAddr, failure)
				w.fail(http.StatusUnauthorized, fetchcache.CodeUnauthorized, "authentication required: "+failure+` (send "Authorization: Bearer <token>")`)
			}).ServeHTTP(rw, r)
			return
		}
		next.ServeHTTP(rw, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
}

// verbs says what a principal denied a topic permission may not do.
var verbs = map[auth.Permission]string{auth.PermDescribe: "describe", auth.PermRead: "read", auth.PermWrite: "produce to"}

// authorize answers a request its principal may not make on rt with 403:
// TOPIC_AUTHORIZATION_FAILED for the {topic} of a describe, read or write
// route, CLUSTER_AUTHORIZATION_FAILED for an admin route (and an audit line
// for a change refused). The check comes before the body is read.
func (a *httpAPI) authorize(rt Route, next http.Handler) http.Handler {
	if rt.Perm == auth.PermNone {
		return next
	}
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		p := auth.PrincipalFromContext(r.Context())
		topic := r.PathValue("topic")
		switch {
		case rt.Perm == auth.PermAdmin && !a.auth.May(p, auth.PermAdmin, ""):
			if rt.Audit != "" {
				action, target := auditOf(rt, r)
				auth.Audit(a.log, p, action, target, auth.AuditDenied)
			}
			a.auth.LogDenied(a.log, fetchcache.InterfaceHTTP, p, auth.PermAdmin, "", r.RemoteAddr)
			a.deny(rw, r, fetchcache.CodeClusterAuthorizationFailed, fmt.Sprintf("%s may not administer the cluster (%s needs admin)", p, rt.Pattern))
		case rt.Perm != auth.PermAdmin && topic != "" && !a.auth.May(p, rt.Perm, topic):
			a.auth.LogDenied(a.log, fetchcache.InterfaceHTTP, p, rt.Perm, topic, r.RemoteAddr)
			a.deny(rw, r, fetchcache.CodeTopicAuthorizationFailed, fmt.Sprintf("%s may not %s topic %q", p, verbs[rt.Perm], topic))
		default:
			next.ServeHTTP(rw, r)
		}
	})
}

// deny answers 403 with code, counted as every API request is.
func (a *httpAPI) deny(rw http.ResponseWriter, r *http.Request, code, msg string) {
	a.counted(func(w *countingWriter, _ *http.Request) { w.fail(http.StatusForbidden, code, msg) }).ServeHTTP(rw, r)
}

// auditOf is the audit action and target of a change route before its body
// is read: the route's action, but group.delete_offsets with "group/topic"
// for DELETE /v1/groups/{group}?topic=T (as the handler logs it).
func auditOf(rt Route, r *http.Request) (action, target string) {
	if topic := r.URL.Query().Get("topic"); rt.Audit == AuditGroupDelete && topic != "" {
		return AuditGroupDeleteOffsets, r.PathValue("group") + "/" + topic
	}
	return rt.Audit, auditTarget(rt, r)
}

// auditTarget is what a change route acts on before its body is read: the
// {topic}, the {group}, "config" for reload, else "topics".
func auditTarget(rt Route, r *http.Request) string {
	switch {
	case r.PathValue("topic") != "":
		return r.PathValue("topic")
	case r.PathValue("group") != "":
		return r.PathValue("group")
	case rt.Audit == AuditReload:
		return "config"
	}
	return "topics"
}

// principal authenticates r: a bearer token when tokens are configured,
// else (or without an Authorization header) a verified client certificate,
// else the anonymous principal if the listener requires neither. failure
// says why authentication failed; it never quotes the credential.
func (a *httpAPI) principal(r *http.Request) (auth.Principal, string) {
	certP, hasCert := auth.CertPrincipal(r.TLS)
	if !a.auth.TokensRequired() {
		return certP, "" // the zero auth.Principal without a certificate
	}
	h := r.Header.Get("Authorization")
	if h == "" {
		if hasCert {
			return certP, ""
		}
		return auth.Principal{}, "no bearer token"
	}
	scheme, token, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return auth.Principal{}, "authorization scheme is not Bearer"
	}
	p, ok := a.auth.AuthenticateToken(strings.TrimSpace(token))
	if !ok {
		return auth.Principal{}, "invalid token"
	}
	return p, ""
}

// deadlineBody lifts its request's body read deadline (done) once the body
// has been read to its end.
type deadlineBody struct {
	io.ReadCloser
	done func()
}

func (b *deadlineBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.done()
	}
	return n, err
}
