// Package snapshot reads a live cluster running Kueue into a snapshot directory (package
// model/state), the state a forecast starts from. Its queues, flavors and nodes become a kueuelab
// cluster spec, each pending or admitted Workload a trace workload with its times and admission,
// and the finished Workloads a history trace, as `trace import --from-cluster` writes it. What
// the spec cannot express is a named warning, or an error where no honest approximation exists.
package snapshot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kueuelab/kueuelab/model/importer"
	"github.com/kueuelab/kueuelab/model/state"
	"github.com/kueuelab/kueuelab/model/trace"
	rcluster "github.com/kueuelab/kueuelab/render/cluster"
	"github.com/kueuelab/kueuelab/runtime/history"
	"github.com/kueuelab/kueuelab/runtime/kueueclock"
	"github.com/kueuelab/kueuelab/runtime/kueuewl"
)

// Options tune Read.
type Options struct {
	// Now is the wall clock (nil: time.Now).
	Now func() time.Time
	// Source says where the state was read (state.yaml's source).
	Source string
	// KueueVersion is the cluster's Kueue version when known (FromKubeconfig reads it).
	KueueVersion string
	// Name is the state's and the spec's metadata.name.
	Name string
}

// Snapshot is what Read found, ready to Write.
type Snapshot struct {
	// Spec is the cluster spec as loaded back by render/cluster (validated); SpecYAML its file.
	Spec     *rcluster.Spec
	SpecYAML []byte
	State    *state.State
	// Live is the trace of the live workloads; History of the finished ones (nil: none).
	Live, History *importer.Result
	// Warnings name what the spec or the state could not express and how it was approximated.
	Warnings []string
	// Clock says which clock the times are on.
	Clock string
	// KueueConfig, when read (FromConfig), is the part of the cluster's Kueue Configuration a
	// forecast replays, a v1beta2 Configuration document; KueueConfigSource says where it was.
	KueueConfig       []byte
	KueueConfigSource string
}

// PlaceholderDurationSec is the trace duration of a live workload whose duration is unknown (no
// kueuelab.io/duration-sec on its pods): its state has no remainingSec, so a forecast draws it.
const PlaceholderDurationSec = 3600

// Read reads the cluster behind c. c's scheme needs the core types and kueuewl.AddToScheme
// (runtime/cluster.Scheme has both). It needs cluster-wide list access to Kueue's queue objects,
// Workloads, Nodes and Namespaces; a 403 is an error naming the permission.
func Read(ctx context.Context, c client.Reader, opts Options) (*Snapshot, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	q, err := kueuewl.ReadQueues(ctx, c)
	if err != nil {
		return nil, err
	}
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		return nil, kueuewl.ListFailed(err, "nodes", "")
	}
	var nss corev1.NamespaceList
	if err := c.List(ctx, &nss); err != nil {
		return nil, kueuewl.ListFailed(err, "namespaces", "")
	}
	items, err := history.Read(ctx, c, history.Options{})
	if err != nil {
		if apierrors.IsForbidden(err) {
			return nil, kueuewl.ListFailed(err, "workloads", kueuewl.Group)
		}
		return nil, err
	}
	s := &Snapshot{}
	clk, err := s.readClock(ctx, c)
	if err != nil {
		return nil, err
	}
	b := &builder{snap: s, q: q, nodes: nodes.Items, namespaces: nss.Items, items: items, clock: clk, now: opts.Now(), opts: opts}
	if err := b.build(); err != nil {
		return nil, err
	}
	return s, nil
}

// readClock reads the trace clock a replay on kueuelab's local cluster publishes (nil: none, the
// times are wall times).
func (s *Snapshot) readClock(ctx context.Context, c client.Reader) (*kueueclock.Published, error) {
	var cm corev1.ConfigMap
	err := c.Get(ctx, client.ObjectKey{Namespace: kueueclock.PublishedNamespace, Name: kueueclock.PublishedName}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case apierrors.IsForbidden(err):
		s.warn("ConfigMap/%s/%s: cannot be read (RBAC get configmaps in %s): if a kueuelab replay runs here, its times are read as wall times",
			kueueclock.PublishedNamespace, kueueclock.PublishedName, kueueclock.PublishedNamespace)
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("read the published trace clock %s/%s: %w", kueueclock.PublishedNamespace, kueueclock.PublishedName, err)
	}
	p, err := kueueclock.ParsePublished(cm.Data)
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (s *Snapshot) warn(format string, args ...any) {
	s.Warnings = append(s.Warnings, fmt.Sprintf(format, args...))
}

// Write writes the snapshot directory: state.yaml, cluster.yaml, workloads.jsonl and, when
// there is a history, history.jsonl.
func (s *Snapshot) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	var head bytes.Buffer
	fmt.Fprintf(&head, "# Read from a live cluster by kueuelab snapshot (%s).\n", s.Clock)
	if len(s.Warnings) > 0 {
		head.WriteString("# What the spec could not express, and how it was approximated:\n")
		for _, w := range s.Warnings {
			fmt.Fprintf(&head, "#   %s\n", strings.ReplaceAll(w, "\n", " "))
		}
	}
	if err := os.WriteFile(filepath.Join(dir, state.ClusterFile), append(head.Bytes(), s.SpecYAML...), 0o644); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	if err := writeTrace(filepath.Join(dir, state.TraceFile), s.Live); err != nil {
		return err
	}
	if s.History != nil {
		if err := writeTrace(filepath.Join(dir, state.HistoryFile), s.History); err != nil {
			return err
		}
	}
	if len(s.KueueConfig) > 0 {
		head := fmt.Sprintf("# Read from %s by kueuelab snapshot: the part of Kueue's Configuration a forecast replays.\n", s.KueueConfigSource)
		if err := os.WriteFile(filepath.Join(dir, state.KueueConfigFile), append([]byte(head), s.KueueConfig...), 0o644); err != nil {
			return fmt.Errorf("snapshot: %w", err)
		}
	}
	b, err := state.Marshal(s.State)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, state.StateFile), b, 0o644); err != nil {
		return fmt.Errorf("snapshot: %w", err)
	}
	return nil
}

func writeTrace(path string, res *importer.Result) error {
	fw, err := trace.Create(path)
	if err != nil {
		return err
	}
	if res != nil {
		if err := res.Write(fw.Writer); err != nil {
			_ = fw.Close()
			return fmt.Errorf("snapshot: %s: %w", path, err)
		}
	}
	if err := fw.Close(); err != nil {
		return fmt.Errorf("snapshot: %s: %w", path, err)
	}
	return nil
}

// fatal gathers the problems that stop a snapshot into one error.
func fatal(problems []string) error {
	if len(problems) == 0 {
		return nil
	}
	slices.Sort(problems)
	return errors.New("snapshot: the cluster spec cannot express what Kueue decides by:\n  " + strings.Join(problems, "\n  "))
}
