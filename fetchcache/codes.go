package fetchcache

// The /v1 HTTP API's and the Kafka listener's one vocabulary of result
// codes: the "code" of every HTTP error body (reads, and serve's write
// routes) and the {code} label of tiered_fetch_requests_total. They use
// Kafka's error names where one fits.

// Result codes of reads, over HTTP and Kafka.
const (
	CodeOK                      = "OK"
	CodeInvalidRequest          = "INVALID_REQUEST"
	CodeUnknownTopicOrPartition = "UNKNOWN_TOPIC_OR_PARTITION"
	CodeOffsetOutOfRange        = "OFFSET_OUT_OF_RANGE"
	CodeThrottled               = "THROTTLED"
	CodeUnsupportedVersion      = "UNSUPPORTED_VERSION" // Kafka: an API or version not served
	CodePolicyViolation         = "POLICY_VIOLATION"    // Kafka: Produce to the read-only service
	CodeNotFound                = "NOT_FOUND"           // HTTP: no such route
	CodeNotAcceptable           = "NOT_ACCEPTABLE"      // HTTP: no servable media type in Accept
	CodeInternal                = "INTERNAL"            // storage or other server-side failure

	CodeUnauthorized             = "UNAUTHORIZED"               // HTTP 401: no or a bad bearer token
	CodeTopicAuthorizationFailed = "TOPIC_AUTHORIZATION_FAILED" // HTTP 403 / Kafka: a topic the principal may not read, produce to or describe
	// CodeClusterAuthorizationFailed: HTTP 403 for a route needing admin
	// (topic create and alter, reload, /metrics) to a principal without it.
	CodeClusterAuthorizationFailed = "CLUSTER_AUTHORIZATION_FAILED"
	CodeSASLAuthenticationFailed   = "SASL_AUTHENTICATION_FAILED" // Kafka: bad SASL/PLAIN credentials
	CodeUnsupportedSASLMechanism   = "UNSUPPORTED_SASL_MECHANISM" // Kafka: a mechanism other than PLAIN
	CodeIllegalSASLState           = "ILLEGAL_SASL_STATE"         // Kafka: a request out of authentication order
)

// Result codes of the Kafka consumer-group APIs.
const (
	CodeGroupAuthorizationFailed = "GROUP_AUTHORIZATION_FAILED" // a group the principal's groups patterns do not allow
	CodeCoordinatorNotAvailable  = "COORDINATOR_NOT_AVAILABLE"  // no coordinator, or a bucket the service may only read
	CodeNotCoordinator           = "NOT_COORDINATOR"            // another fetch replica coordinates the group
	// CodeGroupMembership: the protocol's own flow — REBALANCE_IN_PROGRESS,
	// ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, MEMBER_ID_REQUIRED,
	// FENCED_INSTANCE_ID, NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND, ….
	CodeGroupMembership = "GROUP_MEMBERSHIP"
)

// CodeCorruptMessage is the result code of a read that found stored data
// failing its checks (a batch CRC, an object's size or checksum against
// its manifest, an index that cannot be right): HTTP 500 with this code,
// Kafka CORRUPT_MESSAGE. The bytes are never served.
const CodeCorruptMessage = "CORRUPT_MESSAGE"

// Result codes of serve's write routes (topic create/alter, produce,
// reload); the read codes above apply to them too.
const (
	CodeTopicAlreadyExists = "TOPIC_ALREADY_EXISTS"
	CodeInvalidConfig      = "INVALID_CONFIG"
	CodeInvalidTopic       = "INVALID_TOPIC_EXCEPTION"
	CodeInvalidPartitions  = "INVALID_PARTITIONS"
	CodeInvalidRecord      = "INVALID_RECORD"
	CodeInvalidTimestamp   = "INVALID_TIMESTAMP" // a record timestamp outside message.timestamp.before/after.max.ms
	CodeRecordListTooLarge = "RECORD_LIST_TOO_LARGE"
	CodeLeaderNotAvailable = "LEADER_NOT_AVAILABLE" // still recovering
	CodeStorageError       = "KAFKA_STORAGE_ERROR"
	CodeReloadFailed       = "RELOAD_FAILED"
	CodeRequestTimedOut    = "REQUEST_TIMED_OUT" // HTTP 408: a request body too slow to arrive
)
