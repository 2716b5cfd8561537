package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"io"
	"log/slog"
	"strconv"
)

// The configuration of listener security, as the process configuration
// (internal/app/config) embeds it: YAML keys http.tls, kafka.tls and auth.

// TLS enables TLS on a listener. Empty CertFile and KeyFile mean plaintext.
type TLS struct {
	// CertFile and KeyFile are PEM files of the server certificate chain and its key.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
	// ClientCAFile, when set, requires clients to present a certificate signed by one of its
	// PEM CAs (mutual TLS); the certificate's subject common name is the principal.
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether the listener serves TLS.
func (t TLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" }

// Settings configure authentication and authorization. With no tokens, no SASL users and no
// client CA, listeners accept anyone and ACLs must be empty. Once any ACL is configured, a
// principal may do exactly what its ACL entry allows; a principal without an entry may do
// nothing but authenticate. With no ACL at all every authenticated principal may do everything.
type Settings struct {
	// Tokens are HTTP bearer tokens ("Authorization: Bearer <token>"); when any is set the
	// HTTP API (except /healthz and /readyz) requires one.
	Tokens []Token `yaml:"tokens"`
	// SASLPlain are the SASL/PLAIN users of the Kafka listener; when any is set the listener
	// requires SASL/PLAIN (or a client certificate, with kafka.tls.client_ca_file).
	SASLPlain []PlainUser `yaml:"sasl_plain"`
	// ACLs maps a principal (token principal, SASL username or client-certificate common
	// name) to what it may do (ACL).
	ACLs map[string]ACL `yaml:"acls"`
}

// ACL is one principal's permissions, auth.acls.<principal>. In YAML it is either a list of
// topic patterns, which the principal may read and nothing else (the list form), or a mapping:
//
//	reader: [orders, "logs-*"]                          # list form: read only
//	app:    {read: [orders], groups: ["billing-*"]}     # consumer groups it may join and commit for
//	ingest: {read: ["*"], write: [orders]}              # write = produce
//	ops:    {read: ["*"], write: ["*"], groups: ["*"], admin: true}
//
// A pattern is an exact name, a prefix followed by '*', or "*" for all. Read and write do not
// imply each other; either lets the principal see the topic (Kafka's DESCRIBE: Metadata, the
// topic list, a topic's config). Admin is cluster-wide: topic create, alter and delete, reload,
// group administration and /metrics; it grants no topic's records.
type ACL struct {
	// Read are the topics the principal may fetch and list offsets of.
	Read []string `yaml:"read,omitempty" json:"read,omitempty"`
	// Write are the topics it may produce to.
	Write []string `yaml:"write,omitempty" json:"write,omitempty"`
	// Groups are the consumer groups it may join and commit offsets for (kept for the
	// consumer-group APIs; no API served today uses them).
	Groups []string `yaml:"groups,omitempty" json:"groups,omitempty"`
	// Admin allows topic administration, reload, group administration and /metrics.
	Admin bool `yaml:"admin,omitempty" json:"admin,omitempty"`
}

// ReadOnly is the ACL of the list form: read the topics, nothing else.
func ReadOnly(topics ...string) ACL { return ACL{Read: topics} }

// Token is one bearer token and the principal it authenticates.
type Token struct {
	Principal string `yaml:"principal"`
	Token     Secret `yaml:"token"`
}

// PlainUser is one SASL/PLAIN user.
type PlainUser struct {
	Username string `yaml:"username"`
	Password Secret `yaml:"password"`
}

// masked is what every printing path shows for a non-empty Secret.
const masked = "******"

// Secret is a string that never prints: String, Format (all fmt verbs, also inside structs),
// GoString, MarshalYAML, MarshalJSON, MarshalText and LogValue all give "******" ("" when
// empty). Reveal returns the value.
type Secret string

func (s Secret) shown() string {
	if s == "" {
		return ""
	}
	return masked
}

// Reveal returns the secret's value. Call it only to authenticate.
func (s Secret) Reveal() string { return string(s) }

// Equal reports whether candidate is the secret, in time independent of
// where they differ and of the secret's length: the SHA-256 digests are
// compared (subtle.ConstantTimeCompare returns at once on a length
// mismatch, which would time the secret's length).
func (s Secret) Equal(candidate string) bool {
	a, b := sha256.Sum256([]byte(s)), sha256.Sum256([]byte(candidate))
	return subtle.ConstantTimeCompare(a[:], b[:]) == 1
}

// String returns "******".
func (s Secret) String() string { return s.shown() }

// GoString returns the masked value for %#v.
func (s Secret) GoString() string { return strconv.Quote(s.shown()) }

// Format masks the secret for every fmt verb.
func (s Secret) Format(f fmt.State, _ rune) { _, _ = io.WriteString(f, s.shown()) }

// MarshalYAML masks the secret.
func (s Secret) MarshalYAML() (any, error) { return s.shown(), nil }

// MarshalJSON masks the secret.
func (s Secret) MarshalJSON() ([]byte, error) { return []byte(strconv.Quote(s.shown())), nil }

// MarshalText masks the secret.
func (s Secret) MarshalText() ([]byte, error) { return []byte(s.shown()), nil }

// LogValue masks the secret in log/slog records.
func (s Secret) LogValue() slog.Value { return slog.StringValue(s.shown()) }
