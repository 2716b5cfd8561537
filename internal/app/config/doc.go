// Package config owns the configuration of tiered's long-running processes (serve, sidecar,
// fetch): one Config type with its built-in defaults, the loader that layers a YAML file,
// TIERED_* environment variables and command-line flags over those defaults, and the one
// validation pass that reports every problem at once. It also maps Kafka's broker config names
// (log.retention.hours, log.cleaner.threads, ...) to topic configs, so broker-wide topic
// defaults can sit under per-topic overrides.
//
// # Processes
//
// LoadOptions.Process names the daemon the configuration is for. It picks that daemon's
// built-in defaults (DefaultsFor: the sidecar has no HTTP listener unless http.addr is set and
// no Kafka listener) and adds its requirements to validation (ValidateFor: the sidecar needs
// sidecar.kafka_log_dir and an explicit bucket, fetch an explicit bucket). A process ignores
// the sections it does not use, and validation does not hold them against it, so one file
// can configure several daemons (the sidecar and fetch of a deployment, say).
//
// # Precedence
//
// Later layers win, key by key:
//
//	built-in defaults  <  YAML file (--config FILE)  <  TIERED_* environment  <  command-line flags
//
// Only flags the user actually gave count as a layer (LoadOptions.Flags); a flag's own default
// never overrides the file or the environment. Mappings (broker, auth.acls) merge key by key
// across layers; lists (auth.tokens, auth.sasl_plain) and each principal's auth.acls entry
// are replaced as a whole.
//
// # ACLs
//
// auth.acls maps a principal to what it may do, in the list form (topics it may read, and
// nothing else) or the mapping form (fetchcache/auth.ACL):
//
//	auth:
//	  acls:
//	    reader: [orders, "logs-*"]                         # list form = read only
//	    app:    {read: ["orders"], groups: ["billing-*"]}  # groups it may join and commit for
//	    ingest: {read: ["*"], write: ["orders"]}           # write = produce
//	    ops:    {read: ["*"], write: ["*"], groups: ["*"], admin: true}
//
// A mapping key other than read, write, groups and admin, a value of the wrong type, and a bad
// pattern (a '*' not at the end, a topic name Kafka refuses, an empty group) are refused with
// their key path, e.g. auth.acls.ingest.write[1].
//
// # YAML file
//
// Keys are the yaml tags of Config, e.g.
//
//	data_dir: /var/lib/tiered
//	bucket: s3://logs/tiered?endpoint=http://127.0.0.1:9000&region=us-east-1&path_style=true
//	sidecar:
//	  kafka_log_dir: /var/lib/kafka/data
//	  bootstrap_server: "localhost:9092"
//	  deleted_topic_retention: 24h     # 0 = at once, -1 = keep
//	  topics:                          # remotetier/policy: first match wins, no match = not tiered
//	    - {match: "orders", retention.ms: 7776000000, retention.bytes: -1}
//	    - {match: "scratch-*", tier: false}
//	uploader: {interval: 10s, concurrency: 4, bytes_per_second: 50MiB}
//	http: {addr: 127.0.0.1:8080}
//	fetch: {cache_bytes: 1GiB, chunk_bytes: 4MiB}
//	broker:
//	  log.retention.hours: 72
//	  log.cleaner.threads: 2
//
// sidecar.topics rules are checked by remotetier/policy.Validate (match a name or a valid
// glob, retention -1 or >= 0, no retention on a tier: false rule, no rule shadowed by an
// identical earlier match), each problem at its key path (sidecar.topics[1].match). The
// sidecar's --topics 'orders,logs-*' flag replaces the rules with one per item.
//
// Unknown keys, duplicate keys and values of the wrong type are refused with the file name,
// line and key path. A key with no value (null) leaves the default in place. Sizes are bytes,
// written as an integer or with a unit (KiB, MiB, GiB, TiB; KB, MB, GB, TB; K, M, G, T are
// binary). Durations are Go durations ("30s", "5m", "1h").
//
// # Environment
//
// Every key has one variable: TIERED_ followed by the key path in upper case with every '.'
// replaced by '_'. Examples: data_dir → TIERED_DATA_DIR, sidecar.kafka_log_dir →
// TIERED_SIDECAR_KAFKA_LOG_DIR, fetch.cache_bytes →
// TIERED_FETCH_CACHE_BYTES, http.tls.cert_file → TIERED_HTTP_TLS_CERT_FILE, broker key
// log.retention.ms → TIERED_BROKER_LOG_RETENTION_MS. Scalars are taken literally; lists and
// mappings (TIERED_AUTH_TOKENS, TIERED_AUTH_ACLS, TIERED_BROKER) are YAML flow text, e.g.
// TIERED_AUTH_TOKENS='[{principal: ci, token: s3cret}]'. A TIERED_* variable whose first word
// names a config section (TIERED_FETCH_..., TIERED_BROKER_...) but no key is refused; other
// TIERED_* variables (tools and tests use some) are ignored.
//
// # Secrets
//
// Bearer tokens and SASL passwords have type Secret, whose String, Format (every fmt verb),
// GoString, MarshalYAML, MarshalJSON, MarshalText and LogValue all print "******". Only
// Secret.Reveal returns the value. Error messages never quote a secret's value.
package config
