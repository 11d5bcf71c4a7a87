package cluster

import (
	"context"
	"fmt"
	"io"
	"text/tabwriter"
)

// ComponentStatus is one row of `cluster status`.
type ComponentStatus struct {
	Name    string
	PID     int
	Running bool
	Healthy bool
	Detail  string
	RSSKB   int64
}

// Status probes every component of cluster name.
func Status(ctx context.Context, root, name string) (*State, []ComponentStatus, error) {
	if root == "" {
		r, err := StateRoot()
		if err != nil {
			return nil, nil, err
		}
		root = r
	}
	s, exists, err := Load(root, name)
	if err != nil {
		return nil, nil, err
	}
	if !exists {
		return nil, nil, fmt.Errorf("no cluster %q under %s (run `kueuelab cluster up --name %s`)", name, root, name)
	}
	p, err := ensurePKIReadOnly(s.path("pki"))
	if err != nil {
		return nil, nil, err
	}
	specs, err := s.specs(s.binaries(), p)
	if err != nil {
		return nil, nil, err
	}
	var rows []ComponentStatus
	for _, n := range Components() {
		sp := specs[n]
		row := ComponentStatus{Name: n}
		row.PID, row.Running = s.running(n, sp.bin)
		switch {
		case !row.Running:
			row.Detail = "not running"
		default:
			row.RSSKB = rssKB(row.PID)
			if err := sp.health(ctx); err != nil {
				row.Detail = err.Error()
			} else {
				row.Healthy, row.Detail = true, "ok"
			}
		}
		rows = append(rows, row)
	}
	return s, rows, nil
}

// PrintStatus writes the status table and the stack's total RSS.
func PrintStatus(w io.Writer, s *State, rows []ComponentStatus) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "COMPONENT\tPID\tHEALTH\tRSS\n")
	var total int64
	for _, r := range rows {
		pid := "-"
		if r.Running {
			pid = fmt.Sprint(r.PID)
		}
		rss := "-"
		if r.RSSKB > 0 {
			rss = fmt.Sprintf("%d MB", r.RSSKB/1024)
			total += r.RSSKB
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Name, pid, r.Detail, rss)
	}
	tw.Flush()
	fmt.Fprintf(w, "total RSS %d MB; kubeconfig %s\n", total/1024, s.Kubeconfig())
}

// Healthy reports whether every component is running and healthy.
func Healthy(rows []ComponentStatus) bool {
	for _, r := range rows {
		if !r.Healthy {
			return false
		}
	}
	return true
}
