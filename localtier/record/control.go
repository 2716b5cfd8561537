package record

import (
	"encoding/binary"
	"fmt"
)

// Control record types (the type field of a control record key).
const (
	ControlAbort        int16 = 0
	ControlCommit       int16 = 1
	ControlLeaderChange int16 = 2
	// KRaft's own control records (__cluster_metadata and snapshots).
	ControlSnapshotHeader int16 = 3
	ControlSnapshotFooter int16 = 4
	ControlKRaftVersion   int16 = 5
	ControlKRaftVoters    int16 = 6
)

// ControlTypeName names a control record type; unknown types print as a number.
func ControlTypeName(t int16) string {
	switch t {
	case ControlAbort:
		return "abort"
	case ControlCommit:
		return "commit"
	case ControlLeaderChange:
		return "leader change"
	case ControlSnapshotHeader:
		return "snapshot header"
	case ControlSnapshotFooter:
		return "snapshot footer"
	case ControlKRaftVersion:
		return "kraft version"
	case ControlKRaftVoters:
		return "kraft voters"
	default:
		return fmt.Sprintf("control type %d", t)
	}
}

// ParseControlKey decodes a control record key: version i16, type i16.
func ParseControlKey(key []byte) (version, typ int16, err error) {
	if len(key) < 4 {
		return 0, 0, fmt.Errorf("parse control key: %d bytes, need 4", len(key))
	}
	return int16(binary.BigEndian.Uint16(key)), int16(binary.BigEndian.Uint16(key[2:])), nil
}

// ParseEndTxnValue decodes an end-transaction marker value: version i16,
// coordinator epoch i32.
func ParseEndTxnValue(value []byte) (version int16, coordinatorEpoch int32, err error) {
	if len(value) < 6 {
		return 0, 0, fmt.Errorf("parse end transaction marker: %d bytes, need 6", len(value))
	}
	return int16(binary.BigEndian.Uint16(value)), int32(binary.BigEndian.Uint32(value[2:])), nil
}

// EndTxnMarker returns the key and value of a commit or abort marker record.
func EndTxnMarker(commit bool, coordinatorEpoch int32) (key, value []byte) {
	key = make([]byte, 4)
	if commit {
		binary.BigEndian.PutUint16(key[2:], uint16(ControlCommit))
	}
	value = make([]byte, 6)
	binary.BigEndian.PutUint32(value[2:], uint32(coordinatorEpoch))
	return key, value
}
