package cli

import (
	"net/http"
	"os"
)

// TokenEnv names the environment variable whose value the CLI's HTTP
// clients (--server, --fetch) send as a bearer token, for a serve or fetch
// process with auth.tokens set. An environment variable rather than a flag,
// so the token does not show in the process list or the shell history.
const TokenEnv = "TIERED_TOKEN"

// bearer adds an Authorization header to every request it sends.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// newHTTPClient is the HTTP client of the commands that talk to a running
// tiered process: its own transport (close it with CloseIdleConnections),
// with $TIERED_TOKEN as the bearer token when set.
func newHTTPClient() *http.Client {
	var rt http.RoundTripper = http.DefaultTransport.(*http.Transport).Clone()
	if tok := os.Getenv(TokenEnv); tok != "" {
		rt = bearer{token: tok, next: rt}
	}
	return &http.Client{Transport: rt}
}

// tokenHint is what a 401 answer tells the user to do.
const tokenHint = "set " + TokenEnv + " to one of the server's auth.tokens"

// statusHint is the hint for an HTTP error status, in parentheses, or "".
func statusHint(status int) string {
	if status == http.StatusUnauthorized {
		return " (" + tokenHint + ")"
	}
	return ""
}
