package httpapi

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/tiered/tiered/fetchcache"
	"github.com/tiered/tiered/fetchcache/auth"
)

// HTTP authentication failures answer 401 with this challenge (RFC 6750).
const httpAuthRealm = `Bearer realm="tiered"`

// guard authenticates every request except /healthz and /readyz, refuses
// a request naming a topic its principal may not read (any route under
// /v1/topics/{topic}/, serve's produce and config routes included) with
// 403 TOPIC_AUTHORIZATION_FAILED, and passes the principal on in the
// request context (auth.PrincipalFromContext). /metrics is authenticated like
// the API, because metric labels carry topic names.
func (a *httpAPI) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/healthz" || r.URL.Path == "/readyz" {
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
		if topic, ok := pathTopic(r); ok && !a.auth.Allowed(p, topic) {
			a.counted(func(w *countingWriter, r *http.Request) {
				a.auth.LogDenied(a.log, fetchcache.InterfaceHTTP, p, topic, r.RemoteAddr)
				w.fail(http.StatusForbidden, fetchcache.CodeTopicAuthorizationFailed, fmt.Sprintf("%s may not read topic %q", p, topic))
			}).ServeHTTP(rw, r)
			return
		}
		next.ServeHTTP(rw, r.WithContext(auth.WithPrincipal(r.Context(), p)))
	})
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

// pathTopic returns the topic a /v1/topics/{topic}/... path names, split
// and unescaped exactly as http.ServeMux fills {topic}.
func pathTopic(r *http.Request) (string, bool) {
	rest, ok := strings.CutPrefix(r.URL.EscapedPath(), "/v1/topics/")
	if !ok {
		return "", false
	}
	seg, _, _ := strings.Cut(rest, "/")
	if seg == "" {
		return "", false
	}
	topic, err := url.PathUnescape(seg)
	if err != nil {
		return seg, true
	}
	return topic, true
}
