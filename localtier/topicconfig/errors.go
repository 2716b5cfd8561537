package topicconfig

import (
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/tiered/tiered/internal/x/kafkaerr"
)

// InvalidConfigError is one refused topic config: an unknown name, a value that does not parse,
// a value out of range, or a conflict between two configs. Its message uses Kafka's wording.
type InvalidConfigError struct {
	// Name is the config the problem is reported against.
	Name string
	// Value is the offending value as Kafka prints it (the raw string when it did not parse).
	Value string
	// Reason says what is wrong, e.g. "Value must be at least 1048576".
	Reason string

	// standalone: Reason is the whole message (Kafka throws these without the
	// "Invalid value ... for configuration ..." prefix).
	standalone bool
	// cross: a cross-field problem; Parse reports these after the per-name ones.
	cross bool
}

// Error returns Kafka's message, e.g.
// "Invalid value 5 for configuration segment.bytes: Value must be at least 1048576" or
// "Unknown topic config name: foo".
func (e *InvalidConfigError) Error() string {
	if e.standalone {
		return e.Reason
	}
	return "Invalid value " + e.Value + " for configuration " + e.Name + ": " + e.Reason
}

// Is makes errors.Is(err, kafkaerr.ErrInvalidConfig) true.
func (e *InvalidConfigError) Is(target error) bool { return target == kafkaerr.ErrInvalidConfig }

// Unknown reports whether the error is about a config name that does not exist.
func (e *InvalidConfigError) Unknown() bool {
	return e.standalone && strings.HasPrefix(e.Reason, "Unknown topic config name: ")
}

// joinErrors is errors.Join that returns a nil error for no errors.
func joinErrors(errs []error) error {
	if len(errs) == 0 {
		return nil
	}
	return errors.Join(errs...)
}

// sortErrors orders per-name problems by name (stable, so a name's problems keep their order),
// cross-field problems last.
func sortErrors(errs []error) {
	key := func(err error) (bool, string) {
		var ice *InvalidConfigError
		if errors.As(err, &ice) {
			return ice.cross, ice.Name
		}
		return true, ""
	}
	slices.SortStableFunc(errs, func(a, b error) int {
		ca, na := key(a)
		cb, nb := key(b)
		if ca != cb {
			if ca {
				return 1
			}
			return -1
		}
		if ca {
			return 0 // cross-field problems keep the order the rules ran in
		}
		return strings.Compare(na, nb)
	})
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
