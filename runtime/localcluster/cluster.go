// Package localcluster runs kueuelab's local Kubernetes control plane: etcd, kube-apiserver,
// controller-manager, scheduler, KWOK, Kueue and the operator of every kind in render's registry
// as processes on 127.0.0.1, with certificates, configs, PIDs and logs in one state dir per
// cluster (Up, Status, Down). A supervisor (supervise.go) owns the processes as the kubelet owns
// static pods: it restarts a component that exits, with backoff, and reports every component's
// state in status.json (ReadHealth), which is how the runner, `cluster status` and Up see the
// cluster. What it puts into the cluster goes through runtime/cluster, which works on any cluster
// and knows nothing of this package.
package localcluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
)

// DefaultName is the cluster `kueuelab cluster up` manages without --name.
const DefaultName = "default"

// DefaultPortBase is the first port of the default cluster's block of consecutive ports.
const DefaultPortBase = 16400

// PortBaseFor is a cluster's default port block: DefaultPortBase for the default cluster, and a
// fixed block derived from the name for others, so differently named clusters rarely collide.
func PortBaseFor(name string) int {
	if name == DefaultName {
		return DefaultPortBase
	}
	h := fnv.New32a()
	h.Write([]byte(name))
	return DefaultPortBase + 100*int(1+h.Sum32()%90)
}

// Ports are the loopback ports of one cluster's components.
type Ports struct {
	EtcdClient, EtcdPeer, EtcdMetrics       int
	APIServer, ControllerManager, Scheduler int
	KWOK                                    int
	KueueWebhook, KueueHealth, KueueMetrics int
	// Operators holds the named ports (Operator.Ports) of each operator, and of each stand-in
	// (port "api"), by component name.
	Operators map[string]map[string]int `json:"operators"`
}

// standInPort is the one port of a stand-in.
const standInPort = "api"

// PortsFrom lays out a cluster's ports as a block starting at base: the infrastructure's, then
// each operator's in registry order (the first three operators keep the offsets they had before
// the registry), then its stand-in's.
func PortsFrom(base int) Ports {
	p := Ports{
		EtcdClient: base, EtcdPeer: base + 1, EtcdMetrics: base + 2,
		APIServer: base + 3, ControllerManager: base + 4, Scheduler: base + 5,
		KWOK:         base + 6,
		KueueWebhook: base + 7, KueueHealth: base + 8, KueueMetrics: base + 9,
		Operators: map[string]map[string]int{},
	}
	next := base + 10
	for _, op := range operators() {
		m := map[string]int{}
		for _, name := range op.Ports {
			m[name] = next
			next++
		}
		p.Operators[op.Name] = m
	}
	for _, op := range operators() {
		if op.StandIn != "" {
			p.Operators[op.StandIn] = map[string]int{standInPort: next}
			next++
		}
	}
	return p
}

// NumPorts is the size of a cluster's port block.
func NumPorts() int {
	n := 10
	for _, op := range operators() {
		n += len(op.Ports)
		if op.StandIn != "" {
			n++
		}
	}
	return n
}

// all lists every port of the block.
func (p Ports) all() []int {
	out := []int{p.EtcdClient, p.EtcdPeer, p.EtcdMetrics, p.APIServer, p.ControllerManager, p.Scheduler, p.KWOK,
		p.KueueWebhook, p.KueueHealth, p.KueueMetrics}
	for _, m := range p.Operators {
		for _, port := range m {
			out = append(out, port)
		}
	}
	return out
}

// State is one cluster's persistent description (cluster.json in its state dir).
type State struct {
	Name     string `json:"name"`
	Dir      string `json:"-"`
	PortBase int    `json:"portBase"`
	Ports    Ports  `json:"ports"`
	BinDir   string `json:"binDir"`
	// Bare is Options.Bare of the last Up: kube-controller-manager runs with upstream's Job
	// batch period, as on a user's cluster.
	Bare bool `json:"bare,omitempty"`
	// RealNode is whether the cluster has a real node (Options.RealNode): the supervisor runs it
	// and the API server is configured for it.
	RealNode bool `json:"realNode,omitempty"`
}

var validName = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

// StateRoot is $XDG_STATE_HOME/kueuelab, else ~/.local/state/kueuelab.
func StateRoot() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" {
		return filepath.Join(d, "kueuelab"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("state dir: %w", err)
	}
	return filepath.Join(home, ".local", "state", "kueuelab"), nil
}

// Load reads the state of cluster name under root (StateRoot() when empty); ok is false when
// the cluster was never created.
func Load(root, name string) (*State, bool, error) {
	if !validName.MatchString(name) {
		return nil, false, fmt.Errorf("cluster name %q: want lower-case letters, digits and '-'", name)
	}
	if root == "" {
		r, err := StateRoot()
		if err != nil {
			return nil, false, err
		}
		root = r
	}
	s := &State{Name: name, Dir: filepath.Join(root, name)}
	b, err := os.ReadFile(filepath.Join(s.Dir, "cluster.json"))
	if errors.Is(err, os.ErrNotExist) {
		return s, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if err := json.Unmarshal(b, s); err != nil {
		return nil, false, fmt.Errorf("%s/cluster.json: %w", s.Dir, err)
	}
	s.Dir = filepath.Join(root, name)
	// The layout follows the registry: a cluster created before an operator was added gets its
	// ports too.
	s.Ports = PortsFrom(s.PortBase)
	return s, true, nil
}

func (s *State) save() error {
	b, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.Dir, "cluster.json"), append(b, '\n'), 0o644)
}

// Kubeconfig is the path of the cluster's admin kubeconfig.
func (s *State) Kubeconfig() string { return filepath.Join(s.Dir, "kubeconfig") }

func (s *State) path(elem ...string) string {
	return filepath.Join(append([]string{s.Dir}, elem...)...)
}

// PortFree reports whether 127.0.0.1:port can be bound now.
func PortFree(port int) error {
	l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		return err
	}
	return l.Close()
}
