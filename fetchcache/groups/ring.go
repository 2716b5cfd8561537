package groups

import "fmt"

// Node is a fetch replica as FindCoordinator names it: the node id and the
// advertised Kafka address.
type Node struct {
	ID   int32
	Host string
	Port int32
}

func (n Node) String() string { return fmt.Sprintf("%d@%s:%d", n.ID, n.Host, n.Port) }

// Ring decides which fetch replica coordinates a group: the ownership hook
// the fleet (fetch.peers, leases, rendezvous hashing) implements.
// Coordinator returns the node that coordinates group and whether it is
// this replica (self). When self is true the listener answers the group's
// requests and names itself in FindCoordinator (node may then be the zero
// Node: the listener knows its own advertised address); when false the
// listener names node in FindCoordinator and answers the group's other
// requests NOT_COORDINATOR. An error (no live replica known yet) is
// answered COORDINATOR_NOT_AVAILABLE, which clients retry.
type Ring interface {
	Coordinator(group string) (node Node, self bool, err error)
}

// Alone is the Ring of a fetch service that runs alone: it coordinates
// every group.
type Alone struct{}

// Coordinator implements Ring: always this replica.
func (Alone) Coordinator(string) (Node, bool, error) { return Node{}, true, nil }
